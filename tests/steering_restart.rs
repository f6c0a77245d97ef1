//! The signal is durable: after a restart of the agent on the same database the
//! active parts are applied again and what expired while it was down is gone.

mod steering_support;

use std::time::Duration;

use serde_json::json;
use steering_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_signal_and_drops_what_expired() {
    let rig = Rig::start(&config_text(300, 30)).await;
    let t = now_ms() + 120_000;
    let body = json!({"energyStorageSetting": {"value": 300, "unit": "kW"},
                      "productionCurtailment": {"value": 300, "unit": "kW"}, "validUntil": t});
    let (s, first) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200);
    // A short ESS override that ends while the agent is down.
    let short = now_ms() + 1500;
    let (s, _) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": 100, "unit": "kW"}, "validUntil": short}),
        )
        .await;
    assert_eq!(s, 200);
    eventually("steered", Duration::from_secs(3), || async {
        rig.storage("bat-a") == window(25.0) && rig.limit("pv-a") == Some(75.0)
    })
    .await;

    let rig = rig.restart().await;
    tokio::time::sleep(Duration::from_millis((short - now_ms()).max(0) as u64)).await;
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"], json!(null), "{st}");
    assert_eq!(st["productionCurtailment"]["requestId"], first["requestId"]);
    assert_eq!(st["productionCurtailment"]["validUntil"], t);
    assert_eq!(st["maximizeGridImport"]["value"], false);
    eventually(
        "curtailment kept, storage at fallback",
        Duration::from_secs(3),
        || async {
            rig.limit("pv-a") == Some(75.0)
                && rig.limit("pv-b") == Some(75.0)
                && rig.storage("bat-a").is_none()
        },
    )
    .await;
    let (_, h) = rig
        .get(&format!("/sites/{SITE}/steering/history"), READ)
        .await;
    assert!(h
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["requestId"] == first["requestId"]));
    rig.shutdown().await;
}
