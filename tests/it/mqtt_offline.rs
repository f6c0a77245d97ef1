//! Offline operation: with the broker away from the start, the agent polls,
//! stores and steers as usual. The HTTP API serves fresh values, the store
//! keeps the samples (and the outbox their telemetry), a steering POST reaches
//! the simulated battery's registers; when the broker comes back it learns all
//! of it.

use std::time::Duration;

use crate::common::broker::{kinds, Broker, Gate, Kind, Message, Subscriber};
use crate::common::mqtt::{self, mqtt_section, plain_url, site_config, uplink, ROOT};
use crate::common::site::{READ_TOKEN, STEER_TOKEN};
use reqwest::Method;
use serde_json::json;
use sitegate::model::time::{format_utc, now_ms};
use sitegate::sim::StorageControl;

const T: Duration = Duration::from_secs(20);
const SITE: &str = "ste_test";

async fn offline(kind: Kind) {
    let broker = Broker::start(kind).await;
    let gate = Gate::start(broker.addr("5")).await;
    gate.close();
    let mut watch =
        Subscriber::connect(broker.addr("5"), "watch-offline", &format!("{ROOT}/#")).await;
    let site = mqtt::start(&site_config(
        &mqtt_section(&plain_url(gate.addr), "5", ""),
        200,
    ))
    .await;
    site.ready().await;
    assert!(!uplink(&site).is_connected());

    // Polling: the latest reading keeps moving on.
    let (first, _) = site
        .latest("dvc_grid", "activePower")
        .await
        .expect("the meter was polled");
    crate::common::wait_for("a newer reading of the meter", T, || async {
        site.latest("dvc_grid", "activePower")
            .await
            .filter(|(ts, _)| *ts > first)
    })
    .await;

    // Storing: the time series has the samples since, and the outbox holds
    // their telemetry, none of it sent.
    let series = json!({
        "property": "activePower",
        "range": {"type": "absolute", "start": format_utc(first), "end": format_utc(now_ms() + 3_600_000)},
        "resolution": {"value": 1, "unit": "s"},
    });
    let path = "/devices/dvc_grid/measurements/time-series";
    let stored = crate::common::wait_for("a few seconds of samples in the store", T, || async {
        let (status, body) = site
            .call(Method::POST, path, Some(READ_TOKEN), Some(&series))
            .await;
        assert_eq!(status, 200, "{body}");
        (body["data"].as_array()?.len() >= 3).then_some(body)
    })
    .await;
    assert_eq!(
        stored["time"][0],
        format_utc(first - first.rem_euclid(1000))
    );
    let stats = uplink(&site).stats();
    assert!(stats.last_seq >= 3, "{stats:?}");
    assert_eq!(stats.rows, stats.last_seq, "nothing was sent: {stats:?}");

    // Steering: 2 kW discharge is 40 % of the 5 kW battery's rating, written
    // to its storage controls.
    let body = json!({"setting": {"value": 2, "unit": "kW"}, "validUntil": now_ms() + 600_000});
    let (status, answer) = site
        .call(
            Method::POST,
            &format!("/sites/{SITE}/steering/ess"),
            Some(STEER_TOKEN),
            Some(&body),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let request = answer["requestId"].clone();
    let window = Some(StorageControl {
        mode: 3,
        in_pct: -40.0,
        out_pct: 40.0,
    });
    crate::common::wait_for("the setpoint at the battery", T, || async {
        let state = site.sim.device("bat", 1).expect("battery").state();
        (state.storage_control == window).then_some(())
    })
    .await;
    assert!(!uplink(&site).is_connected());

    // The broker comes back: the agent is online, its retained steering state
    // carries the request made offline, and the telemetry from the first poll
    // on arrives.
    gate.reopen();
    mqtt::wait_connected(&site, true, Duration::from_secs(90)).await;
    let steering = format!("{ROOT}/sites/{SITE}/steering");
    watch
        .expect("the steering state with the offline request", T, |m| {
            m.topic == steering && m.json()["energyStorageSetting"]["requestId"] == request
        })
        .await;
    let online = |m: &Message| m.topic == format!("{ROOT}/status") && m.json()["online"] == true;
    if !watch.seen.iter().any(online) {
        watch.expect("online", T, online).await;
    }
    let seq_one = |m: &Message| m.topic.ends_with("/measurements") && m.json()["seq"] == 1;
    if !watch.seen.iter().any(seq_one) {
        watch.expect("the first telemetry", T, seq_one).await;
    }
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_storing_and_steering_go_on_without_the_broker() {
    for kind in kinds() {
        offline(kind).await;
    }
}
