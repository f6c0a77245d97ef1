//! The grid loop on the simulated demo site, beside the open loop (the loop
//! turned off: the limits only clamp what the agent commands), in one run.
//!
//! `cargo bench --bench grid_loop`. Real time, a 1 s meter and device poll and a
//! 1 s control interval, the targets `docs/steering.md` ("The grid loop") states. The grid power
//! is sampled every 100 ms at the simulated meter (the physics, not the agent's
//! reading). Scenarios, each a step of 50 % of the rated production (25 kW):
//!
//! - `production step`: batteries full, load 2 kW, the sun from 45 % to 95 %:
//!   the export would be 45.5 kW against a 40 kW limit;
//! - `load step`: no sun, storage idle at fallback, load from 45 kW to 70 kW:
//!   the import would be 70 kW against a 60 kW limit;
//! - `release`: holding the export, the sun falls from 95 % to 45 %: how long
//!   until the inverters' limits are released.
//!
//! Per scenario: settle time (from the step until the meter stays within ±2 %
//! of the limit or 500 W, in s and control intervals), steady error (mean and
//! max distance from the limit over the last 10 s), overshoot (the largest
//! excursion past the tolerance band, on either side, from the second control
//! interval after the step on, in % of the limit) and the peak the step
//! reached before any correction.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/it/steering_support/mod.rs"]
mod steering_support;

use std::time::{Duration, Instant};

use steering_support::*;

const INTERVAL_MS: u64 = 1000;
const SAMPLE: Duration = Duration::from_millis(100);

/// One scenario's trace: (seconds since the step, grid W, + import).
struct Trace {
    points: Vec<(f64, f64)>,
    /// Seconds from the step until the inverters' limits were released, when asked.
    released_s: Option<f64>,
}

#[derive(Clone, Copy)]
enum Side {
    Export,
    Import,
}

struct Figures {
    settle_s: Option<f64>,
    mean_err_w: f64,
    max_err_w: f64,
    overshoot_pct: f64,
    peak_w: f64,
}

fn figures(t: &Trace, side: Side, limit: f64) -> Figures {
    let tol = (0.02 * limit).max(500.0);
    // The site-side value whose limit is held: export or import, W.
    let v = |g: f64| match side {
        Side::Export => -g,
        Side::Import => g,
    };
    let inside = |g: f64| (v(g) - limit).abs() <= tol;
    let last_out = t.points.iter().rposition(|(_, g)| !inside(*g));
    let settle_s = match last_out {
        None => Some(0.0),
        Some(i) if i + 1 < t.points.len() => Some(t.points[i + 1].0),
        Some(_) => None,
    };
    let end = t.points.last().map_or(0.0, |p| p.0);
    let tail: Vec<f64> = t
        .points
        .iter()
        .filter(|(s, _)| *s >= end - 10.0)
        .map(|(_, g)| (v(*g) - limit).abs())
        .collect();
    let mean_err_w = tail.iter().sum::<f64>() / tail.len().max(1) as f64;
    let max_err_w = tail.iter().copied().fold(0.0, f64::max);
    let after = INTERVAL_MS as f64 / 1000.0 * 2.0;
    let overshoot_w = t
        .points
        .iter()
        .filter(|(s, _)| *s >= after)
        .map(|(_, g)| ((v(*g) - limit).abs() - tol).max(0.0))
        .fold(0.0, f64::max);
    let peak_w = t.points.iter().map(|(_, g)| v(*g)).fold(f64::MIN, f64::max);
    Figures {
        settle_s,
        mean_err_w,
        max_err_w,
        overshoot_pct: 100.0 * overshoot_w / limit.max(1.0),
        peak_w,
    }
}

async fn trace(rig: &Rig, seconds: f64, watch_release: bool) -> Trace {
    let t0 = Instant::now();
    let mut points = Vec::new();
    let mut released_s = None;
    while t0.elapsed().as_secs_f64() < seconds {
        points.push((
            t0.elapsed().as_secs_f64(),
            rig.device("grid").state().ac_power_w,
        ));
        if watch_release
            && released_s.is_none()
            && rig.limit("pv-east").is_none()
            && rig.limit("pv-west").is_none()
        {
            released_s = Some(t0.elapsed().as_secs_f64());
        }
        tokio::time::sleep(SAMPLE).await;
    }
    Trace { points, released_s }
}

/// Waits for the site to sit still for `s` seconds before a step.
async fn calm(s: u64) {
    tokio::time::sleep(Duration::from_secs(s)).await;
}

async fn production_step(closed: bool) -> Trace {
    let rig = Rig::start_full(&config(closed, "auto")).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.45));
    calm(6).await;
    rig.sim.set_sun(Some(0.95));
    let t = trace(&rig, 25.0, false).await;
    rig.shutdown().await;
    t
}

async fn load_step(closed: bool) -> Trace {
    let rig = Rig::start(&config(closed, "idle")).await;
    rig.sim.set_sun(Some(0.0));
    rig.sim.set_load(Some(45_000.0));
    calm(6).await;
    rig.sim.set_load(Some(70_000.0));
    let t = trace(&rig, 25.0, false).await;
    rig.shutdown().await;
    t
}

async fn release(closed: bool) -> Trace {
    let rig = Rig::start_full(&config(closed, "auto")).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    calm(10).await;
    let limited = rig.limit("pv-east").is_some() || rig.limit("pv-west").is_some();
    rig.sim.set_sun(Some(0.45));
    let t = trace(&rig, 8.0, limited).await;
    rig.shutdown().await;
    t
}

fn config(closed: bool, fallback: &str) -> String {
    let loop_keys = if closed {
        String::new()
    } else {
        "grid_loop = { enabled = false }".to_string()
    };
    demo_site(INTERVAL_MS, &loop_keys).replace(
        "ess_fallback = \"auto\"",
        &format!("ess_fallback = \"{fallback}\""),
    )
}

fn row(scenario: &str, mode: &str, f: &Figures, limit: f64) {
    let interval = INTERVAL_MS as f64 / 1000.0;
    let settle = f.settle_s.map_or("never".to_string(), |s| {
        format!("{s:.1} s ({:.1} intervals)", s / interval)
    });
    println!(
        "| {scenario} | {mode} | {:.0} W | {settle} | {:.0} W ({:.1} %) | {:.0} W | {:.1} % |",
        f.peak_w,
        f.mean_err_w,
        100.0 * f.mean_err_w / limit,
        f.max_err_w,
        f.overshoot_pct,
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!("grid loop on the simulated demo site: 1 s meter poll, 1 s control interval, steps of 25 kW (50 % of rated production)");
        println!("| scenario | loop | peak | settles within ±2 % (or 500 W) | steady error, mean | steady error, max | overshoot |");
        println!("|---|---|---|---|---|---|---|");
        for closed in [false, true] {
            let mode = if closed { "closed (grid loop)" } else { "open (limits clamp commands only)" };
            let t = production_step(closed).await;
            row("production step, export limit 40 kW", mode, &figures(&t, Side::Export, 40_000.0), 40_000.0);
            let t = load_step(closed).await;
            row("load step, import limit 60 kW", mode, &figures(&t, Side::Import, 60_000.0), 60_000.0);
        }
        for closed in [false, true] {
            let t = release(closed).await;
            let mode = if closed { "closed" } else { "open" };
            match t.released_s {
                Some(s) => println!(
                    "release ({mode}): the inverters' limits were released {s:.1} s ({:.1} intervals) after the sun fell",
                    s * 1000.0 / INTERVAL_MS as f64
                ),
                None => println!("release ({mode}): nothing to release (no limit was set)"),
            }
        }
    });
}
