//! Store benchmark: ingest rate, time-series query latency against a raw
//! `GROUP BY`, and bytes on disk per raw sample, in one process.
//!
//! Run: `cargo bench --bench store` (set `STORE_BENCH_DAYS` to change the 30 days
//! of 1 Hz data per series). Figures are recorded in `docs/store.md`.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark reports on stdout and may panic"
)]

use std::time::{Duration, Instant};

use std::hint::black_box;

use criterion::Criterion;
use rusqlite::Connection;
use sitegate::config::StorageConfig;
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::{Aggregation, SeriesQuery, StoreHandle};

const DAY_MS: i64 = 86_400_000;
/// 2024-06-01T00:00:00Z.
const T0: i64 = 1_717_200_000_000;
const SERIES: [Property; 4] = [
    Property::ActivePower,
    Property::VoltageL1,
    Property::Soc,
    Property::TotalEnergyProduced,
];
const SEND_BATCH: usize = 1_000;

/// One second of a plausible device: whole watts, one-decimal volts and SoC, a
/// growing whole-Wh counter.
fn samples_at(second: i64, energy: &mut f64) -> [Sample; 4] {
    let ts = T0 + second * 1000 + (second * 7919) % 37;
    let phase = (second as f64 / 600.0).sin();
    let power = (3000.0 + 2500.0 * phase + ((second * 31) % 97) as f64).round();
    *energy += power / 3600.0;
    let values = [
        power,
        (230.0 + 3.0 * phase * 10.0).round() / 10.0 + ((second % 7) as f64) / 10.0,
        (50.0 + 40.0 * phase * 10.0).round() / 10.0,
        energy.round(),
    ];
    let mut out = [Sample {
        device: DeviceId(0),
        property: SERIES[0],
        ts_ms: ts,
        value: 0.0,
    }; 4];
    for (i, s) in out.iter_mut().enumerate() {
        s.property = SERIES[i];
        s.value = values[i];
    }
    out
}

fn main() {
    let days: i64 = std::env::var("STORE_BENCH_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig {
        path: dir.path().join("bench.db"),
        batch_size: 50_000,
        max_size_mb: 1 << 20,
        retention_days: 10_000,
        rollup_retention_days: 10_000,
        ..StorageConfig::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = StoreHandle::open(&config, vec!["dvc_bench".into()]).unwrap();

    // Data generated up front, so the timing is the store's alone.
    let seconds = days * 86_400 + 3_600;
    let mut energy = 0.0;
    let mut batches = Vec::new();
    let mut batch = Vec::with_capacity(SEND_BATCH);
    for s in 0..seconds {
        batch.extend(samples_at(s, &mut energy));
        if batch.len() >= SEND_BATCH {
            batches.push(std::mem::replace(
                &mut batch,
                Vec::with_capacity(SEND_BATCH),
            ));
        }
    }
    batches.push(batch);
    let total: usize = batches.iter().map(Vec::len).sum();

    let tx = store.sample_sender();
    let started = Instant::now();
    rt.block_on(async {
        for b in batches {
            tx.send(b).await.unwrap();
        }
        store.flush().await.unwrap();
    });
    let ingest = started.elapsed();
    let used = rt.block_on(store.used_bytes()).unwrap();
    let file = std::fs::metadata(&config.path).unwrap().len();

    println!(
        "\n== sitegate store benchmark: {days} days of 1 Hz data, {} series",
        SERIES.len()
    );
    println!(
        "ingest: {total} samples in {:.2} s = {:.0} samples/s (batches of {SEND_BATCH} through the sample channel, commits of {})",
        ingest.as_secs_f64(),
        total as f64 / ingest.as_secs_f64(),
        config.batch_size
    );
    println!(
        "disk: {used} bytes in use ({file} byte file before checkpoint) = {:.1} bytes per raw sample, rollups and keys included",
        used as f64 / total as f64
    );

    // The partner's question: the last 30 days up to an unaligned "now".
    let end = T0 + days * DAY_MS + 1_234_567;
    let start = end - days * DAY_MS;
    let query = |width_ms: i64| SeriesQuery {
        property: Property::ActivePower,
        start_ms: start,
        end_ms: end,
        width_ms,
        aggregation: Aggregation::Mean,
    };
    let hourly = rt
        .block_on(store.time_series("dvc_bench", query(3_600_000)))
        .unwrap();
    let raw_conn = Connection::open(&config.path).unwrap();
    let naive_sql = "SELECT (ts / ?4) * ?4 AS b, avg(value) FROM raw WHERE series = ?1 AND ts >= ?2 AND ts < ?3 GROUP BY b ORDER BY b";
    let naive = |width: i64| -> Vec<(i64, f64)> {
        let mut stmt = raw_conn.prepare_cached(naive_sql).unwrap();
        let rows = stmt
            .query_map(rusqlite::params![1, start, end, width], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    };
    let reference = naive(3_600_000);
    assert_eq!(hourly.len(), reference.len());
    for (p, (b, v)) in hourly.iter().zip(&reference) {
        assert_eq!(p.ts_ms, *b);
        assert!(
            (p.value - v).abs() <= 1e-9 * v.abs().max(1.0),
            "{} vs {v}",
            p.value
        );
    }

    steady_state_writes(&rt);

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(20)
        .configure_from_args();
    let mut group = c.benchmark_group(format!("time_series_{days}d"));
    group.bench_function("store_1h", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(store.time_series("dvc_bench", query(3_600_000)))
                    .unwrap(),
            )
        })
    });
    group.bench_function("store_1min", |b| {
        b.iter(|| {
            black_box(
                rt.block_on(store.time_series("dvc_bench", query(60_000)))
                    .unwrap(),
            )
        })
    });
    group.bench_function("raw_group_by_1h", |b| {
        b.iter(|| black_box(naive(3_600_000)))
    });
    group.finish();
    c.final_summary();
    rt.block_on(store.close()).unwrap();
}

/// Bytes this process has caused to be written to storage so far.
fn write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

/// A site of 20 devices with 12 properties each, polled at 1 Hz, one commit a
/// second (the default flush interval), compactions once a minute: what reaches
/// the flash per sample.
fn steady_state_writes(rt: &tokio::runtime::Runtime) {
    const DEVICES: u16 = 20;
    const PROPS: usize = 12;
    const SECONDS: i64 = 600;
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig {
        path: dir.path().join("steady.db"),
        max_size_mb: 1 << 20,
        retention_days: 10_000,
        rollup_retention_days: 10_000,
        ..StorageConfig::default()
    };
    let refs = (0..DEVICES).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&config, refs).unwrap();
    let tx = store.sample_sender();
    let second = |s: i64| -> Vec<Sample> {
        let mut out = Vec::with_capacity(usize::from(DEVICES) * PROPS);
        for d in 0..DEVICES {
            for (i, p) in Property::ALL[..PROPS].iter().enumerate() {
                out.push(Sample {
                    device: DeviceId(d),
                    property: *p,
                    ts_ms: T0 + s * 1000 + i64::from(d),
                    value: ((s * 13 + i as i64 * 7 + i64::from(d)) % 5000) as f64 / 10.0,
                });
            }
        }
        out
    };
    // An hour of history first, so pages are not all new.
    rt.block_on(async {
        for s in 0..3_600 {
            tx.send(second(s)).await.unwrap();
        }
        store.flush().await.unwrap();
        store.compact().await.unwrap();
    });
    let Some(before) = write_bytes() else {
        println!("steady state: /proc/self/io not available, skipped");
        return;
    };
    rt.block_on(async {
        for s in 3_600..3_600 + SECONDS {
            tx.send(second(s)).await.unwrap();
            store.flush().await.unwrap();
            if s % 60 == 59 {
                store.compact().await.unwrap();
            }
        }
    });
    let written = write_bytes().unwrap_or(before) - before;
    let samples = SECONDS as u64 * u64::from(DEVICES) * PROPS as u64;
    println!(
        "steady state: {} series at 1 Hz, a commit a second, compaction a minute: {:.0} bytes written per sample = {:.2} GiB/day",
        usize::from(DEVICES) * PROPS,
        written as f64 / samples as f64,
        written as f64 * 86_400.0 / SECONDS as f64 / (1u64 << 30) as f64
    );
    rt.block_on(store.close()).unwrap();
}
