//! A compaction costs the same however much history the tables hold: its
//! keys put time first, so it appends chunks, index entries and rollup rows
//! instead of touching one page per series in tables that grow every day.
//!
//! Measured as the WAL bytes the compaction itself appends (every page it
//! touched is one frame), with the same staged samples (520 series, five
//! minutes at 1 Hz) on top of one hour and of one day of history: the same
//! within 25 %, and at most 4 bytes a sample moved.

use crate::store_support::{config, T0};
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::StoreHandle;

const DEVICES: usize = 40;
const PROPERTIES: usize = 13;
const MINUTE_MS: i64 = 60_000;

fn device_samples(device: usize, times: impl Iterator<Item = i64> + Clone) -> Vec<Sample> {
    (0..PROPERTIES)
        .flat_map(|p| {
            times.clone().map(move |ts| Sample {
                device: DeviceId(device as u16),
                property: Property::ALL[p],
                ts_ms: ts + (device as i64 * 7) % 40,
                value: ((ts / 1000 + p as i64 * 31) % 500) as f64,
            })
        })
        .collect()
}

/// WAL bytes of one compaction of five minutes of every series at 1 Hz,
/// after `history_h` hours of one sample a minute (written as bulk batches,
/// which go to chunks and rollups at once).
async fn compaction_wal_bytes(history_h: i64) -> u64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let refs = (0..DEVICES).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&config(dir.path()), refs).expect("store opens");
    let tx = store.sample_sender();
    let history_end = T0 + history_h * 60 * MINUTE_MS;
    for d in 0..DEVICES {
        let batch = device_samples(d, (T0..history_end).step_by(MINUTE_MS as usize));
        tx.send(batch).await.expect("history");
    }
    store.flush().await.expect("flush");
    store.compact().await.expect("history compacted");
    for s in 0..300 {
        let second = history_end + s * 1000;
        let mut batch = Vec::new();
        for d in 0..DEVICES {
            batch.extend(device_samples(d, std::iter::once(second)));
        }
        tx.send(batch).await.expect("send");
        store.flush().await.expect("flush");
    }
    let before = store.stats().wal_bytes();
    let moved = store.compact().await.expect("compaction");
    assert_eq!(moved, 300 * DEVICES * PROPERTIES);
    let bytes = store.stats().wal_bytes() - before;
    store.close().await.expect("close");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_writes_as_much_after_a_day_of_history_as_after_an_hour() {
    // Two stores, each with its own writer thread: both at once.
    let (hour, day) = tokio::join!(compaction_wal_bytes(1), compaction_wal_bytes(24));
    let samples = (300 * DEVICES * PROPERTIES) as f64;
    println!(
        "compaction WAL bytes per sample: {:.2} after 1 h of history, {:.2} after 24 h",
        hour as f64 / samples,
        day as f64 / samples
    );
    assert!(
        (day as f64) <= 1.25 * hour as f64,
        "a compaction after a day of history wrote {day} B, after an hour {hour} B"
    );
    // And what it writes at all: the chunks (packed, a device's times shared),
    // their keys and the rollup rows, a frame of 1 KiB and 24 bytes for each
    // page touched (2.3 B a sample measured).
    for (bytes, history) in [(hour, "an hour"), (day, "a day")] {
        assert!(
            bytes as f64 <= 4.0 * samples,
            "a compaction after {history} of history wrote {:.2} B a sample",
            bytes as f64 / samples
        );
    }
}
