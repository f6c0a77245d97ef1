//! Bytes the store writes per sample as its tables grow: a commercial site's
//! series (default 1,000 devices of 13 properties at 1 Hz: 13,000 samples a
//! second) fed second by second, one commit per second as the agent's writer
//! makes them, after the tables were filled with `HISTORY_HOURS` of the same
//! data. Reported per window of simulated time: WAL bytes appended per sample
//! (`sitegate_store_wal_written_bytes_total`; a checkpoint copies each page
//! once more into the database file), compactions run, and the database size.
//!
//! Simulated time, not wall time: a day of history and an hour of running
//! take minutes, and what grows with the tables (pages touched per
//! compaction) shows as it would over days. Beside the WAL, the bytes the
//! process caused to be written to storage (`write_bytes` of
//! `/proc/self/io`: the WAL, the checkpoints into the database file, and the
//! OS rewriting the WAL's last page at each fsync; the store is all this
//! process writes). Compactions are triggered as the
//! writer triggers them (its staged-sample bound; the 10-minute interval is
//! wall time and hardly fires here, which is what happens at this rate anyway).
//!
//! `cargo bench --bench store_growth -- DEVICES HISTORY_HOURS MINUTES WINDOW_MIN
//! [--calm]` (defaults 1000 24 60 10). Each history is run from a fresh
//! database: the first run with 1 hour of history, then with `HISTORY_HOURS`,
//! so the two can be compared in one run. The values are a noisy site's
//! (`footprint/noisy.rs`: an inverter's 13 properties per device, a fifth of
//! them float32 readings, noise on every point every second); `--calm` feeds
//! the smooth values of the calm simulator instead.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark reports on stdout and may panic"
)]

use tokio::time::Instant;

use sitegate::config::StorageConfig;
use sitegate::model::{DeviceId, Property, Sample};

#[path = "footprint/noisy.rs"]
mod noisy;
use sitegate::store::{sample_counts, Aggregation, SeriesQuery, StoreError, StoreHandle};

/// 2024-06-01T00:00:00Z.
const T0: i64 = 1_717_200_000_000;
const HOUR_S: i64 = 3600;
/// Properties per device: about what a SunSpec inverter, battery or meter
/// gives the agent.
const PROPERTIES: usize = 13;

/// The samples of one device over `seconds` (after the seconds asked of it
/// before: a device's series go forward in time).
fn samples(
    device: usize,
    series: &mut noisy::Series,
    seconds: std::ops::Range<i64>,
) -> Vec<Sample> {
    let mut out = Vec::with_capacity(PROPERTIES * (seconds.end - seconds.start) as usize);
    let mut values = Vec::with_capacity(PROPERTIES);
    let props = series.properties();
    for s in seconds {
        values.clear();
        series.values(T0 / 1000 + s, &mut values);
        // A poll lands a few ms off the second.
        let ts_ms = T0 + s * 1000 + (device as i64 * 7 + s * 13) % 40;
        out.extend(props.iter().zip(&values).map(|(&property, &value)| Sample {
            device: DeviceId(device as u16),
            property,
            ts_ms,
            value,
        }));
    }
    out
}

/// `write_bytes` of `/proc/self/io` (0 where there is none).
fn disk_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("write_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

struct Window {
    minute: i64,
    samples: u64,
    wal_bytes: u64,
    disk_bytes: u64,
    took_s: f64,
    db_bytes: u64,
}

fn run(
    rt: &tokio::runtime::Runtime,
    devices: usize,
    (history_h, minutes, window_min): (i64, i64, i64),
    calm: bool,
) -> Vec<Window> {
    let mut series: Vec<noisy::Series> = (0..devices)
        .map(|d| noisy::Series::new("inverter", d, calm))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig {
        path: dir.path().join("growth.db"),
        max_size_mb: 1 << 20,
        retention_days: 10_000,
        rollup_retention_days: 10_000,
        minute_rollup_retention_days: Some(10_000),
        ..StorageConfig::default()
    };
    let refs = (0..devices).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&config, refs).unwrap();
    let tx = store.sample_sender();

    // History: an hour of every device at a time (the direct path: chunks and
    // rollups written at once).
    let t = Instant::now();
    rt.block_on(async {
        for h in 0..history_h {
            for (d, s) in series.iter_mut().enumerate() {
                tx.send(samples(d, s, h * HOUR_S..(h + 1) * HOUR_S))
                    .await
                    .unwrap();
            }
            store.flush().await.unwrap();
        }
    });
    println!(
        "  {history_h} h of history: {} samples in {:.0} s",
        history_h * HOUR_S * (devices * PROPERTIES) as i64,
        t.elapsed().as_secs_f64()
    );

    // Running: one commit per second of data, as the writer makes them.
    let start = history_h * HOUR_S;
    let mut windows = Vec::new();
    let mut wal0 = store.stats().wal_bytes();
    let mut disk0 = disk_bytes();
    let mut n0 = store.stats().samples_committed();
    let mut t0 = Instant::now();
    rt.block_on(async {
        for s in 0..minutes * 60 {
            let second = start + s;
            let mut batch = Vec::with_capacity(devices * PROPERTIES);
            for (d, s) in series.iter_mut().enumerate() {
                batch.extend(samples(d, s, second..second + 1));
            }
            tx.send(batch).await.unwrap();
            store.flush().await.unwrap();
            if (s + 1) % (window_min * 60) == 0 {
                let wal = store.stats().wal_bytes();
                let disk = disk_bytes();
                let n = store.stats().samples_committed();
                windows.push(Window {
                    minute: (s + 1) / 60,
                    samples: n - n0,
                    wal_bytes: wal - wal0,
                    disk_bytes: disk - disk0,
                    took_s: t0.elapsed().as_secs_f64(),
                    db_bytes: std::fs::metadata(&config.path).map_or(0, |m| m.len()),
                });
                (wal0, disk0, n0, t0) = (wal, disk, n, Instant::now());
            }
        }
    });
    reads(
        rt,
        &store,
        devices,
        T0 + (start + minutes * 60) * 1000,
        history_h,
    );
    rt.block_on(store.close()).unwrap();
    windows
}

/// Times of one series' queries on the tables as they are at the end (the
/// staging ring as full as the last compaction left it): the last ten
/// minutes at 1 min (raw, staged and minute rollups), the last day at 15 min
/// (minute rollups: one seek per minute) and the whole history at 1 h (hour
/// rollups: one seek per hour). Median and slowest of 20, in ms.
fn reads(
    rt: &tokio::runtime::Runtime,
    store: &StoreHandle,
    devices: usize,
    end: i64,
    history_h: i64,
) {
    let device = format!("dvc_{}", devices / 2);
    let staged = rt
        .block_on(store.read(|c| sample_counts(c).map_err(StoreError::from)))
        .unwrap()
        .staged;
    let span = |name: &str, back_ms: i64, width_ms: i64| {
        let q = SeriesQuery {
            property: Property::ALL[0],
            start_ms: (end - back_ms) / width_ms * width_ms,
            end_ms: end,
            width_ms,
            aggregation: Aggregation::Mean,
        };
        let mut took: Vec<f64> = (0..20)
            .map(|_| {
                let t = Instant::now();
                let points = rt.block_on(store.time_series(&device, q)).unwrap();
                assert!(!points.is_empty(), "{name}");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        took.sort_by(f64::total_cmp);
        println!(
            "  read {name}: {:.2} ms median, {:.2} ms slowest ({staged} samples staged)",
            took[10], took[19]
        );
    };
    span("last 10 min at 1 min", 600_000, 60_000);
    span(
        "last day at 15 min",
        86_400_000.min(history_h * 3_600_000),
        900_000,
    );
    span(
        "whole history at 1 h",
        (history_h + 1) * 3_600_000,
        3_600_000,
    );
}

fn main() {
    let calm = std::env::args().any(|a| a == "--calm");
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<i64>().ok());
    let devices = args.next().unwrap_or(1000) as usize;
    let history_h = args.next().unwrap_or(24);
    let minutes = args.next().unwrap_or(60);
    let window_min = args.next().unwrap_or(10).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "\n== store growth: {devices} devices x {PROPERTIES} properties at 1 Hz ({} samples/s), {minutes} simulated minutes, windows of {window_min} min, {} values",
        devices * PROPERTIES,
        if calm { "calm" } else { "noisy" }
    );
    for h in [1, history_h] {
        let windows = run(&rt, devices, (h, minutes, window_min), calm);
        println!(
            "{:>9} | {:>8} | {:>12} | {:>13} | {:>14} | {:>9} | {:>8}",
            "history", "minute", "samples", "WAL B/sample", "disk B/sample", "wall s", "db MB"
        );
        for w in &windows {
            println!(
                "{:>7} h | {:>8} | {:>12} | {:>13.1} | {:>14.1} | {:>9.1} | {:>8.0}",
                h,
                w.minute,
                w.samples,
                w.wal_bytes as f64 / w.samples.max(1) as f64,
                w.disk_bytes as f64 / w.samples.max(1) as f64,
                w.took_s,
                w.db_bytes as f64 / 1e6
            );
        }
    }
}
