//! The CSIP-AUS client's two figures, on the demo site in noisy mode (every
//! point moves every second, the load walks on its own) against the tests'
//! 2030.5 server over TLS with CCM_8:
//!
//! 1. **Control start to limit held at the meter.** Batteries full, the sun
//!    at 95 %: the site exports 40 kW (the configured limit). A control of
//!    5 kW export, then one of 20 kW, alternately; from the control's start
//!    (server time) until the meter stays within the limit's band (±2 %, at
//!    least 500 W) for 3 s, each from the site at rest at 40 kW. Two ways,
//!    each three times at a 5 s poll: the control listed ahead of its start,
//!    and the control created at its start (the worst case: up to one poll
//!    before the client sees it). The simulated devices follow a setpoint
//!    at once: their own lag is the grid loop bench's subject.
//! 2. **The client's CPU and memory at a 5 s poll with 1,000 controls
//!    listed.** The agent as its own process (`sitegate run`) on the same
//!    site, 2 minutes after a 30 s warm-up, once without `[csip_aus]` and
//!    once with it, every rate 5 s, 1,000 controls in the list (one in force,
//!    999 ahead): the client's cost is the difference.
//!
//! `cargo bench --bench csip` (about 8 minutes, real time; `-- latency` or
//! `-- footprint` for one of the two).
#![allow(clippy::print_stdout, clippy::unwrap_used, dead_code)]

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "../tests/it/steering_support/mod.rs"]
mod steering_support;

use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

use common::csip_server::{BaseSpec, CsipServer};
use steering_support::*;

const RATE_S: u32 = 5;

fn grid_w(rig: &Rig) -> f64 {
    rig.device("grid").state().ac_power_w
}

/// Seconds from `from` until the export stays within the band of `limit`
/// for 3 s (the time that window began).
async fn held_after(rig: &Rig, limit: f64, from: Instant) -> f64 {
    let band = (0.02 * limit).max(500.0);
    let mut since: Option<Instant> = None;
    loop {
        let export = -grid_w(rig);
        if (export - limit).abs() <= band {
            let s = *since.get_or_insert_with(Instant::now);
            if s.elapsed() >= Duration::from_secs(3) {
                return s.saturating_duration_since(from).as_secs_f64();
            }
        } else {
            since = None;
        }
        assert!(
            from.elapsed() < Duration::from_secs(120),
            "never held {limit} W"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn latency() {
    let server = CsipServer::start(RATE_S).await;
    server.register(111_115);
    let rig = TestSite::demo(1000)
        .noisy(7)
        .full_batteries()
        .raw(&server.table(SITE, Some(111_115)))
        .start()
        .await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    tokio::time::sleep(Duration::from_secs(15)).await;
    let mut ahead = Vec::new();
    let mut at_start = Vec::new();
    for i in 0..6 {
        let limit = if i % 2 == 0 { 5_000.0 } else { 20_000.0 };
        let listed_ahead = i < 3;
        let lead = if listed_ahead {
            2 * i64::from(RATE_S) + 2
        } else {
            0
        };
        // From the site at rest at the configured 40 kW.
        held_after(&rig, 40_000.0, Instant::now()).await;
        let start_s = server.now_s() + lead;
        server.add_control_at(1, "BENCH", start_s, 90, BaseSpec::export(limit), 0);
        // The control's start as an instant (the server's clock is the
        // bench's own): a start "now" began up to a second ago.
        let wall = sitegate::model::time::now_ms();
        let from = if start_s * 1000 > wall {
            tokio::time::sleep(Duration::from_millis(
                u64::try_from(start_s * 1000 - wall).unwrap(),
            ))
            .await;
            Instant::now()
        } else {
            Instant::now() - Duration::from_millis(u64::try_from(wall - start_s * 1000).unwrap())
        };
        let s = held_after(&rig, limit, from).await;
        println!(
            "  {limit:>6} W, {}: held {s:.1} s after its start",
            if listed_ahead {
                "listed ahead"
            } else {
                "created at its start"
            }
        );
        if listed_ahead {
            ahead.push(s);
        } else {
            at_start.push(s);
        }
        server.cancel_active();
    }
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "control start to limit held at the meter, {RATE_S} s poll, noisy site: listed ahead at most {:.1} s; created at its start at most {:.1} s",
        max(&ahead),
        max(&at_start)
    );
}

/// utime + stime of `pid`, clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn rss_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The agent as a process on the simulated site; `csip`: its table.
/// Returns (CPU % of one core, RSS kB, peak RSS kB) over the window.
async fn agent_process(csip: Option<&CsipServer>) -> (f64, u64, u64) {
    // The demo site on a noisy simulator with full batteries, built anew for
    // each use: the config the simulator starts from, the simulator (with
    // its tweaks), and the file the agent reads.
    let site = || {
        let site = TestSite::demo(1000).noisy(7).full_batteries();
        match csip {
            Some(s) => site.raw(&s.table(SITE, Some(111_115))),
            None => site,
        }
    };
    let mut config = site().config();
    let sim = site().start_sim(&mut config).await;
    sim.set_load(Some(2_000.0));
    sim.set_sun(Some(0.95));
    let written = site().write_for(&sim);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .arg("run")
        .arg("--config")
        .arg(&written.file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    tokio::time::sleep(Duration::from_secs(120)).await;
    let cpu = (cpu_ticks(pid) - c0) as f64 / 100.0 / t0.elapsed().as_secs_f64() * 100.0;
    let (rss, hwm) = rss_kb(pid);
    let _ = child.kill();
    let _ = child.wait();
    drop(sim);
    (cpu, rss, hwm)
}

async fn footprint() {
    let (cpu0, rss0, hwm0) = agent_process(None).await;
    println!("  without [csip_aus]: {cpu0:.2} % of a core, RSS {rss0} kB (peak {hwm0} kB)");
    let server = CsipServer::start(RATE_S).await;
    server.register(111_115);
    server.with(|s| s.response_required = "00");
    for i in 0..999 {
        server.add_control(1, "AHEAD", 3_600 + 60 * i, 60, BaseSpec::export(30_000.0));
    }
    server.add_control(1, "NOW", 0, 3_600, BaseSpec::export(20_000.0));
    let (cpu1, rss1, hwm1) = agent_process(Some(&server)).await;
    println!("  with [csip_aus], 1,000 controls, {RATE_S} s poll: {cpu1:.2} % of a core, RSS {rss1} kB (peak {hwm1} kB)");
    let polls = server
        .times(axum::http::Method::GET, "/edev/1/derp/1/derc")
        .len();
    println!(
        "the CSIP-AUS client at a {RATE_S} s poll with 1,000 controls listed: {:.2} % of a core, {:.1} MB ({polls} control-list pages read)",
        cpu1 - cpu0,
        (rss1 as f64 - rss0 as f64) / 1024.0
    );
}

/// `-- latency` or `-- footprint` runs one of the two.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let wants = |what: &str| args.is_empty() || args.iter().any(|a| a == what);
    if wants("latency") {
        println!("csip: control start to limit held");
        latency().await;
    }
    if wants("footprint") {
        println!("csip: client footprint");
        footprint().await;
    }
}
