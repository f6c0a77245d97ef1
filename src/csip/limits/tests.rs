use super::*;
use crate::csip::schedule::InForceValue;

fn event(mrid: &str, until_ms: i64, ramp_s: Option<f64>) -> Origin {
    Origin::Event {
        mrid: mrid.into(),
        program: "/p".into(),
        primacy: 0,
        until_ms,
        ramp_s,
    }
}

fn default_origin() -> Origin {
    Origin::Default {
        mrid: "DEF".into(),
        program: "/p".into(),
        primacy: 0,
    }
}

fn in_force(modes: &[(Mode, f64, Origin)], grad: Option<u16>) -> InForce {
    InForce {
        modes: modes
            .iter()
            .map(|(m, v, o)| {
                (
                    *m,
                    InForceValue {
                        value: *v,
                        origin: o.clone(),
                    },
                )
            })
            .collect(),
        set_grad_w: grad,
    }
}

fn step(now_s: i64) -> Step {
    Step {
        now_ms: now_s * 1000,
        dt_s: 1.0,
        offset_ms: 0,
        set_max_w: 10_000.0,
        failsafe: false,
    }
}

#[test]
fn a_tighter_limit_holds_at_once_and_a_looser_one_rises_at_set_grad_w() {
    let mut r = Ramps::default();
    let high = in_force(&[(Mode::Export, 8_000.0, default_origin())], Some(100));
    assert_eq!(
        to_limits(&high, &mut r, &step(0)).value(Kind::Export),
        Some(8_000.0)
    );
    let low = in_force(
        &[(Mode::Export, 2_000.0, event("E", 60_000, None))],
        Some(100),
    );
    let set = to_limits(&low, &mut r, &step(1));
    assert_eq!(set.value(Kind::Export), Some(2_000.0));
    let l = set.tightest(Kind::Export).unwrap();
    assert_eq!(
        (l.reference.as_deref(), l.until_ms),
        (Some("E"), Some(60_000))
    );
    // Back to the default: 1 %/s of 10 kW is 100 W/s.
    let mut values = Vec::new();
    for t in 2..=5 {
        values.push(
            to_limits(&high, &mut r, &step(t))
                .value(Kind::Export)
                .unwrap(),
        );
    }
    assert_eq!(values, vec![2_100.0, 2_200.0, 2_300.0, 2_400.0]);
}

#[test]
fn ramp_tms_sets_the_time_of_the_rise() {
    let mut r = Ramps::default();
    to_limits(
        &in_force(&[(Mode::Generation, 0.0, default_origin())], Some(27)),
        &mut r,
        &step(0),
    );
    let up = in_force(
        &[(Mode::Generation, 6_000.0, event("R", 1, Some(60.0)))],
        Some(27),
    );
    let first = to_limits(&up, &mut r, &step(1))
        .value(Kind::Generation)
        .unwrap();
    assert!((first - 100.0).abs() < 1e-9, "{first}");
    let mut last = 0.0;
    for t in 2..=60 {
        last = to_limits(&up, &mut r, &step(t))
            .value(Kind::Generation)
            .unwrap();
    }
    assert!((last - 6_000.0).abs() < 1e-6, "{last}");
}

#[test]
fn without_a_ramp_a_rise_is_at_once_and_an_end_lets_go() {
    let mut r = Ramps::default();
    to_limits(
        &in_force(&[(Mode::Export, 0.0, event("A", 1, None))], None),
        &mut r,
        &step(0),
    );
    let set = to_limits(&InForce::default(), &mut r, &step(1));
    assert_eq!(set.value(Kind::Export), None);
}

#[test]
fn an_ended_limit_rises_by_the_der_rating_before_it_is_let_go() {
    let mut r = Ramps::default();
    to_limits(
        &in_force(&[(Mode::Export, 1_000.0, event("A", 1, None))], Some(1_000)),
        &mut r,
        &step(0),
    );
    // 10 %/s of 10 kW: 1 kW/s; let go once 10 kW above where it was.
    let mut seen = Vec::new();
    let ended = in_force(&[], Some(1_000));
    for t in 1..=11 {
        seen.push(to_limits(&ended, &mut r, &step(t)).value(Kind::Export));
    }
    assert_eq!(seen[0], Some(2_000.0));
    assert_eq!(seen[8], Some(10_000.0));
    assert_eq!(seen[9], None);
}

#[test]
fn after_the_der_was_off_its_production_comes_back_along_the_ramp() {
    let mut r = Ramps::default();
    let off = in_force(&[(Mode::Connect, 0.0, event("OFF", 1, None))], Some(100));
    let set = to_limits(&off, &mut r, &step(0));
    assert!(set.der_off().is_some());
    let on = in_force(&[(Mode::Connect, 1.0, event("ON", 1, None))], Some(100));
    let set = to_limits(&on, &mut r, &step(1));
    assert!(set.der_off().is_none());
    assert_eq!(set.value(Kind::Generation), Some(100.0));
}

#[test]
fn max_lim_w_is_a_share_of_set_max_w_and_negative_limits_hold_as_zero() {
    let mut r = Ramps::default();
    let f = in_force(
        &[
            (Mode::MaxLimPct, 40.0, default_origin()),
            (Mode::Import, -500.0, default_origin()),
        ],
        None,
    );
    let set = to_limits(&f, &mut r, &step(0));
    assert_eq!(set.value(Kind::Generation), Some(4_000.0));
    assert_eq!(set.value(Kind::Import), Some(0.0));
    // The same limit a second later keeps its start.
    let again = to_limits(&f, &mut r, &step(1));
    assert_eq!(again, set);
}
