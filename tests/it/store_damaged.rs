//! A damaged database: the agent starts anyway, on a new database, with the
//! damaged one set aside (renamed, never deleted) and steering at its
//! fallback; `/readyz` says so until the file set aside is removed.

use std::time::Duration;

use crate::steering_support::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_database_is_set_aside_and_the_agent_runs_on() {
    let rig = Rig::start(&demo_site(250, "")).await;
    rig.night_discharge().await;
    let db = rig.config.storage.path.clone();
    // While the agent is down, garbage over the file's header.
    let rig = rig
        .restart_with(|_| {
            let mut bytes = std::fs::read(&db).expect("the database");
            bytes[..4096].fill(0xA5);
            std::fs::write(&db, &bytes).expect("damaged");
        })
        .await;
    let aside: Vec<_> = std::fs::read_dir(db.parent().expect("folder"))
        .expect("folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("sitegate.db.damaged-"))
        .collect();
    assert!(!aside.is_empty(), "nothing set aside");
    // Running on a new database, at the fallback.
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"], Value::Null, "{st}");
    let (s, v) = rig.get("/readyz", READ).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "degraded", "{v}");
    assert!(
        v["degraded"].to_string().contains("damaged and set aside"),
        "{v}"
    );
    let (_, metrics) = rig.get_text("/metrics").await;
    assert!(
        metrics.contains("sitegate_store_set_aside_total 1"),
        "{metrics}"
    );
    // A new change is kept in the new database.
    let v = rig.night_discharge().await;
    assert_eq!(v["durable"], true, "{v}");
    // The operator deals with the file: ready again.
    for p in &aside {
        std::fs::remove_file(p).expect("removed");
    }
    eventually("ready again", Duration::from_secs(5), || async {
        rig.get("/readyz", READ).await.1["status"] == "ready"
    })
    .await;
    rig.shutdown().await;
}
