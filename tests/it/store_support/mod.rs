//! Helpers shared by the `store_*` integration tests: a store in a temp folder, a
//! sample constructor, and the naive reference computation.

#![allow(dead_code, reason = "each test file uses a different subset")]

use std::path::Path;

use sitegate::config::StorageConfig;
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::{align, Agg, Aggregation, Point, StoreHandle};

pub mod noisy;

/// A two-worker runtime for a test that drives the store (and perhaps an
/// HTTP server) from synchronous test code.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// 2024-06-01T00:00:00Z.
pub const T0: i64 = 1_717_200_000_000;
pub const DEVICES: [&str; 2] = ["dvc_pv1", "dvc_bat1"];

pub fn config(dir: &Path) -> StorageConfig {
    StorageConfig {
        path: dir.join("store.db"),
        flush_interval_ms: 50,
        batch_size: 10_000,
        compact_interval_s: 600,
        retention_interval_s: 60,
        // Test data lives in 2024: keep the writer's own retention passes (which
        // use the real clock) away from it.
        retention_days: 36_500,
        rollup_retention_days: 36_500,
        minute_rollup_retention_days: Some(36_500),
        max_size_mb: 2048,
        wal_checkpoint_mb: None,
        buffer_samples: 200_000,
        damaged_notice_h: 168,
        full_check_max_mb: 512,
    }
}

pub fn open(config: &StorageConfig) -> StoreHandle {
    StoreHandle::open(config, DEVICES.iter().map(|d| d.to_string()).collect()).expect("store opens")
}

pub fn sample(device: u16, property: Property, ts_ms: i64, value: f64) -> Sample {
    Sample {
        device: DeviceId(device),
        property,
        ts_ms,
        value,
    }
}

/// The naive answer: the first of each (ts) kept in send order, then every
/// sample with `start <= ts < end` folded into its epoch-aligned bucket in time
/// order.
pub fn naive(
    samples: &[(i64, f64)],
    start: i64,
    end: i64,
    width: i64,
    aggregation: Aggregation,
) -> Vec<(i64, Agg, f64)> {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<(i64, f64)> = samples
        .iter()
        .copied()
        .filter(|(ts, _)| seen.insert(*ts))
        .collect();
    kept.sort_by_key(|(ts, _)| *ts);
    let mut out: Vec<(i64, Agg)> = Vec::new();
    for (ts, v) in kept.into_iter().filter(|(ts, _)| *ts >= start && *ts < end) {
        let b = align(ts, width);
        match out.last_mut() {
            Some((last, agg)) if *last == b => {
                agg.count += 1;
                agg.sum += v;
                agg.min = agg.min.min(v);
                agg.max = agg.max.max(v);
                agg.last_ts = ts;
                agg.last = v;
            }
            _ => out.push((b, Agg::one(ts, v))),
        }
    }
    out.into_iter()
        .map(|(b, a)| (b, a, a.value(aggregation)))
        .collect()
}

/// Asserts the store's answer equals the naive one: same buckets, exact min,
/// max, first and last; the mean to 1e-9 relative (rollups add partial sums in
/// another order than a sequential sum, which changes the last bits).
pub fn assert_same(
    got: &[Point],
    expected: &[(i64, Agg, f64)],
    aggregation: Aggregation,
    context: &str,
) {
    let got_ts: Vec<i64> = got.iter().map(|p| p.ts_ms).collect();
    let exp_ts: Vec<i64> = expected.iter().map(|e| e.0).collect();
    assert_eq!(got_ts, exp_ts, "bucket starts differ: {context}");
    for (p, (b, _, v)) in got.iter().zip(expected) {
        let ok = match aggregation {
            Aggregation::Mean => (p.value - v).abs() <= 1e-9 * v.abs().max(1.0),
            _ => p.value == *v,
        };
        assert!(
            ok,
            "bucket {b}: got {} expected {v} ({aggregation:?}): {context}",
            p.value
        );
    }
}

/// Holds `n` read turns of `store` with reads that block until the returned
/// sender is dropped; returns once all `n` run.
pub async fn hold_reads(store: &StoreHandle, n: usize) -> std::sync::mpsc::Sender<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Arc::new(Mutex::new(released));
    let running = Arc::new(AtomicUsize::new(0));
    for _ in 0..n {
        let (store, released, running) = (store.clone(), released.clone(), running.clone());
        tokio::spawn(async move {
            store
                .read(move |_| {
                    running.fetch_add(1, Ordering::SeqCst);
                    // Blocks until the sender is dropped (then every recv fails).
                    let _ = released.lock().map(|r| r.recv());
                    Ok::<(), sitegate::store::StoreError>(())
                })
                .await
        });
    }
    crate::common::wait_for(
        "the held reads to run",
        std::time::Duration::from_secs(20),
        || {
            let running = running.clone();
            async move { (running.load(Ordering::SeqCst) == n).then_some(()) }
        },
    )
    .await;
    release
}
