//! A damaged database: the agent starts anyway, on a new database, with the
//! damaged one set aside (renamed, never deleted) and steering at its
//! fallback; `/readyz` says so until the file set aside is removed.

use std::time::Duration;

use crate::steering_support::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_database_is_set_aside_and_the_agent_runs_on() {
    let rig = Rig::start(&demo_site(250)).await;
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
    eventually("the store sound again", Duration::from_secs(5), || async {
        let (s, v) = rig.get("/readyz", READ).await;
        // (The clock may keep it degraded on a machine without NTP.)
        s == 200 && !v["degraded"].to_string().contains("store:")
    })
    .await;
    rig.shutdown().await;
}

/// A file larger than `storage.full_check_max_mb` (here 0: every file) gets
/// only a read of its header at start and the full check in the background:
/// damage in a page the start does not read shows on `/readyz` and
/// `/metrics`, and the next start sets the file aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_database_is_checked_in_the_background_after_start() {
    let text = demo_site(250).replace(
        "path = \"unused.db\"",
        "path = \"unused.db\"\nfull_check_max_mb = 0",
    );
    let rig = Rig::start(&text).await;
    let db = rig.config.storage.path.clone();
    let (_, metrics) = rig.get_text("/metrics").await;
    assert!(
        metrics.contains("sitegate_store_damage_found 0"),
        "{metrics}"
    );
    // While the agent is down, garbage over the root page of a table this
    // site never uses (the uplink's, without [mqtt]): the start's read of
    // the header and schema passes.
    let rig = rig
        .restart_with(|_| {
            let conn = rusqlite::Connection::open(&db).expect("db");
            let (root, page_size): (i64, i64) = conn
                .query_row(
                    "SELECT rootpage, (SELECT page_size FROM pragma_page_size) \
                     FROM sqlite_schema WHERE name = 'uplink_rpc_seen'",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .expect("root page");
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .expect("checkpoint");
            drop(conn);
            let mut bytes = std::fs::read(&db).expect("the database");
            let at = usize::try_from((root - 1) * page_size).expect("offset");
            let len = usize::try_from(page_size).expect("page size");
            bytes[at..at + len].fill(0xA5);
            std::fs::write(&db, &bytes).expect("damaged");
        })
        .await;
    eventually("damage shown", Duration::from_secs(10), || async {
        let (_, v) = rig.get("/readyz", READ).await;
        v["degraded"]
            .to_string()
            .contains("background integrity check found the database damaged")
    })
    .await;
    let (_, metrics) = rig.get_text("/metrics").await;
    assert!(
        metrics.contains("sitegate_store_damage_found 1"),
        "{metrics}"
    );
    // It ran on the damaged file meanwhile; the next start sets it aside.
    let rig = rig.restart().await;
    let aside = std::fs::read_dir(db.parent().expect("folder"))
        .expect("folder")
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .contains("sitegate.db.damaged-")
        });
    assert!(aside, "nothing set aside");
    let (_, v) = rig.get("/readyz", READ).await;
    assert!(
        v["degraded"].to_string().contains("damaged and set aside"),
        "{v}"
    );
    rig.shutdown().await;
}
