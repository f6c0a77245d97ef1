//! The WAL beside the database stays within what `storage.wal_checkpoint_mb`
//! allows (a third above the checkpoint threshold) while the store appends
//! many times that, on a real file: a smaller threshold trades flash writes
//! for room (docs/store.md, "Flash wear").

use crate::store_support::noisy::NoisySite;
use crate::store_support::{config, T0};
use sitegate::store::StoreHandle;

const DEVICES: usize = 100;
const SECONDS: i64 = 600;
const COMPACT_EVERY_S: i64 = 150;

/// Runs ten noisy minutes of `DEVICES` into a store checkpointing every
/// `wal_mb` MiB, a commit a second and a compaction every 150 s: the WAL
/// file's largest size after a second's commit, and the bytes appended to it.
async fn wal_after(wal_mb: Option<u64>) -> (u64, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.wal_checkpoint_mb = wal_mb;
    let refs: Vec<String> = (0..DEVICES).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&cfg, refs).expect("store opens");
    let tx = store.sample_sender();
    let mut site = NoisySite::new(DEVICES, 35, T0);
    let wal_file = cfg.path.with_extension("db-wal");
    let mut largest = 0;
    for s in 0..SECONDS {
        tx.send(site.second(s)).await.expect("send");
        store.flush().await.expect("flush");
        largest = largest.max(std::fs::metadata(&wal_file).map_or(0, |m| m.len()));
        if (s + 1) % COMPACT_EVERY_S == 0 {
            store.compact().await.expect("compact");
        }
    }
    (largest, store.stats().wal_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_file_stays_within_its_checkpoint_threshold() {
    const MIB: u64 = 1 << 20;
    let (small, appended) = wal_after(Some(1)).await;
    println!("wal_checkpoint_mb = 1: WAL file at most {small} B, {appended} B appended");
    assert!(
        appended > 6 * MIB,
        "too little written to show a bound: {appended} B"
    );
    // The file is cut back to a third above the threshold when the WAL starts
    // again after a checkpoint; a second's commit adds some 10 KiB.
    assert!(small <= MIB + MIB / 3 + 64 * 1024, "WAL file {small} B");
    // The default (96 MiB) lets the same run's WAL grow past that.
    let (default, _) = wal_after(None).await;
    println!("default: WAL file at most {default} B");
    assert!(
        default > 4 * MIB,
        "WAL file {default} B with the default threshold"
    );
}
