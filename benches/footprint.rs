//! Memory, CPU and flash wear of the agent, in two modes. The simulated sites
//! run in this process; the agents are the release `sitegate` binary in child
//! processes (`sitegate run`), so only their own memory, CPU and writes are
//! counted: RSS from `/proc/PID/status`, CPU time from `/proc/PID/stat`, bytes
//! written to storage from `write_bytes` of `/proc/PID/io`, samples from
//! `sitegate_store_samples_total{result="committed"}` of `/metrics`.
//!
//! Both modes poll a noisy simulated site (`docs/devices.md`, "Noisy mode":
//! noise on every point every second, a fifth of the inverters and meters on
//! float models, loads that walk on their own); `--calm` runs the calm
//! simulator instead, for comparison with figures taken before.
//!
//! **Flush intervals** (the default mode; `cargo bench --bench footprint`
//! `-- [flush] SECONDS WEAR_SECONDS [--calm]`, default 60 and 600): 20 devices polled
//! at 1 Hz (targets: <= 20 MB RSS, <= 2 % of one core, <= 100 bytes written
//! per sample); 60 s of CPU and memory measurement and 600 s of wear
//! measurement, both after 20 s of warm-up. The store, the bus tasks and the
//! HTTP server all run; no requests are made but `/metrics` scrapes. Three
//! agents poll the same site, with `storage.flush_interval_ms` 1000 (the
//! default; its CPU and memory are reported), 5000 and 30000. The wear window
//! covers one compaction (every 10 min) and ends with a checkpoint of each
//! database, so every byte the window's commits cost is counted. Beside each,
//! the previous store layout (`benches/store_legacy`) runs in this process on
//! as many series at 1 Hz, with the same flush interval, for the same window.
//!
//! **Scale** (`-- scale SIZES MINUTES [--layout small|commercial]
//! [--history-h HOURS] [--window-min W] [--calm] [--cap-mb MB]`, e.g. `--
//! scale 20,200,1000 60 --history-h 24`): one agent and one simulated site
//! per size, all running at once, default storage settings but the size
//! bound (far away unless `--cap-mb` sets it: then the pages in use and the
//! file at most are printed, and the bytes written are those of a store that
//! evicts); a
//! day of history written first on request, through the store's staging and
//! compaction (`footprint/history.rs`). Start-up to all devices online, RSS,
//! CPU, bytes written per sample in the first and last W (10) minutes, bytes
//! at rest per sample, latest-value GET and steering POST latencies, Modbus
//! writes per device per hour, requests per poll, the steering audit's growth
//! and the `/metrics` scrape's size: see `footprint/scale.rs` (how) and
//! `footprint/layout.rs` (the sites).
#![allow(clippy::print_stdout, clippy::unwrap_used, dead_code)]

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "../tests/it/steering_support/mod.rs"]
mod steering_support;

#[path = "footprint/counts.rs"]
mod counts;
#[path = "footprint/history.rs"]
mod history;
#[path = "footprint/layout.rs"]
mod layout;
#[path = "footprint/noisy.rs"]
mod noisy;
#[path = "footprint/procfs.rs"]
mod procfs;
#[path = "footprint/scale.rs"]
mod scale;
mod store_legacy;

use procfs::{checkpoint, cpu_ticks, io_write_bytes, memory_kb};

use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

use sitegate::sim::{SimSite, SimSiteSpec};
use steering_support::{Kind, TestSite};

const INVERTERS: usize = 10;
const BATTERIES: usize = 8;
const METERS: usize = 2;

/// Flush intervals of the agents (the first is the default).
const FLUSH_INTERVALS_MS: [u64; 3] = [1_000, 5_000, 30_000];

/// The default mode's site: 20 devices, each alone on a bus, polled at
/// 1 Hz, spread over two sites (`ste_0`, `ste_1`), the API on `http_port`
/// without auth, the store in `dir` committing every `flush_ms`.
fn test_site(dir: &std::path::Path, http_port: u16, flush_ms: u64, calm: bool) -> TestSite {
    let mut site = TestSite::bare("ste_0", "Site 0")
        .site("ste_1", "Site 1")
        .gateway_id("footprint")
        .http_key(
            "listen",
            toml::Value::Array(vec![format!("127.0.0.1:{http_port}").into()]),
        )
        .storage_path(&dir.join("sitegate.db"))
        .section_key(&["storage"], "flush_interval_ms", flush_ms as i64)
        .section_key(&["logging"], "level", "warn")
        .poll_interval_ms(1000)
        .simulator(&[], "noisy", !calm);
    let kinds = [
        (Kind::Inverter, "inverter", INVERTERS),
        (Kind::Battery, "battery", BATTERIES),
        (Kind::Meter, "meter", METERS),
    ];
    let mut n = 0;
    for (kind, name, count) in kinds {
        for i in 0..count {
            let bus = format!("{name}{i}");
            site = site
                .site(&format!("ste_{}", n % METERS), "")
                .device(&bus, &format!("dvc_{bus}"), kind)
                .name(&bus);
            n += 1;
        }
    }
    site
}

/// One agent under measurement.
struct Agent {
    child: Child,
    flush_ms: u64,
    http_port: u16,
    db: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Agent {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn write_bytes(&self) -> u64 {
        io_write_bytes(&format!("/proc/{}/io", self.pid()))
    }

    /// `sitegate_store_samples_total{result="committed"}` from `/metrics`.
    fn committed(&self, rt: &tokio::runtime::Runtime) -> u64 {
        let text = rt.block_on(async {
            reqwest::get(format!("http://127.0.0.1:{}/metrics", self.http_port))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        });
        text.lines()
            .find_map(|l| l.strip_prefix("sitegate_store_samples_total{result=\"committed\"} "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0) as u64
    }
}

/// Starts an agent polling the simulated site with the given flush interval.
fn start_agent(sim: &SimSite, flush_ms: u64, calm: bool) -> Agent {
    let dir = tempfile::tempdir().unwrap();
    // A free port for the agent's API (metrics, and the check that it polled).
    let http_port = common::free_port().port();
    // The config with the simulator's ports.
    let text = test_site(dir.path(), http_port, flush_ms, calm)
        .pointed_at(sim)
        .text();
    let path = dir.path().join("sitegate.toml");
    std::fs::write(&path, text).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(["run", "--config", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Agent {
        child,
        flush_ms,
        http_port,
        db: dir.path().join("sitegate.db"),
        _dir: dir,
    }
}

/// The previous store layout on `series` series at 1 Hz for `seconds`, a
/// commit every `flush_s`, a compaction a minute, a checkpoint at the end, on
/// its own thread, with values as `noisy.rs` makes them (each series one
/// property of an inverter of its own): returns (bytes written, samples).
fn legacy(
    series: i64,
    flush_s: u64,
    seconds: u64,
    calm: bool,
) -> std::thread::JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let mut values: Vec<noisy::Series> = (0..series as usize)
            .map(|i| noisy::Series::new("inverter", i, calm))
            .collect();
        let mut row = Vec::new();
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_legacy::Legacy::create(&dir.path().join("legacy.db"), series);
        let before = io_write_bytes("/proc/thread-self/io");
        let t0 = Instant::now();
        let mut pending = Vec::new();
        let mut samples = 0u64;
        for s in 1..=seconds {
            let due = t0 + Duration::from_secs(s);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            let ts = sitegate::model::time::now_ms();
            for id in 1..=series {
                row.clear();
                values[id as usize - 1].values(ts / 1000, &mut row);
                pending.push((id, ts, row[id as usize % row.len()]));
            }
            samples += series as u64;
            if s % flush_s == 0 {
                store.commit(&std::mem::take(&mut pending));
            }
            if s as i64 % store_legacy::COMPACT_EVERY_S == 0 {
                store.compact();
            }
        }
        store.checkpoint();
        (io_write_bytes("/proc/thread-self/io") - before, samples)
    })
}

fn main() {
    // `cargo bench` adds `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("scale") => scale::main(&args[1..]),
        Some("flush") => flush_intervals(&args[1..]),
        _ => flush_intervals(&args),
    }
}

/// The default mode: 20 devices, three agents with three flush intervals.
fn flush_intervals(args: &[String]) {
    let calm = args.iter().any(|a| a == "--calm");
    let mut numbers = args.iter().filter_map(|a| a.parse::<u64>().ok());
    let seconds = numbers.next().unwrap_or(60);
    let wear_seconds = numbers.next().unwrap_or(600).max(seconds);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sim_dir = tempfile::tempdir().unwrap();
    let sim_config = test_site(sim_dir.path(), 1, 1000, calm).config();
    let sim = rt
        .block_on(SimSite::start(SimSiteSpec::from_config(&sim_config, 1.0)))
        .unwrap();
    let mut agents: Vec<Agent> = FLUSH_INTERVALS_MS
        .iter()
        .map(|&ms| start_agent(&sim, ms, calm))
        .collect();
    println!(
        "agent pids {:?}: {} devices at 1 Hz on a {} simulator, flush intervals {FLUSH_INTERVALS_MS:?} ms; 20 s warm-up, then {seconds} s of CPU and memory (1 s agent) and {wear_seconds} s of writes measured",
        agents.iter().map(Agent::pid).collect::<Vec<_>>(),
        INVERTERS + BATTERIES + METERS,
        if calm { "calm" } else { "noisy" }
    );
    std::thread::sleep(Duration::from_secs(20));

    let pid = agents[0].pid();
    let start: Vec<(u64, u64)> = agents
        .iter()
        .map(|a| (a.write_bytes(), a.committed(&rt)))
        .collect();
    // The previous layout on as many series as the default agent stores.
    let series: i64 = rusqlite::Connection::open(&agents[0].db)
        .unwrap()
        .query_row("SELECT count(*) FROM series", [], |r| r.get(0))
        .unwrap();
    let legacies: Vec<_> = FLUSH_INTERVALS_MS
        .iter()
        .map(|&ms| legacy(series, ms / 1000, wear_seconds, calm))
        .collect();
    let t0 = Instant::now();

    let ticks0 = cpu_ticks(pid);
    let mut rss = Vec::new();
    while t0.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        rss.push(memory_kb(pid).0);
    }
    let cpu_s = (cpu_ticks(pid) - ticks0) as f64 / 100.0;
    let elapsed = t0.elapsed().as_secs_f64();
    let (_, hwm) = memory_kb(pid);
    let mean = rss.iter().sum::<u64>() as f64 / rss.len() as f64;
    println!(
        "RSS steady: mean {:.1} MB, max {:.1} MB (high-water mark since start {:.1} MB)",
        mean / 1024.0,
        *rss.iter().max().unwrap() as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    println!(
        "CPU: {cpu_s:.2} s in {elapsed:.1} s = {:.2} % of one core",
        cpu_s / elapsed * 100.0
    );

    // Every device must have been polled throughout: online, seen within 2 s.
    let devices: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("http://127.0.0.1:{}/devices", agents[0].http_port))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let now = sitegate::model::time::now_ms();
    let polled = devices
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["status"]["online"] == true
                && now - d["status"]["lastSeen"].as_i64().unwrap_or(0) < 2000
        })
        .count();
    println!(
        "devices online and polled within the last 2 s: {polled} of {}",
        devices.as_array().unwrap().len()
    );
    assert_eq!(polled, INVERTERS + BATTERIES + METERS, "{devices}");

    std::thread::sleep(Duration::from_secs(wear_seconds).saturating_sub(t0.elapsed()));
    let wear_elapsed = t0.elapsed().as_secs_f64();
    let ends: Vec<(u64, u64)> = agents
        .iter()
        .map(|a| {
            let samples = a.committed(&rt);
            let written = a.write_bytes() + checkpoint(&a.db);
            (written, samples)
        })
        .collect();
    let previous: Vec<(u64, u64)> = legacies.into_iter().map(|h| h.join().unwrap()).collect();
    println!(
        "\nwrites over {wear_elapsed:.0} s (/proc/PID/io write_bytes and a final checkpoint), previous layout on {series} series at 1 Hz beside:"
    );
    println!(
        "{:>14} | {:>23} | {:>21} | {:>21}",
        "flush interval", "a power cut loses", "bytes/sample, per day", "previous layout"
    );
    let per_day = |bytes: u64, secs: f64| bytes as f64 * 86_400.0 / secs / (1u64 << 30) as f64;
    for (i, agent) in agents.iter().enumerate() {
        let (bytes, samples) = (ends[i].0 - start[i].0, ends[i].1 - start[i].1);
        let (old_bytes, old_samples) = previous[i];
        println!(
            "{:>12} s | {:>23} | {:>7.1} B {:>8.2} GiB | {:>7.1} B {:>8.2} GiB",
            agent.flush_ms / 1000,
            format!("<= {} s + commit", agent.flush_ms / 1000),
            bytes as f64 / samples.max(1) as f64,
            per_day(bytes, wear_elapsed),
            old_bytes as f64 / old_samples.max(1) as f64,
            per_day(old_bytes, wear_seconds as f64),
        );
    }
    let (bytes, samples) = (ends[0].0 - start[0].0, ends[0].1 - start[0].1);
    println!(
        "default settings: {:.1} bytes written per sample ({:.0} samples/s) = {:.2} GiB/day; previous layout {:.1} bytes = {:.2} GiB/day",
        bytes as f64 / samples.max(1) as f64,
        samples as f64 / wear_elapsed,
        per_day(bytes, wear_elapsed),
        previous[0].0 as f64 / previous[0].1.max(1) as f64,
        per_day(previous[0].0, wear_seconds as f64),
    );

    for agent in &mut agents {
        terminate(&mut agent.child);
    }
    rt.block_on(sim.shutdown());
}

/// SIGTERM through `kill(1)` (no libc dependency), then wait.
fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
