//! The scale mode: one agent per size, each against its own simulated site,
//! all at once in this process, so an hour per size takes an hour in all.
//!
//! Per size: the simulator starts; with `--history-h H` the agent's database
//! is filled with `H` hours of history (all sizes at once); then every agent
//! is spawned at the same moment. Start-up is the time from the spawn until
//! `GET /devices` shows every device online. The run (`MINUTES`) counts from
//! there. Every 5 s the RSS is read; every 10 s a latest-value GET is timed;
//! every 30 s a curtailment POST to the steered site (`layout.rs`; 10 % and
//! 15 % in turn: below any limit the grid loop holds on its own, so each POST
//! changes every inverter's limit; at 20 devices the steered site is the
//! park, whose export limit holds its inverters near 24 %)
//! is timed to the first and to the last of its inverters' Modbus writes at
//! the simulator. The bytes written per sample are taken over the first and
//! the last ten minutes: `write_bytes` of `/proc/PID/io` plus a checkpoint of
//! the WAL from the bench at the end of each window (one at its start, not
//! counted), over the samples committed (`/metrics`). Bytes at rest: the
//! growth of the pages in use over the samples committed in the run. Over
//! the last window (steady state, without the loop's first caps and its
//! settling), at the simulator: Modbus writes per device per hour (the
//! devices off the steered site: mean and the most of one device; the park's
//! inverters apart), requests per poll (every request the servers answered
//! over the polls `/metrics` counts; reads alone beside), and the growth of
//! the steering audit (the `steering_audit` table and its indexes, by
//! SQLite's `dbstat` on a read-only connection) per hour; the size of the
//! last `/metrics` scrape. The sites are noisy (`docs/devices.md`, "Noisy
//! mode") unless `--calm` asks for the calm simulator.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Duration;
use tokio::time::Instant;

use serde_json::{json, Value};
use sitegate::config::parse;
use sitegate::sim::{SimSite, SimSiteSpec};

use super::counts::{modbus_figures, Counts, Modbus};
use super::layout::{test_site, Layout, Plan};
use super::procfs::{checkpoint, cpu_ticks, io_write_bytes, memory_kb, used_bytes};

/// 11:00 UTC on 2026-06-21: the simulated sun is high.
const SUMMER_MORNING_MS: i64 = 1_782_039_600_000;
const RSS_EVERY: Duration = Duration::from_secs(5);
const GET_EVERY: Duration = Duration::from_secs(10);
const POST_EVERY: Duration = Duration::from_secs(30);
/// How long a steering round waits for the last inverter's write.
const POST_WAIT: Duration = Duration::from_secs(10);

/// What the command line asks for.
struct Args {
    sizes: Vec<usize>,
    minutes: u64,
    layout: Layout,
    history_h: i64,
    window_min: u64,
    calm: bool,
    /// `storage.max_size_mb` (far away unless `--cap-mb` sets it).
    cap_mb: u64,
}

fn parse_args(args: &[String]) -> Args {
    let mut a = Args {
        sizes: vec![20, 100, 200, 500, 1000],
        minutes: 60,
        layout: Layout::Commercial,
        history_h: 0,
        window_min: 10,
        calm: false,
        cap_mb: 65536,
    };
    let mut positional = 0;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--layout" => a.layout = Layout::parse(it.next().unwrap()),
            "--history-h" => a.history_h = it.next().unwrap().parse().unwrap(),
            "--window-min" => a.window_min = it.next().unwrap().parse().unwrap(),
            "--calm" => a.calm = true,
            "--cap-mb" => a.cap_mb = it.next().unwrap().parse().unwrap(),
            v if positional == 0 => {
                a.sizes = v.split(',').map(|n| n.trim().parse().unwrap()).collect();
                positional += 1;
            }
            v => a.minutes = v.parse().unwrap(),
        }
    }
    a.window_min = a.window_min.min(a.minutes / 2).max(1);
    a
}

/// Bytes, samples, CPU ticks and time at one moment of a run, with the
/// bytes the store had appended to its WAL by then.
#[derive(Clone, Copy)]
struct Mark {
    bytes: u64,
    samples: u64,
    wal: f64,
    ticks: u64,
    at: Instant,
}

/// What one size measured.
struct Report {
    devices: usize,
    counts: (usize, usize, usize),
    steered: usize,
    history_samples: u64,
    startup_s: f64,
    rss_mean_kb: f64,
    rss_last_kb: f64,
    hwm_kb: u64,
    cpu_pct: f64,
    first: (f64, f64, f64),
    last: (f64, f64, f64),
    rest_per_sample: f64,
    get_ms: Vec<f64>,
    post_first_ms: Vec<f64>,
    post_last_ms: Vec<f64>,
    post_incomplete: usize,
    modbus: Modbus,
    /// The most pages in use and the largest file with its WAL, bytes.
    used_most: u64,
    file_most: u64,
}

/// One agent under measurement, with its simulated site.
struct Run {
    n: usize,
    plan: Plan,
    sim: SimSite,
    child: Option<Child>,
    http_port: u16,
    db: PathBuf,
    config_path: PathBuf,
    http: reqwest::Client,
    rt: tokio::runtime::Handle,
    _dir: tempfile::TempDir,
}

impl Run {
    /// Starts the simulated site of `n` devices and writes the agent's config.
    fn prepare(rt: &tokio::runtime::Handle, args: &Args, n: usize) -> Run {
        let (layout, calm, cap) = (args.layout, args.calm, args.cap_mb);
        let plan = Plan::new(layout, n);
        let dir = tempfile::tempdir().unwrap();
        let http_port = crate::common::free_port().port();
        let site = || test_site(&plan, dir.path(), http_port, calm, cap);
        let mut spec = SimSiteSpec::from_config(&site().config(), 1.0);
        spec.start = Some(SUMMER_MORNING_MS);
        let sim = rt.block_on(SimSite::start(spec)).unwrap();
        let text = site().pointed_at(&sim).text();
        let config_path = dir.path().join("sitegate.toml");
        std::fs::write(&config_path, text).unwrap();
        Run {
            n,
            plan,
            sim,
            child: None,
            http_port,
            db: dir.path().join("sitegate.db"),
            config_path,
            // The agent closes a connection that sends no request head for
            // 10 s (`http_server::HEAD_TIMEOUT`); a GET every 10 s on a
            // pooled connection would race that close, so none is reused
            // after 5 s idle.
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            rt: rt.clone(),
            _dir: dir,
        }
    }

    /// Writes `hours` of history into the agent's database.
    fn prefill(&self, hours: i64, calm: bool) -> super::history::Prefill {
        let config = parse(&std::fs::read_to_string(&self.config_path).unwrap()).unwrap();
        let devices: Vec<(String, &'static str)> = self
            .plan
            .devices
            .iter()
            .map(|d| (d.reference.clone(), d.kind))
            .collect();
        super::history::prefill(&self.rt, &config.storage, &devices, hours, calm)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.http_port)
    }

    fn get_json(&self, path: &str) -> Option<Value> {
        self.rt.block_on(async {
            let r = self.http.get(self.url(path)).send().await.ok()?;
            r.json().await.ok()
        })
    }

    fn scrape(&self) -> String {
        self.rt.block_on(async {
            let r = self.http.get(self.url("/metrics")).send().await.unwrap();
            r.text().await.unwrap()
        })
    }

    /// What the simulator and the agent counted so far.
    fn counts(&self) -> Counts {
        Counts::now(&self.plan, &self.sim, &self.db, self.scrape())
    }

    /// From one `/metrics` scrape: the samples committed
    /// (`sitegate_store_samples_total{result="committed"}`), the bytes
    /// SQLite holds (`sitegate_store_sqlite_memory_bytes{at="now"}`) and the
    /// bytes the store appended to its WAL
    /// (`sitegate_store_wal_written_bytes_total`).
    fn store_figures(&self) -> (u64, f64, f64) {
        let text = self.scrape();
        let value = |series: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (
            value("sitegate_store_samples_total{result=\"committed\"}") as u64,
            value("sitegate_store_sqlite_memory_bytes{at=\"now\"}"),
            value("sitegate_store_wal_written_bytes_total"),
        )
    }

    /// Spawns the agent and waits until every device is online: seconds.
    fn start_agent(&mut self) -> f64 {
        let t = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
            .args(["run", "--config", self.config_path.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        self.child = Some(child);
        loop {
            let online = self.get_json("/devices").map_or(0, |d| {
                d.as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["status"]["online"] == true)
                    .count()
            });
            if online == self.n {
                return t.elapsed().as_secs_f64();
            }
            assert!(
                t.elapsed() < Duration::from_secs(600),
                "n={}: {online} of {} online after 600 s",
                self.n,
                self.n
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Now, with a checkpoint first whose bytes count when `count_checkpoint`.
    fn mark(&self, count_checkpoint: bool) -> Mark {
        let ckpt = checkpoint(&self.db);
        let (samples, _, wal) = self.store_figures();
        Mark {
            bytes: io_write_bytes(&format!("/proc/{}/io", self.pid()))
                + if count_checkpoint { ckpt } else { 0 },
            samples,
            wal,
            ticks: cpu_ticks(self.pid()),
            at: Instant::now(),
        }
    }

    /// One latest-value GET: ms.
    fn time_get(&self, i: usize) -> f64 {
        let d = &self.plan.devices[i * 7 % self.n];
        let path = format!("/devices/{}/measurement?property=activePower", d.reference);
        let t = Instant::now();
        let body = self.rt.block_on(async {
            let r = self.http.get(self.url(&path)).send().await.unwrap();
            (r.status(), r.bytes().await.unwrap())
        });
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        assert!(body.0.is_success(), "GET {path}: {body:?}");
        ms
    }

    /// One curtailment POST to the steered site: ms to the first and to the last
    /// of its inverters' first write at the simulator (`None` when some did
    /// not get one within [`POST_WAIT`]).
    fn time_post(&self, round: usize) -> (Option<f64>, Option<f64>) {
        let targets = self.plan.steered_inverters();
        let site = &self.plan.sites[self.plan.steered_site()].reference;
        let pct = if round.is_multiple_of(2) { 10 } else { 15 };
        let body = json!({"setting": {"value": pct, "unit": "%"},
            "validUntil": sitegate::model::time::now_ms() + 600_000});
        let url = self.url(&format!("/sites/{site}/steering/curtailment"));
        self.rt.block_on(async {
            let mut writes = self.sim.subscribe_writes();
            let t0 = Instant::now();
            let r = self.http.post(&url).json(&body).send().await.unwrap();
            assert!(r.status().is_success(), "POST {url}: {}", r.status());
            let mut seen: HashMap<(String, u8), Instant> = HashMap::new();
            let deadline = t0 + POST_WAIT;
            while seen.len() < targets.len() {
                let left = deadline.saturating_duration_since(Instant::now());
                let e = match tokio::time::timeout(left, writes.recv()).await {
                    Err(_) => break,
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
                    Ok(Err(_)) => break,
                    Ok(Ok(e)) => e,
                };
                let key = (e.server.clone(), e.unit_id);
                if e.at >= t0 && targets.contains(&key) {
                    seen.entry(key).or_insert(e.at);
                }
            }
            let ms = |at: &Instant| at.duration_since(t0).as_secs_f64() * 1000.0;
            let first = seen.values().min().map(ms);
            let last = (seen.len() == targets.len())
                .then(|| seen.values().max().map(ms))
                .flatten();
            (first, last)
        })
    }

    fn stop(&mut self) {
        if let Some(child) = &mut self.child {
            super::terminate(child);
        }
    }
}

/// Bytes per sample and GiB a day between two marks, and samples a second.
fn window(a: &Mark, b: &Mark) -> (f64, f64, f64) {
    let bytes = b.bytes.saturating_sub(a.bytes) as f64;
    let samples = b.samples.saturating_sub(a.samples).max(1) as f64;
    let secs = b.at.duration_since(a.at).as_secs_f64();
    (
        bytes / samples,
        bytes * 86_400.0 / secs / (1u64 << 30) as f64,
        samples / secs,
    )
}

/// Runs one size from the spawn of its agent to the end of its measurement.
fn measure(run: &mut Run, args: &Args, history_samples: u64) -> Report {
    let n = run.n;
    let startup_s = run.start_agent();
    println!("[n={n}] all {n} devices online {startup_s:.2} s after spawn");
    let total = Duration::from_secs(args.minutes * 60);
    let win = Duration::from_secs(args.window_min * 60);
    let start = run.mark(false);
    let counts0 = run.counts();
    let mut counts_last = None;
    let used0 = used_bytes(&run.db);
    // The pages in use and the file (with its WAL), the most seen at the
    // minute marks: what a size bound must hold.
    let file_bytes = |db: &PathBuf| {
        let wal = db.with_extension("db-wal");
        [db.as_path(), wal.as_path()]
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum::<u64>()
    };
    let (mut used_most, mut file_most) = (used0, file_bytes(&run.db));
    let mut first_end = None;
    let mut last_start = None;
    let (mut rss, mut rss_last) = (Vec::new(), Vec::new());
    let (mut gets, mut post_first, mut post_last, mut incomplete) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    let (mut next_rss, mut next_get, mut next_post) = (Duration::ZERO, GET_EVERY / 2, POST_EVERY);
    let mut next_minute = Duration::from_secs(60);
    let mut minute_mark = start;
    loop {
        let t = start.at.elapsed();
        if t >= total {
            break;
        }
        if first_end.is_none() && t >= win {
            first_end = Some(run.mark(true));
        }
        if last_start.is_none() && t >= total - win {
            last_start = Some(run.mark(false));
            counts_last = Some(run.counts());
        }
        if t >= next_rss {
            let kb = memory_kb(run.pid()).0;
            rss.push(kb);
            if last_start.is_some() {
                rss_last.push(kb);
            }
            next_rss += RSS_EVERY;
        }
        if t >= next_get {
            gets.push(run.time_get(gets.len()));
            next_get += GET_EVERY;
        }
        if t >= next_post {
            match run.time_post(post_first.len() + incomplete) {
                (Some(f), Some(l)) => {
                    post_first.push(f);
                    post_last.push(l);
                }
                _ => incomplete += 1,
            }
            next_post += POST_EVERY;
        }
        if t >= next_minute {
            let (samples, sqlite, wal) = run.store_figures();
            used_most = used_most.max(used_bytes(&run.db));
            file_most = file_most.max(file_bytes(&run.db));
            let now = Mark {
                bytes: io_write_bytes(&format!("/proc/{}/io", run.pid())),
                samples,
                wal,
                ticks: cpu_ticks(run.pid()),
                at: Instant::now(),
            };
            let (b, _, rate) = window(&minute_mark, &now);
            let cpu = (now.ticks - minute_mark.ticks) as f64
                / now.at.duration_since(minute_mark.at).as_secs_f64();
            // What the WAL took of it; the rest is mostly checkpoints.
            let wal_b = (now.wal - minute_mark.wal)
                / now.samples.saturating_sub(minute_mark.samples).max(1) as f64;
            println!(
                "[n={n}] minute {:>3}: RSS {:.1} MB (SQLite {:.1} MB), CPU {cpu:.1} %, {b:.1} B/sample (WAL appends {wal_b:.1}; no bench checkpoint), {rate:.0} samples/s",
                next_minute.as_secs() / 60,
                memory_kb(run.pid()).0 as f64 / 1024.0,
                sqlite / (1024.0 * 1024.0),
            );
            minute_mark = now;
            next_minute += Duration::from_secs(60);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let end = run.mark(true);
    let counts1 = run.counts();
    let used1 = used_bytes(&run.db);
    used_most = used_most.max(used1);
    file_most = file_most.max(file_bytes(&run.db));
    let hwm_kb = memory_kb(run.pid()).1;
    run.stop();
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    let secs = end.at.duration_since(start.at).as_secs_f64();
    Report {
        devices: n,
        counts: run.plan.counts(),
        steered: run.plan.steered_inverters().len(),
        history_samples,
        startup_s,
        rss_mean_kb: mean(&rss),
        rss_last_kb: mean(&rss_last),
        hwm_kb,
        cpu_pct: (end.ticks - start.ticks) as f64 / secs,
        first: window(&start, &first_end.unwrap()),
        last: window(&last_start.unwrap(), &end),
        rest_per_sample: used1.saturating_sub(used0) as f64
            / end.samples.saturating_sub(start.samples).max(1) as f64,
        get_ms: gets,
        post_first_ms: post_first,
        post_last_ms: post_last,
        post_incomplete: incomplete,
        // Writes, requests and the audit in steady state: over the last
        // window, not the loop's first caps and its settling.
        modbus: modbus_figures(
            &run.plan,
            counts_last.as_ref().unwrap_or(&counts0),
            &counts1,
        ),
        used_most,
        file_most,
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() as f64 - 1.0) * p).round() as usize]
}

fn print_reports(args: &Args, reports: &[Report]) {
    let w = args.window_min;
    println!(
        "\n== footprint scale: layout {}, {} min after all devices online, {} h of history, polled at 1 Hz, {} simulator, max_size_mb = {}",
        args.layout.name(),
        args.minutes,
        args.history_h,
        if args.calm { "calm" } else { "noisy" },
        args.cap_mb
    );
    println!(
        "| devices (inv/bat/met) | start-up to all online | RSS mean / last {w} min / peak (VmHWM) | CPU of one core | B/sample, GiB/day: first {w} min | last {w} min | samples/s | at rest B/sample | GET latest p99 (p50) | POST -> first write p99 (p50) | POST -> last of N inverters p99 (p50) | Modbus writes/device/h off the steered site, last {w} min: mean (most) | park inverter writes/h, last {w} min: mean (most) | steering audit B/h, last {w} min | Modbus requests/poll (reads) | /metrics scrape |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in reports {
        let (i, b, m) = r.counts;
        let mb = |kb: f64| kb / 1024.0;
        println!(
            "| {} ({i}/{b}/{m}) | {:.2} s | {:.1} / {:.1} / {:.1} MB | {:.2} % | {:.1} B, {:.2} GiB | {:.1} B, {:.2} GiB | {:.0} | {:.2} B | {:.2} ms ({:.2}) | {:.1} ms ({:.1}) | N={}: {:.1} ms ({:.1}){} | {:.1} ({:.0}) | {} | {:.0} kB | {:.2} ({:.2}) | {:.0} kB |",
            r.devices,
            r.startup_s,
            mb(r.rss_mean_kb),
            mb(r.rss_last_kb),
            mb(r.hwm_kb as f64),
            r.cpu_pct,
            r.first.0,
            r.first.1,
            r.last.0,
            r.last.1,
            r.last.2,
            r.rest_per_sample,
            percentile(&r.get_ms, 0.99),
            percentile(&r.get_ms, 0.5),
            percentile(&r.post_first_ms, 0.99),
            percentile(&r.post_first_ms, 0.5),
            r.steered,
            percentile(&r.post_last_ms, 0.99),
            percentile(&r.post_last_ms, 0.5),
            if r.post_incomplete > 0 {
                format!(", {} rounds incomplete", r.post_incomplete)
            } else {
                String::new()
            },
            r.modbus.writes_h.0,
            r.modbus.writes_h.1,
            r.modbus
                .park_h
                .map_or("-".to_string(), |(m, x, _)| format!(
                    "{m:.0} ({x:.0}){}",
                    if r.modbus.park_steered { ", steered" } else { "" }
                )),
            r.modbus.audit_b_h / 1000.0,
            r.modbus.requests_per_poll,
            r.modbus.reads_per_poll,
            r.modbus.scrape_bytes as f64 / 1000.0,
        );
    }
    for r in reports {
        println!(
            "n={}: {} history samples, {} GETs, {} POST rounds, pages in use at most {:.1} MiB and the file with its WAL {:.1} MiB (max_size_mb = {}), the most writes off the steered site: {}{}{}",
            r.devices,
            r.history_samples,
            r.get_ms.len(),
            r.post_first_ms.len() + r.post_incomplete,
            r.used_most as f64 / (1 << 20) as f64,
            r.file_most as f64 / (1 << 20) as f64,
            args.cap_mb,
            r.modbus.most_writes.as_deref().unwrap_or("none"),
            r.modbus
                .park_h
                .map_or(String::new(), |(_, _, regs)| format!(
                    ", park inverters: {regs:.0} registers written per inverter per hour"
                )),
            r.modbus
                .by_kind
                .iter()
                .map(|(kind, mean, most)| format!(
                    ", {kind} writes/h off the steered site and the park: mean {mean:.1} (most {most:.0})"
                ))
                .collect::<String>(),
        );
    }
}

pub fn main(args: &[String]) {
    let args = Arc::new(parse_args(args));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "footprint scale: sizes {:?}, layout {}, {} min, {} h of history, windows of {} min, {} simulator",
        args.sizes,
        args.layout.name(),
        args.minutes,
        args.history_h,
        args.window_min,
        if args.calm { "calm" } else { "noisy" }
    );
    let barrier = Arc::new(Barrier::new(args.sizes.len()));
    let threads: Vec<_> = args
        .sizes
        .iter()
        .map(|&n| {
            let (args, barrier, rt) = (Arc::clone(&args), Arc::clone(&barrier), rt.handle().clone());
            std::thread::spawn(move || {
                let mut run = Run::prepare(&rt, &args, n);
                let history = if args.history_h > 0 {
                    let p = run.prefill(args.history_h, args.calm);
                    println!(
                        "[n={n}] {} samples of history written in {:.0} s through staging and compaction: {} chunks ({:.1} per series); waiting for the other sizes",
                        p.samples, p.took_s, p.chunks, p.chunks_per_series
                    );
                    p.samples
                } else {
                    0
                };
                barrier.wait();
                let report = measure(&mut run, &args, history);
                rt.block_on(run.sim.shutdown());
                report
            })
        })
        .collect();
    // A size whose run failed is named; the others are still reported.
    let reports: Vec<Report> = threads
        .into_iter()
        .zip(&args.sizes)
        .filter_map(|(t, n)| match t.join() {
            Ok(report) => Some(report),
            Err(_) => {
                println!("[n={n}] the run failed (its panic is printed above); not in the table");
                None
            }
        })
        .collect();
    print_reports(&args, &reports);
}
