//! A store that cannot be opened at all: the agent runs on a temporary one,
//! every site at its fallback, says so on `/readyz` and `/metrics`, and marks
//! the configured store's signals stale, so that a later start on it begins
//! at the fallback too.

use std::time::Duration;

use crate::steering_support::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_opened_leaves_the_agent_running_on_a_temporary_one() {
    let rig = Rig::start(&demo_site(250)).await;
    let v = rig.night_discharge().await;
    assert_eq!(v["durable"], true, "{v}");
    let db = rig.config.storage.path.clone();
    let kept = db.with_extension("db.kept");
    let marker = db.with_extension("steering-pending");
    // While the agent is down: a folder where the database was, and one where
    // the steering marker goes (so that it cannot be set at first either).
    let rig = rig
        .restart_with(|_| {
            std::fs::rename(&db, &kept).expect("database moved away");
            std::fs::create_dir(&db).expect("a folder in its place");
            let _ = std::fs::remove_file(&marker);
            std::fs::create_dir(&marker).expect("a folder in the marker's place");
        })
        .await;
    // At the fallback, not at the stored discharge.
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"], Value::Null, "{st}");
    let (s, v) = rig.get("/readyz", READ).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "degraded", "{v}");
    let said = v["degraded"].to_string();
    assert!(said.contains("temporary store"), "{v}");
    assert!(said.contains(&db.display().to_string()), "{v}");
    let (_, metrics) = rig.get_text("/metrics").await;
    assert!(metrics.contains("sitegate_store_temporary 1"), "{metrics}");
    // Steering works and is durable (in the temporary store); measurements
    // are served.
    let v = rig.night_discharge().await;
    assert_eq!(v["durable"], true, "{v}");
    // The marker's place frees up: it is set within the retry's first delay.
    std::fs::remove_dir(&marker).expect("marker's place freed");
    eventually(
        "the configured store's marker set",
        Duration::from_secs(12),
        || async {
            std::fs::read_to_string(&marker)
                .is_ok_and(|t| t.starts_with("sitegate steering: changes wait"))
        },
    )
    .await;
    // Fixed; the next start is on the configured store, whose stored
    // discharge is stale: every site starts at its fallback, and says why.
    let rig = rig
        .restart_with(|_| {
            std::fs::remove_dir(&db).expect("the folder removed");
            std::fs::rename(&kept, &db).expect("database back");
        })
        .await;
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"], Value::Null, "{st}");
    let (_, metrics) = rig.get_text("/metrics").await;
    assert!(metrics.contains("sitegate_store_temporary 0"), "{metrics}");
    rig.fallback_recorded().await;
    rig.shutdown().await;
}
