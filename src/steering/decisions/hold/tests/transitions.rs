//! The transitions the grid loop causes itself, on a site whose devices
//! follow in seconds and whose meter reports late (`plant.rs`): none may pass
//! the limit that follows beyond its band (`docs/steering.md`, "Transitions").

use super::plant::{export_over, site, Plant};
use crate::model::PowerValue;
use crate::steering::signal::Active;
use crate::steering::timeline::Entry;
use crate::steering::value::GridLimit;

const LAGS: [f64; 3] = [0.1, 3.0, 8.0];

fn grid_limit(max_export_w: f64) -> Active {
    Active {
        grid_limit: Some(Entry {
            from: 0,
            until: i64::MAX,
            value: GridLimit {
                max_import: None,
                max_export: Some(PowerValue::watts(max_export_w)),
            },
            request_id: "req_t".into(),
        }),
        ..Active::default()
    }
}

fn none(_: i64) -> Active {
    Active::default()
}

/// Nothing beyond the band, in Wh (a rounding crumb allowed).
fn assert_held(what: &str, lag: f64, (peak, secs, wh): (f64, f64, f64)) {
    assert!(
        wh < 0.01,
        "{what}, lag {lag} s: {wh:.2} Wh beyond the band, peak {peak:.0} W over the limit, {secs:.1} s over"
    );
}

#[test]
fn the_end_of_a_tighter_limit_goes_to_what_the_next_one_needs() {
    for lag in LAGS {
        let mut p = site(lag, 50.0);
        let until = 60_000;
        let a = |t: i64| {
            if t < until {
                grid_limit(10_000.0)
            } else {
                none(t)
            }
        };
        p.run(40_000, &a);
        let trace = p.run(60_000, &a);
        let limit = |t: i64| if t < until { 10_000.0 } else { 40_000.0 };
        assert_held("gridLimit 10 kW expires", lag, export_over(&trace, &limit));
    }
}

#[test]
fn the_return_of_a_lost_meter_goes_to_what_the_limit_needs() {
    for lag in LAGS {
        let mut p = site(lag, 95.0);
        p.run(30_000, &none);
        p.meter_online = false;
        p.run(30_000, &none);
        p.meter_online = true;
        let trace = p.run(40_000, &none);
        assert_held("meter back", lag, export_over(&trace, &|_| 40_000.0));
    }
}

/// Clouds: the sun between 30 % and 100 %, each spell 5 to 10 s.
fn clouds(p: &mut Plant, seconds: i64) -> Vec<(i64, f64)> {
    let spells = [7, 5, 9, 6, 10, 5, 8, 7, 6, 9, 5, 10, 7, 8, 6, 9];
    let mut trace = Vec::new();
    let mut t = 0;
    for (k, s) in spells.iter().cycle().enumerate() {
        if t >= seconds {
            break;
        }
        p.sun = if k % 2 == 0 { 0.3 } else { 1.0 };
        trace.extend(p.run(s * 1000, &none));
        t += s;
    }
    trace
}

#[test]
fn clouds_meet_a_cap_already_in_place() {
    for (lag, soc) in LAGS.iter().flat_map(|l| [(*l, 95.0), (*l, 50.0)]) {
        let mut p = site(lag, soc);
        p.run(40_000, &none);
        let trace = clouds(&mut p, 120);
        assert_held(
            &format!("clouds, SoC {soc} %"),
            lag,
            export_over(&trace, &|_| 40_000.0),
        );
    }
}

#[test]
fn a_tight_limit_is_held_without_a_cycle() {
    for lag in LAGS {
        for soc in [50.0, 95.0] {
            for limit in [0.0, 10_000.0] {
                let mut p = site(lag, soc);
                p.run(40_000, &|_| grid_limit(limit));
                let trace = p.run(60_000, &|_| grid_limit(limit));
                let what = format!("a {limit} W limit held, SoC {soc} %");
                assert_held(&what, lag, export_over(&trace, &|_| limit));
            }
        }
    }
}

/// A load step the agent cannot foresee passes the import limit only for
/// the time the storage needs to follow, and a correction leads by what the
/// storage has still to go.
#[test]
fn a_load_step_is_corrected_as_soon_as_the_meter_shows_it() {
    for (lag, most_s) in [(0.1, 2.0), (3.0, 5.5), (8.0, 10.0)] {
        let mut p = site(lag, 50.0);
        p.sun = 0.0;
        p.load_w = 45_000.0;
        p.rules.ess_fallback = crate::config::EssFallback::Idle;
        p.run(30_000, &none);
        p.load_w = 70_000.0;
        let trace = p.run(30_000, &none);
        let over_s = trace.iter().filter(|(_, g)| *g > 60_000.0).count() as f64 * 0.1;
        assert!(
            over_s <= most_s,
            "lag {lag} s: over the import limit for {over_s:.1} s"
        );
        let last = trace.last().map_or(0.0, |(_, g)| *g);
        assert!((58_500.0..=60_000.0).contains(&last), "lag {lag} s: {last}");
    }
}

/// A sun step meets the cap already in place: nothing passes.
#[test]
fn a_sun_step_meets_the_cap() {
    for lag in LAGS {
        let mut p = site(lag, 95.0);
        p.sun = 0.45;
        p.load_w = 2_000.0;
        p.run(30_000, &none);
        p.sun = 0.95;
        let trace = p.run(30_000, &none);
        assert_held("sun 45 % -> 95 %", lag, export_over(&trace, &|_| 40_000.0));
        let (peak, _, _) = export_over(&trace, &|_| 40_000.0);
        assert!(peak <= 0.0, "lag {lag} s: {peak:.0} W over the limit");
    }
}

/// Under zero export a load step up lets the cap rise; a released battery that
/// covers the new load meanwhile gives way only with its lag, and the cap
/// rises no faster than it does.
#[test]
fn a_cap_rising_under_zero_export_waits_for_the_storage_to_give_way() {
    for lag in LAGS {
        for soc in [50.0, 95.0] {
            let mut p = site(lag, soc);
            p.load_w = 10_000.0;
            p.run(40_000, &|_| grid_limit(0.0));
            p.load_w = 25_000.0;
            let trace = p.run(40_000, &|_| grid_limit(0.0));
            let what = format!("zero export, load 10 -> 25 kW, SoC {soc} %");
            assert_held(&what, lag, export_over(&trace, &|_| 0.0));
        }
    }
}
