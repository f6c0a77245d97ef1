//! One control tick of a commercial site: the decision (grid loop,
//! allocation over every battery and inverter, notes) for 200 inverters and
//! 20 batteries, against the same tick for the demo's 2 and 2, in one run.
//! Target: <= 5 ms p99 per tick at 200 + 20.
//!
//! `cargo bench --bench control_tick` (`-- TICKS`, default 20,000 per site).
//! Each tick sees a new grid reading (a load that wanders over the limits),
//! carries the loop's state to the next, and runs under an ESS signal and a
//! curtailment.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark reports on stdout and may panic"
)]

use std::collections::BTreeSet;
use std::hint::black_box;
use tokio::time::Instant;

use sitegate::config::{CurtailmentFulfilment, EssFallback, EssFulfilment, ExportOrder};
use sitegate::model::PowerValue;
use sitegate::steering::alloc::{BatteryView, InverterView};
use sitegate::steering::decide::{decide, Measurements, Site, SiteRules};
use sitegate::steering::hold::{LoopSettings, LoopState, Meter};
use sitegate::steering::{Active, CurtailmentValue, Entry, EssSetting};

fn site(inverters: usize, batteries: usize) -> (SiteRules, Vec<BatteryView>, Vec<InverterView>) {
    let rated_inv = 50_000.0;
    let rules = SiteRules {
        ess: EssFulfilment::Proportional,
        curtailment: CurtailmentFulfilment::Proportional,
        ess_fallback: EssFallback::Auto,
        max_import_w: Some(2_000_000.0),
        max_export_w: Some(1_000_000.0),
        rated_production_w: rated_inv * inverters as f64,
        grid_loop: Some(LoopSettings {
            export_order: ExportOrder::StorageFirst,
            curtailment: CurtailmentFulfilment::Proportional,
            storage_ramp_w_per_s: 100_000.0,
            production_ramp_w_per_s: 200_000.0,
            settle_ms: 3000,
        }),
    };
    let bats = (0..batteries)
        .map(|i| BatteryView {
            rated_w: 100_000.0,
            max_charge_w: 100_000.0,
            max_discharge_w: 100_000.0,
            soc: Some(20.0 + (i % 60) as f64),
            soc_min: 10.0,
            soc_max: 90.0,
            capacity_wh: Some(200_000.0),
            priority: (i % 3) as u32,
        })
        .collect();
    let invs = (0..inverters)
        .map(|i| InverterView {
            rated_w: rated_inv,
            measured_w: Some(30_000.0 + (i % 17) as f64 * 500.0),
            priority: (i % 4) as u32,
            limit_w: None,
        })
        .collect();
    (rules, bats, invs)
}

fn active() -> Active {
    let entry = |request_id: &str| (0, i64::MAX, request_id.to_string());
    let (from, until, id) = entry("req_ess");
    let (cf, cu, cid) = entry("req_curt");
    Active {
        ess: Some(Entry {
            from,
            until,
            value: EssSetting::Power(PowerValue::watts(-500_000.0)),
            request_id: id,
        }),
        curtailment: Some(Entry {
            from: cf,
            until: cu,
            value: CurtailmentValue::Power(PowerValue::watts(6_000_000.0)),
            request_id: cid,
        }),
        maximize_grid_import: None,
        grid_limit: None,
    }
}

/// p50, p99 and max of `ticks` ticks, µs.
fn run(inverters: usize, batteries: usize, ticks: usize) -> (f64, f64, f64) {
    let (rules, bats, invs) = site(inverters, batteries);
    let active = active();
    let reached = BTreeSet::new();
    let mut state = LoopState::default();
    let mut took = Vec::with_capacity(ticks);
    for t in 0..ticks {
        let now = 1_800_000_000_000 + t as i64 * 250;
        // A load that wanders over the export and import limits.
        let grid = 1_500_000.0 * ((t as f64) / 400.0).sin();
        let m = Measurements {
            meter: Some(Meter::Fresh {
                grid_w: grid,
                ts_ms: now,
                report_lag_ms: 0,
            }),
            battery_w: Some(0.0),
            production_w: Some(invs.iter().filter_map(|i| i.measured_w).sum()),
            online_battery_w: 0.0,
            readings_from_ms: now,
            readings: vec![Some((now, 0.0)); batteries + inverters],
            ..Measurements::default()
        };
        let s = Site {
            rules: &rules,
            batteries: &bats,
            inverters: &invs,
            measurements: &m,
        };
        let t0 = Instant::now();
        let d = black_box(decide(&s, &active, &reached, &state, now));
        took.push(t0.elapsed().as_secs_f64() * 1e6);
        state = d.loop_state;
    }
    took.sort_by(f64::total_cmp);
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99), took[took.len() - 1])
}

fn main() {
    let ticks = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(20_000);
    println!("\n== control tick: decide() with the grid loop, an ESS signal and a curtailment, {ticks} ticks");
    println!(
        "{:>22} | {:>9} | {:>9} | {:>9}",
        "site", "p50 µs", "p99 µs", "max µs"
    );
    for (inv, bat) in [(2, 2), (50, 5), (200, 20)] {
        let (p50, p99, max) = run(inv, bat, ticks);
        println!(
            "{:>22} | {:>9.1} | {:>9.1} | {:>9.1}",
            format!("{inv} inverters, {bat} batteries"),
            p50,
            p99,
            max
        );
    }
}
