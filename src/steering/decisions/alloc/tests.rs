use proptest::prelude::*;

use super::*;
use crate::config::{CurtailmentFulfilment, EssFulfilment};

fn bat(rated: f64, soc: f64) -> BatteryView {
    BatteryView {
        rated_w: rated,
        max_charge_w: rated,
        max_discharge_w: rated,
        soc: Some(soc),
        soc_min: 10.0,
        soc_max: 90.0,
        capacity_wh: Some(rated * 2.0),
        priority: 0,
    }
}

fn inv(rated: f64, measured: Option<f64>) -> InverterView {
    InverterView {
        rated_w: rated,
        measured_w: measured,
        priority: 0,
        limit_w: None,
    }
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-6, "{a:?} != {b:?}");
    }
}

#[test]
fn proportional_spreads_by_rating_and_respreads_when_one_saturates() {
    let b = [bat(200_000.0, 50.0), bat(200_000.0, 50.0)];
    let a = allocate_ess(EssFulfilment::Proportional, &b, 300_000.0);
    close(&a.setpoints, &[150_000.0, 150_000.0]);
    let b = [bat(20_000.0, 50.0), bat(10_000.0, 50.0)];
    close(
        &allocate_ess(EssFulfilment::Proportional, &b, 15_000.0).setpoints,
        &[10_000.0, 5_000.0],
    );
    let mut small = bat(10_000.0, 50.0);
    small.max_discharge_w = 2_000.0;
    let b = [bat(10_000.0, 50.0), small];
    close(
        &allocate_ess(EssFulfilment::Proportional, &b, 10_000.0).setpoints,
        &[8_000.0, 2_000.0],
    );
    let a = allocate_ess(EssFulfilment::Proportional, &b, -50_000.0);
    close(&a.setpoints, &[-10_000.0, -10_000.0]);
    assert_eq!(a.target_w, -20_000.0);
}

#[test]
fn soc_bounds_and_priority_and_balance() {
    let b = [bat(10_000.0, 10.0), bat(10_000.0, 90.0)];
    close(
        &allocate_ess(EssFulfilment::Proportional, &b, 5_000.0).setpoints,
        &[0.0, 5_000.0],
    );
    close(
        &allocate_ess(EssFulfilment::Proportional, &b, -5_000.0).setpoints,
        &[-5_000.0, 0.0],
    );
    let mut first = bat(10_000.0, 50.0);
    first.priority = 2;
    let b = [first, bat(10_000.0, 50.0)];
    close(
        &allocate_ess(EssFulfilment::Priority, &b, 12_000.0).setpoints,
        &[2_000.0, 10_000.0],
    );
    // Energy above min SoC: 40 % vs 20 % of the same capacity: 2:1.
    let b = [bat(10_000.0, 50.0), bat(10_000.0, 30.0)];
    close(
        &allocate_ess(EssFulfilment::SocBalance, &b, 3_000.0).setpoints,
        &[2_000.0, 1_000.0],
    );
    // Room below max SoC: 40 % vs 60 %: 2:3.
    close(
        &allocate_ess(EssFulfilment::SocBalance, &b, -5_000.0).setpoints,
        &[-2_000.0, -3_000.0],
    );
    assert_eq!(site_soc(&b), Some(40.0));
}

#[test]
fn production_rules() {
    let i = [inv(200_000.0, None), inv(200_000.0, None)];
    close(
        &allocate_production(CurtailmentFulfilment::Proportional, &i, 300_000.0),
        &[150_000.0, 150_000.0],
    );
    close(
        &allocate_production(CurtailmentFulfilment::Priority, &i, 300_000.0),
        &[200_000.0, 100_000.0],
    );
    close(
        &allocate_production(CurtailmentFulfilment::Proportional, &i, 900_000.0),
        &[200_000.0, 200_000.0],
    );
    // The first produces 20 kW of its 150 kW share: the second gets the rest.
    let i = [
        inv(200_000.0, Some(20_000.0)),
        inv(200_000.0, Some(150_000.0)),
    ];
    // Demand 30 kW and 160 kW; the 110 kW left go by rating, the second capped at 200 kW.
    close(
        &allocate_production(CurtailmentFulfilment::Dynamic, &i, 300_000.0),
        &[100_000.0, 200_000.0],
    );
}

#[test]
fn the_loops_cap_gives_production_before_room() {
    let d = CurtailmentFulfilment::Dynamic;
    // East shaded at nothing, west at 16.1 kW of 20 kW: `dynamic` gives east
    // its 1.5 kW of room out of west's production; the loop's spread does not.
    let i = [inv(30_000.0, Some(0.0)), inv(20_000.0, Some(16_100.0))];
    close(&allocate_production(d, &i, 16_100.0), &[1_500.0, 14_600.0]);
    close(&allocate_cap(d, &i, 16_100.0), &[0.0, 16_100.0]);
    // Above the production the room goes by rating (within each one's 5 %),
    // then the rest by rating.
    close(&allocate_cap(d, &i, 17_100.0), &[600.0, 16_500.0]);
    close(&allocate_cap(d, &i, 18_600.0), &[1_500.0, 17_100.0]);
    close(&allocate_cap(d, &i, 27_100.0), &[7_100.0, 20_000.0]);
    // Below the production: shares by rating, none above what it produces.
    let i = [inv(30_000.0, Some(20_000.0)), inv(20_000.0, Some(5_000.0))];
    close(&allocate_cap(d, &i, 10_000.0), &[6_000.0, 4_000.0]);
    close(&allocate_cap(d, &i, 20_000.0), &[15_000.0, 5_000.0]);
    // Priority stays priority; a missing measurement falls back to proportional.
    let i = [inv(200_000.0, None), inv(200_000.0, Some(1_000.0))];
    close(
        &allocate_cap(CurtailmentFulfilment::Priority, &i, 300_000.0),
        &[200_000.0, 100_000.0],
    );
    close(&allocate_cap(d, &i, 300_000.0), &[150_000.0, 150_000.0]);
}

fn batteries() -> impl Strategy<Value = Vec<BatteryView>> {
    prop::collection::vec(
        (
            0.0..300_000.0f64,
            0.0..300_000.0f64,
            0.0..300_000.0f64,
            prop::option::of(0.0..100.0f64),
            0.0..50.0f64,
            50.0..100.0f64,
            prop::option::of(1.0..500_000.0f64),
            0u32..3,
        ),
        1..6,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(rated, ch, dis, soc, lo, hi, cap, priority)| BatteryView {
                rated_w: rated,
                max_charge_w: ch,
                max_discharge_w: dis,
                soc,
                soc_min: lo,
                soc_max: hi,
                capacity_wh: cap,
                priority,
            })
            .collect()
    })
}

fn rules() -> impl Strategy<Value = EssFulfilment> {
    prop_oneof![
        Just(EssFulfilment::Proportional),
        Just(EssFulfilment::Priority),
        Just(EssFulfilment::SocBalance)
    ]
}

fn inverters() -> impl Strategy<Value = Vec<InverterView>> {
    prop::collection::vec(
        (
            0.0..300_000.0f64,
            prop::option::of(0.0..320_000.0f64),
            0u32..3,
        ),
        1..6,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(rated_w, measured_w, priority)| InverterView {
                rated_w,
                measured_w,
                priority,
                limit_w: None,
            })
            .collect()
    })
}

fn curtail_rules() -> impl Strategy<Value = CurtailmentFulfilment> {
    prop_oneof![
        Just(CurtailmentFulfilment::Proportional),
        Just(CurtailmentFulfilment::Priority),
        Just(CurtailmentFulfilment::Dynamic)
    ]
}

const EPS: f64 = 1e-6;

proptest! {
    #[test]
    fn ess_invariants(b in batteries(), rule in rules(), target in -2_000_000.0..2_000_000.0f64, more in 0.0..500_000.0f64) {
        let a = allocate_ess(rule, &b, target);
        let dis: f64 = b.iter().map(BatteryView::discharge_cap).sum();
        let ch: f64 = b.iter().map(BatteryView::charge_cap).sum();
        let clamped = target.clamp(-ch, dis);
        let sum: f64 = a.setpoints.iter().sum();
        prop_assert!((sum - clamped).abs() <= EPS * (1.0 + clamped.abs()), "sum {sum} vs {clamped}");
        prop_assert!((a.target_w - clamped).abs() <= EPS * (1.0 + clamped.abs()));
        for (x, bv) in a.setpoints.iter().zip(&b) {
            prop_assert!(*x <= bv.max_discharge_w + EPS && -*x <= bv.max_charge_w + EPS);
            if let Some(soc) = bv.soc {
                if soc >= bv.soc_max { prop_assert!(*x >= 0.0, "charging at max SoC"); }
                if soc <= bv.soc_min { prop_assert!(*x <= 0.0, "discharging at min SoC"); }
            }
        }
        // Monotonic: a larger target never lowers a device's setpoint.
        let bigger = allocate_ess(rule, &b, target + more);
        for (x, y) in a.setpoints.iter().zip(&bigger.setpoints) {
            prop_assert!(*y >= *x - EPS * (1.0 + x.abs()), "{x} -> {y}");
        }
    }

    #[test]
    fn production_invariants(i in inverters(), rule in curtail_rules(), limit in -10_000.0..2_000_000.0f64, more in 0.0..500_000.0f64) {
        let l = allocate_production(rule, &i, limit);
        let rated: f64 = i.iter().map(|x| x.rated_w).sum();
        let clamped = limit.max(0.0).min(rated);
        let sum: f64 = l.iter().sum();
        prop_assert!((sum - clamped).abs() <= EPS * (1.0 + clamped), "sum {sum} vs {clamped}");
        for (x, iv) in l.iter().zip(&i) {
            prop_assert!(*x >= -EPS && *x <= iv.rated_w + EPS);
        }
        let bigger = allocate_production(rule, &i, limit + more);
        for (x, y) in l.iter().zip(&bigger) {
            prop_assert!(*y >= *x - EPS * (1.0 + x.abs()), "{x} -> {y}");
        }
    }

    /// The grid loop's spread of its own cap: the same invariants, and once
    /// the cap covers what the inverters produce, none gets less than that.
    #[test]
    fn cap_invariants(i in inverters(), rule in curtail_rules(), cap in -10_000.0..2_000_000.0f64, more in 0.0..500_000.0f64) {
        let l = allocate_cap(rule, &i, cap);
        let rated: f64 = i.iter().map(|x| x.rated_w).sum();
        let clamped = cap.max(0.0).min(rated);
        let sum: f64 = l.iter().sum();
        prop_assert!((sum - clamped).abs() <= EPS * (1.0 + clamped), "sum {sum} vs {clamped}");
        for (x, iv) in l.iter().zip(&i) {
            prop_assert!(*x >= -EPS && *x <= iv.rated_w + EPS);
        }
        let bigger = allocate_cap(rule, &i, cap + more);
        for (x, y) in l.iter().zip(&bigger) {
            prop_assert!(*y >= *x - EPS * (1.0 + x.abs()), "{x} -> {y}");
        }
        let produced: Option<Vec<f64>> = i.iter().map(|x| x.measured_w.map(|m| m.min(x.rated_w))).collect();
        if let (Some(p), true) = (produced, rule != CurtailmentFulfilment::Priority) {
            if cap >= p.iter().sum::<f64>() {
                for (x, m) in l.iter().zip(&p) {
                    prop_assert!(*x >= m - EPS * (1.0 + m), "{x} below its production {m}");
                }
            }
        }
    }
}

/// A commercial site: 150 to 250 inverters of 3 to 110 kW.
fn many_inverters() -> impl Strategy<Value = Vec<InverterView>> {
    prop::collection::vec((3_000.0..110_000.0f64, 0u32..5), 150..250).prop_map(|v| {
        v.into_iter()
            .map(|(rated_w, priority)| InverterView {
                rated_w,
                measured_w: Some(rated_w * 0.8),
                priority,
                limit_w: None,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The spread stays right with many inverters: `proportional` gives every
    /// inverter the same share of its rating; `priority` curtails in order,
    /// leaving at most one inverter partly curtailed and none of a lower
    /// number curtailed while one of a higher number produces.
    #[test]
    fn the_curtailment_spread_holds_over_many_inverters(i in many_inverters(), share in 0.0..1.2f64) {
        let rated: f64 = i.iter().map(|x| x.rated_w).sum();
        let limit = rated * share;
        let clamped = limit.min(rated);
        let tol = 1e-9 * rated;

        let p = allocate_production(CurtailmentFulfilment::Proportional, &i, limit);
        prop_assert!((p.iter().sum::<f64>() - clamped).abs() <= tol);
        let ratio = clamped / rated;
        for (x, iv) in p.iter().zip(&i) {
            prop_assert!((x / iv.rated_w - ratio).abs() <= 1e-9, "{x} of {} vs {ratio}", iv.rated_w);
        }

        let q = allocate_production(CurtailmentFulfilment::Priority, &i, limit);
        prop_assert!((q.iter().sum::<f64>() - clamped).abs() <= tol);
        let partly = q
            .iter()
            .zip(&i)
            .filter(|(x, iv)| **x > 1e-6 && **x < iv.rated_w - 1e-6)
            .count();
        prop_assert!(partly <= 1, "{partly} inverters partly curtailed");
        for (a, ia) in q.iter().zip(&i) {
            for (b, ib) in q.iter().zip(&i) {
                // One of a lower priority number is curtailed last: it is full
                // whenever one of a higher number still produces.
                if ia.priority < ib.priority && *b > 1e-6 {
                    prop_assert!(*a >= ia.rated_w - 1e-6, "priority {} at {a} while {} gets {b}", ia.priority, ib.priority);
                }
            }
        }

        let d = allocate_production(CurtailmentFulfilment::Dynamic, &i, limit);
        prop_assert!((d.iter().sum::<f64>() - clamped).abs() <= tol);
        for (x, iv) in d.iter().zip(&i) {
            prop_assert!(*x >= -1e-6 && *x <= iv.rated_w + 1e-6);
        }
    }
}
