//! Store benchmark: ingest rate, time-series query latency against a naive
//! fold over every raw sample, bytes on disk per raw sample, and bytes written
//! to storage per sample (flash wear) at several flush intervals, beside the
//! previous layout's (kept in `benches/store_legacy/` for this), in one
//! process.
//!
//! Also the bytes a sample takes at rest on noisy data with float models
//! (`tests/it/store_support/noisy.rs`), with the chunk coding of today
//! beside the one before migration 0011 on the same chunks.
//!
//! Run: `cargo bench --bench store` (set `STORE_BENCH_DAYS` to change the 30 days
//! of 1 Hz data per series; `STORE_BENCH_PAGE_SIZES=1024,2048` adds wear rows
//! for databases created with those page sizes). Figures are recorded in
//! `docs/store.md`.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark reports on stdout and may panic"
)]

use tokio::time::Instant;

use rusqlite::Connection;
use sitegate::config::StorageConfig;
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::{align, for_each_sample, Aggregation, SeriesQuery, StoreHandle};
use store_legacy::Legacy;
use store_timing::time;

#[path = "../tests/it/store_support/noisy.rs"]
mod noisy;
mod store_legacy;
mod store_timing;

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
        minute_rollup_retention_days: Some(10_000),
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
    // The naive answer: every raw sample of the range read and folded.
    let naive = |width: i64| -> Vec<(i64, f64)> {
        let conn = Connection::open(&config.path).unwrap();
        let mut sums: std::collections::BTreeMap<i64, (f64, u64)> = Default::default();
        for_each_sample(
            &conn,
            "dvc_bench",
            Property::ActivePower,
            start,
            end,
            |ts, v| {
                let e = sums.entry(align(ts, width)).or_default();
                e.0 += v;
                e.1 += 1;
            },
        )
        .unwrap();
        sums.into_iter()
            .map(|(b, (sum, n))| (b, sum / n as f64))
            .collect()
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

    noisy_table(&rt);
    let staged_store = wear_table(&rt);

    println!("\n== query times, the last {days} days up to an unaligned now");
    let q1h = query(3_600_000);
    let q1min = query(60_000);
    let timed = |q: SeriesQuery| rt.block_on(store.time_series("dvc_bench", q)).unwrap();
    let hour = time("store_1h", || timed(q1h));
    time("store_1min", || timed(q1min));
    let fold = time("raw_fold_1h", || naive(3_600_000));
    println!(
        "the naive fold takes {:.0} times the 1 h query",
        fold.median.as_secs_f64() / hour.median.as_secs_f64()
    );
    if let Some((staged, now)) = &staged_store {
        // The same question to a store of 240 series whose staging ring holds
        // ten minutes of samples (just before a compaction): the most a reader
        // has to decode besides rollups and chunks.
        let q = SeriesQuery {
            property: Property::ALL[0],
            start_ms: now - 30 * DAY_MS,
            end_ms: *now,
            width_ms: 3_600_000,
            aggregation: Aggregation::Mean,
        };
        let timed = || rt.block_on(staged.time_series("dvc_0", q)).unwrap();
        time("240_series_1h_10min_staged", timed);
        rt.block_on(staged.compact()).unwrap();
        time("240_series_1h_compacted", timed);
    }
    rt.block_on(store.close()).unwrap();
    if let Some((staged, _)) = staged_store {
        rt.block_on(staged.close()).unwrap();
    }
}

/// Bytes this process has caused to be written to storage so far.
fn write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

/// A site of 20 devices with 12 properties each, polled at 1 Hz.
const DEVICES: u16 = 20;
const PROPS: usize = 12;
const SITE_SERIES: i64 = DEVICES as i64 * PROPS as i64;
/// History written before the measurement, so pages are not all new.
const HISTORY_S: i64 = 3_600;
/// Simulated seconds measured: six compactions at the default interval.
const WINDOW_S: i64 = 3_600;
/// Flush intervals of the wear table (the first is the default).
const FLUSH_INTERVALS_S: [i64; 3] = [1, 5, 30];

fn second(s: i64) -> Vec<Sample> {
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
}

/// Bytes written over a measured window.
#[derive(Clone, Copy)]
struct Wear {
    bytes: u64,
    /// Of `bytes`, appended to the WAL by the store (its own count).
    wal: u64,
    samples: u64,
    seconds: i64,
}

impl Wear {
    fn per_sample(self) -> f64 {
        self.bytes as f64 / self.samples as f64
    }

    fn gib_per_day(self) -> f64 {
        self.bytes as f64 * 86_400.0 / self.seconds as f64 / (1u64 << 30) as f64
    }
}

/// Copies the WAL into the database file from a second connection, so the
/// window's count holds every byte its commits will cost.
fn checkpoint(path: &std::path::Path) {
    let conn = Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        .unwrap();
}

/// The current layout at the default settings but `flush_s`: a commit every
/// `flush_s` simulated seconds, a compaction every `compact_interval_s`, the
/// store's own checkpoints, one more at the end. With `page_size`, the
/// database is created with that page size. Returns the figure and, when
/// `keep` is set, the store with ten more minutes staged (and its "now").
fn wear_current(
    rt: &tokio::runtime::Runtime,
    flush_s: i64,
    page_size: Option<u32>,
    keep: bool,
) -> (Wear, Option<(StoreHandle, i64)>) {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig {
        path: dir.path().join("steady.db"),
        max_size_mb: 1 << 20,
        retention_days: 10_000,
        rollup_retention_days: 10_000,
        minute_rollup_retention_days: Some(10_000),
        // Commits and compactions come from this loop, on simulated time.
        flush_interval_ms: 60_000,
        ..StorageConfig::default()
    };
    let compact_s = StorageConfig::default().compact_interval_s as i64;
    let config = StorageConfig {
        compact_interval_s: 3_600,
        ..config
    };
    if let Some(size) = page_size {
        let conn = Connection::open(&config.path).unwrap();
        conn.execute_batch(&format!("PRAGMA page_size = {size}; VACUUM;"))
            .unwrap();
    }
    let refs = (0..DEVICES).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&config, refs).unwrap();
    let tx = store.sample_sender();
    // History in one bulk batch (straight to the chunks).
    rt.block_on(async {
        let history: Vec<Sample> = (0..HISTORY_S).flat_map(second).collect();
        tx.send(history).await.unwrap();
        store.flush().await.unwrap();
    });
    checkpoint(&config.path);
    let before = write_bytes().unwrap_or(0);
    let wal_before = store.stats().wal_bytes();
    rt.block_on(async {
        for s in HISTORY_S..HISTORY_S + WINDOW_S {
            tx.send(second(s)).await.unwrap();
            if (s + 1) % flush_s == 0 {
                store.flush().await.unwrap();
            }
            if (s + 1) % compact_s == 0 {
                store.compact().await.unwrap();
            }
        }
        store.flush().await.unwrap();
    });
    checkpoint(&config.path);
    let wear = Wear {
        bytes: write_bytes().unwrap_or(before) - before,
        wal: store.stats().wal_bytes() - wal_before,
        samples: (WINDOW_S * SITE_SERIES) as u64,
        seconds: WINDOW_S,
    };
    if !keep {
        rt.block_on(store.close()).unwrap();
        return (wear, None);
    }
    let end = HISTORY_S + WINDOW_S;
    rt.block_on(async {
        for s in end..end + compact_s - 1 {
            tx.send(second(s)).await.unwrap();
            store.flush().await.unwrap();
        }
    });
    // The directory must outlive the store: leak it (the process ends soon).
    std::mem::forget(dir);
    (wear, Some((store, T0 + (end + compact_s) * 1000)))
}

/// The previous layout (benches/store_legacy) on the same samples: a commit
/// every `flush_s`, a compaction a minute, SQLite's checkpoints every 8192
/// frames, one more at the end.
fn wear_previous(flush_s: i64) -> Wear {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("legacy.db");
    let mut legacy = Legacy::create(&path, SITE_SERIES);
    let rows = |s: i64| -> Vec<(i64, i64, f64)> {
        second(s)
            .into_iter()
            .map(|x| {
                let series = i64::from(x.device.0) * PROPS as i64 + x.property.index() as i64 + 1;
                (series, x.ts_ms, x.value)
            })
            .collect()
    };
    let history: Vec<_> = (0..HISTORY_S).flat_map(rows).collect();
    legacy.commit(&history);
    legacy.checkpoint();
    let before = write_bytes().unwrap_or(0);
    let mut pending = Vec::new();
    for s in HISTORY_S..HISTORY_S + WINDOW_S {
        pending.extend(rows(s));
        if (s + 1) % flush_s == 0 {
            legacy.commit(&std::mem::take(&mut pending));
        }
        if (s + 1) % store_legacy::COMPACT_EVERY_S == 0 {
            legacy.compact();
        }
    }
    legacy.checkpoint();
    Wear {
        bytes: write_bytes().unwrap_or(before) - before,
        wal: 0,
        samples: (WINDOW_S * SITE_SERIES) as u64,
        seconds: WINDOW_S,
    }
}

/// Bytes written per sample and per day at each flush interval, the current
/// layout beside the previous one; returns the default run's store with ten
/// minutes staged, for the query benchmark.
fn wear_table(rt: &tokio::runtime::Runtime) -> Option<(StoreHandle, i64)> {
    if write_bytes().is_none() {
        println!("wear: /proc/self/io not available, skipped");
        return None;
    }
    println!(
        "\n== wear: {SITE_SERIES} series at 1 Hz ({DEVICES} devices x {PROPS} properties), {} min measured after {} min of history, checkpoint included",
        WINDOW_S / 60,
        HISTORY_S / 60
    );
    println!(
        "{:>14} | {:>23} | {:>21} | {:>12} | {:>21}",
        "flush interval",
        "a power cut loses",
        "bytes/sample, per day",
        "of it in WAL",
        "previous layout"
    );
    let mut kept = None;
    let mut default = None;
    for (i, &flush_s) in FLUSH_INTERVALS_S.iter().enumerate() {
        let (now, store) = wear_current(rt, flush_s, None, i == 0);
        let before = wear_previous(flush_s);
        if i == 0 {
            kept = store;
            default = Some((now, before));
        }
        println!(
            "{:>12} s | {:>23} | {:>7.1} B {:>8.2} GiB | {:>10.1} B | {:>7.1} B {:>8.2} GiB",
            flush_s,
            format!("<= {flush_s} s + commit"),
            now.per_sample(),
            now.gib_per_day(),
            now.wal as f64 / now.samples as f64,
            before.per_sample(),
            before.gib_per_day()
        );
    }
    if let Ok(sizes) = std::env::var("STORE_BENCH_PAGE_SIZES") {
        for size in sizes
            .split(',')
            .filter_map(|s| s.trim().parse::<u32>().ok())
        {
            let (w, _) = wear_current(rt, 1, Some(size), false);
            println!(
                "page size {size}: {:.1} bytes written per sample = {:.2} GiB/day, {:.1} B in WAL (1 s flush)",
                w.per_sample(),
                w.gib_per_day(),
                w.wal as f64 / w.samples as f64
            );
        }
    }
    if let Some((now, before)) = default {
        println!(
            "default settings (flush 1 s, compaction 10 min): {:.1} bytes written per sample = {:.2} GiB/day; previous layout {:.1} bytes = {:.2} GiB/day",
            now.per_sample(),
            now.gib_per_day(),
            before.per_sample(),
            before.gib_per_day()
        );
    }
    kept
}

/// Bytes of the pages of the named tables and indexes (`dbstat`).
fn pages_of(conn: &Connection, names: &[&str]) -> u64 {
    let mut stmt = conn
        .prepare("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?1 AND aggregate = TRUE")
        .unwrap();
    names
        .iter()
        .map(|n| stmt.query_row([n], |r| r.get::<_, i64>(0)).unwrap() as u64)
        .sum()
}

const CHUNK_OBJECTS: [&str; 3] = ["raw_chunk", "raw_chunk_by_window", "raw_chunk_by_end"];

/// The same chunks (series, start, end, n, samples) coded as before
/// migration 0011, in a database of their own with the same page size and
/// keys: the bytes of its chunk pages and of the bodies alone.
fn chunks_coded_before(conn: &Connection, dir: &std::path::Path) -> (u64, u64) {
    let old = Connection::open(dir.join("before.db")).unwrap();
    old.execute_batch(
        "PRAGMA page_size = 1024;
         CREATE TABLE raw_chunk (id INTEGER PRIMARY KEY, series INTEGER NOT NULL,
             start_ts INTEGER NOT NULL, end_ts INTEGER NOT NULL, n INTEGER NOT NULL,
             body BLOB NOT NULL);
         CREATE INDEX raw_chunk_by_window ON raw_chunk (start_ts / 600000, series, start_ts);
         CREATE INDEX raw_chunk_by_end ON raw_chunk (end_ts);",
    )
    .unwrap();
    let mut insert = old
        .prepare(
            "INSERT INTO raw_chunk (series, start_ts, end_ts, n, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .unwrap();
    let mut chunks = conn
        .prepare(
            "SELECT c.series, s.device, s.property, c.start_ts, c.end_ts, c.n
             FROM raw_chunk c JOIN series s ON s.id = c.series ORDER BY c.id",
        )
        .unwrap();
    let mut rows = chunks.query([]).unwrap();
    let mut bodies = 0u64;
    old.execute_batch("BEGIN").unwrap();
    while let Some(r) = rows.next().unwrap() {
        let (series, device, property): (i64, String, String) =
            (r.get(0).unwrap(), r.get(1).unwrap(), r.get(2).unwrap());
        let (start, end, n): (i64, i64, i64) =
            (r.get(3).unwrap(), r.get(4).unwrap(), r.get(5).unwrap());
        let property = *Property::ALL.iter().find(|p| p.name() == property).unwrap();
        let mut samples = Vec::with_capacity(n as usize);
        for_each_sample(conn, &device, property, start, end + 1, |t, v| {
            samples.push((t, v))
        })
        .unwrap();
        let body = store_legacy::chunk::encode_chunk(&samples);
        bodies += body.len() as u64;
        insert
            .execute(rusqlite::params![series, start, end, n, body])
            .unwrap();
    }
    old.execute_batch("COMMIT").unwrap();
    (pages_of(&old, &CHUNK_OBJECTS), bodies)
}

/// Bytes a sample takes at rest on noisy data with float models: `devices`
/// noisy devices (13 properties, 1 Hz, a fifth on float registers) for ten
/// minutes, compacted every `compact_s`; chunks, keys, rollups and series
/// (everything but the staging ring), beside the chunk coding before 0011.
fn noisy_at_rest(rt: &tokio::runtime::Runtime, devices: usize, compact_s: i64) {
    const SECONDS: i64 = 600;
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig {
        path: dir.path().join("noisy.db"),
        max_size_mb: 1 << 20,
        retention_days: 10_000,
        rollup_retention_days: 10_000,
        minute_rollup_retention_days: Some(10_000),
        flush_interval_ms: 60_000,
        compact_interval_s: 3_600,
        ..StorageConfig::default()
    };
    let refs = (0..devices).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&config, refs).unwrap();
    let tx = store.sample_sender();
    let mut site = noisy::NoisySite::new(devices, 35, T0);
    rt.block_on(async {
        for s in 0..SECONDS {
            tx.send(site.second(s)).await.unwrap();
            store.flush().await.unwrap();
            if (s + 1) % compact_s == 0 {
                store.compact().await.unwrap();
            }
        }
        store.compact().await.unwrap();
    });
    let samples = (SECONDS as usize * site.samples_per_second()) as f64;
    let conn = Connection::open(&config.path).unwrap();
    let all: i64 = conn
        .query_row(
            "SELECT sum(pgsize) FROM dbstat WHERE aggregate = TRUE AND name <> 'stage_slot'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let chunk_pages = pages_of(&conn, &CHUNK_OBJECTS);
    let rollups = pages_of(&conn, &["rollup_1m", "rollup_1h"]);
    let bodies: i64 = conn
        .query_row("SELECT sum(length(body)) FROM raw_chunk", [], |r| r.get(0))
        .unwrap();
    let (old_pages, old_bodies) = chunks_coded_before(&conn, dir.path());
    let per = |b: f64| b / samples;
    let at_rest = all as f64;
    println!(
        "{:>7} | {:>9} s | {:>7.2} B | {:>9.2} B | {:>9.2} B | {:>7.2} B | {:>10.2} B | {:>10.2} B",
        devices,
        compact_s,
        per(at_rest),
        per(chunk_pages as f64),
        per(bodies as f64),
        per(rollups as f64),
        per(at_rest - chunk_pages as f64 + old_pages as f64),
        per(old_bodies as f64),
    );
    rt.block_on(store.close()).unwrap();
}

/// The noisy at-rest table: the ring's bound at 1,000 devices starts a
/// compaction about every 150 s; below 330 devices the default interval,
/// 600 s, does.
fn noisy_table(rt: &tokio::runtime::Runtime) {
    println!(
        "\n== at rest on noisy data with float models (13 properties a device, 1 Hz, a fifth float32, 10 min), bytes per sample"
    );
    println!(
        "{:>7} | {:>11} | {:>9} | {:>11} | {:>11} | {:>9} | {:>12} | {:>12}",
        "devices",
        "compaction",
        "at rest",
        "chunk pages",
        "of it body",
        "rollups",
        "before: rest",
        "before: body"
    );
    for (devices, compact_s) in [(200, 150), (200, 600)] {
        noisy_at_rest(rt, devices, compact_s);
    }
}
