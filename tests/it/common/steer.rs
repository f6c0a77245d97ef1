//! Helpers for the steering-over-MQTT tests: the small site tuned so its state
//! holds still, asking HTTP and RPC the same thing, and reading the state and
//! the history.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::broker::{Broker, Subscriber};
use super::mqtt::{self, plain_url, rpc, ROOT};
use super::site::{SmallSite, READ_TOKEN, STEER_TOKEN};

pub const T: Duration = Duration::from_secs(20);
/// Polled once, then not for an hour.
const ONCE: u64 = 3_600_000;
pub const SITE: &str = "ste_test";

/// The small site, evaluated only on changes and refreshed hourly, so its state
/// stays put between an HTTP and an RPC call.
pub fn config(broker: &Broker) -> String {
    mqtt::small_site(ONCE)
        .control_interval_ms(3_600_000)
        .revert_timeout_s(7200)
        .mqtt(&plain_url(broker.addr("5")), "5")
        .text()
}

/// The site on `broker`, every device polled, the uplink listening for RPC;
/// with a client that hears RPC answers.
pub async fn start(broker: &Broker) -> (SmallSite, Subscriber) {
    let sub = Subscriber::connect(
        broker.addr("5"),
        "steer-client",
        &format!("{ROOT}/rpc/response/#"),
    )
    .await;
    let site = mqtt::start(&config(broker)).await;
    site.ready().await;
    mqtt::wait_connected(&site, true, T).await;
    (site, sub)
}

/// `minutes` from now, in epoch ms.
pub fn until(minutes: i64) -> i64 {
    sitegate::model::time::now_ms() + minutes * 60_000
}

/// The token an HTTP call of `method` needs.
pub fn token_for(method: &str) -> &'static str {
    if method == "GET" {
        READ_TOKEN
    } else {
        STEER_TOKEN
    }
}

/// `v` without the member `key`.
pub fn without(v: &Value, key: &str) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove(key);
    }
    v
}

/// Asks over HTTP, RPC, HTTP; the RPC answer must equal the HTTP one whenever
/// the two HTTP answers agree (else the state moved: ask again).
pub async fn same_answer(
    site: &SmallSite,
    sub: &mut Subscriber,
    id: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) {
    let m = Method::from_bytes(method.as_bytes()).expect("method");
    for attempt in 0..5 {
        let before = site
            .call(m.clone(), path, Some(token_for(method)), body.as_ref())
            .await;
        let request =
            json!({"id": format!("{id}-{attempt}"), "method": method, "path": path, "body": body});
        let answer = rpc(sub, request).await;
        let after = site
            .call(m.clone(), path, Some(token_for(method)), body.as_ref())
            .await;
        if before != after {
            continue;
        }
        assert_eq!(
            answer["status"],
            before.0.as_u16(),
            "{method} {path}: {answer}"
        );
        assert_eq!(answer["body"], before.1, "{method} {path}");
        return;
    }
    panic!("{method} {path}: the answer kept changing");
}

/// Waits until no device of the site waits for a write; returns the state.
pub async fn settled(site: &SmallSite) -> Value {
    super::wait_for("settled devices", T, || async {
        let s = site.get_ok(&format!("/sites/{SITE}/steering")).await;
        let settled = s["devices"]
            .as_array()?
            .iter()
            .all(|d| d["state"] != "pending");
        settled.then_some(s)
    })
    .await
}

/// Request entries of the history with this request id.
pub async fn audited(site: &SmallSite, request_id: &Value) -> Vec<Value> {
    let history = site
        .get_ok(&format!("/sites/{SITE}/steering/history"))
        .await;
    history
        .as_array()
        .expect("array")
        .iter()
        .filter(|e| e["type"] == "request" && &e["requestId"] == request_id)
        .cloned()
        .collect()
}
