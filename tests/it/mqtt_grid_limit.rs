//! `gridLimit` over the MQTT RPC bridge, on both brokers: a temporary limit
//! set, a looser one refused with the same problem as over HTTP, the retained
//! steering state carrying the component and the limit in force, and the
//! component ended by DELETE.

use crate::common::broker::{kinds, Broker, Kind, Message, Subscriber};
use crate::common::mqtt::{rpc, ROOT};
use crate::common::site::STEER_TOKEN;
use crate::common::steer::{start, until, SITE, T};
use reqwest::Method;
use serde_json::{json, Value};

fn is_steering(m: &Message) -> bool {
    m.topic == format!("{ROOT}/sites/{SITE}/steering")
}

async fn grid_limit_over_rpc(kind: Kind) {
    let broker = Broker::start(kind).await;
    let mut watch =
        Subscriber::connect(broker.addr("5"), "grid-watch", &format!("{ROOT}/sites/#")).await;
    let (site, mut sub) = start(&broker).await;
    let path = format!("/sites/{SITE}/steering/grid-limit");

    // Looser than the configured 20 kW export: the same 400 as over HTTP.
    let loose =
        json!({"setting": {"maxExport": {"value": 25, "unit": "kW"}}, "validUntil": until(30)});
    let answer = rpc(
        &mut sub,
        json!({"id": "gl-loose", "method": "POST", "path": path, "body": loose, "token": STEER_TOKEN}),
    )
    .await;
    let (status, http) = site
        .call(Method::POST, &path, Some(STEER_TOKEN), Some(&loose))
        .await;
    assert_eq!(
        (answer["status"].as_u64(), status.as_u16()),
        (Some(400), 400)
    );
    assert_eq!(answer["body"], http);
    assert_eq!(answer["body"]["code"], "invalid_value");
    assert_eq!(answer["body"]["field"], "setting.maxExport");

    // Zero export until further notice.
    let zero =
        json!({"setting": {"maxExport": {"value": 0, "unit": "W"}}, "validUntil": until(30)});
    let answer = rpc(
        &mut sub,
        json!({"id": "gl-zero", "method": "POST", "path": path, "body": zero, "token": STEER_TOKEN}),
    )
    .await;
    assert_eq!(answer["status"], 200, "{answer}");
    let id = answer["body"]["requestId"].clone();
    assert!(
        id.as_str().is_some_and(|r| r.starts_with("req_")),
        "{answer}"
    );

    // The retained state shows the entry and the limit in force with its source.
    let m = watch
        .expect("the state with the grid limit", T, |m| {
            is_steering(m) && m.json()["gridLimit"]["requestId"] == id
        })
        .await
        .json();
    assert_eq!(
        m["gridLimit"]["setting"],
        json!({"maxExport": {"value": 0, "unit": "W"}})
    );
    assert_eq!(
        m["gridLoop"]["maxExport"],
        json!({"value": 0, "unit": "W", "source": "gridLimit"})
    );
    let state = site.get_ok(&format!("/sites/{SITE}/steering")).await;
    assert_eq!(state["gridLimit"]["requestId"], id);

    // DELETE of the component over RPC: back to the configured limit.
    let answer = rpc(
        &mut sub,
        json!({"id": "gl-end", "method": "DELETE",
               "path": format!("/sites/{SITE}/steering?component=gridLimit"), "token": STEER_TOKEN}),
    )
    .await;
    assert_eq!(answer["status"], 200, "{answer}");
    assert_eq!(answer["body"]["gridLimit"], Value::Null);
    watch
        .expect("the state back at the configured limit", T, |m| {
            is_steering(m) && m.json()["gridLoop"]["maxExport"]["source"] == "config"
        })
        .await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_limit_over_rpc_on_both_brokers() {
    for kind in kinds() {
        grid_limit_over_rpc(kind).await;
    }
}
