//! The production side of the grid loop: what the site's inverters give now,
//! what they could give at most while they move to the limits a site cap gives
//! them, and the largest cap that keeps that within a budget.
//!
//! An inverter producing below its limit can rise to it at any moment (the sun
//! comes back); one above its new limit comes down only as fast as it follows.
//! So the worst an inverter can give while it moves is the larger of its
//! measured power and its new limit. Pure.

use super::super::alloc::InverterView;
use super::super::settle::{deadband_w, production_limits};
use crate::config::CurtailmentFulfilment;

/// How the loop's own cap is spread (`alloc::allocate_cap`): by priority
/// where the site curtails by priority, else each inverter gets what it
/// produces first, then a little room above it (5 % of its rating), then the
/// rest by rating. The limits still sum to the cap, so a returning sun cannot
/// pass it; and a shaded inverter's room never comes out of what another
/// produces, so the room the loop counts at its worst is room the cap has
/// beyond the production (a `dynamic` spread, room first, counted it as
/// production and left a narrow band's import unheld).
pub fn cap_rule(site_rule: CurtailmentFulfilment) -> CurtailmentFulfilment {
    match site_rule {
        CurtailmentFulfilment::Priority => CurtailmentFulfilment::Priority,
        CurtailmentFulfilment::Proportional | CurtailmentFulfilment::Dynamic => {
            CurtailmentFulfilment::Dynamic
        }
    }
}

/// The measured production of the online inverters, W.
pub fn measured(inv: &[InverterView]) -> f64 {
    inv.iter()
        .filter_map(|i| i.measured_w)
        .map(|m| m.max(0.0))
        .sum()
}

/// The rated production of the online inverters, W.
pub fn rated(inv: &[InverterView]) -> f64 {
    inv.iter()
        .filter(|i| i.measured_w.is_some())
        .map(|i| i.rated_w.max(0.0))
        .sum()
}

/// Whether an online inverter produces at the limit it was told (within 2 %
/// of it, at least 100 W): it could give more. One that produces next to
/// nothing is not (at night a limit of 0 W says nothing of the sun).
pub fn at_limit(inv: &[InverterView]) -> bool {
    inv.iter().any(|i| match (i.measured_w, i.limit_w) {
        (Some(m), Some(l)) => {
            let margin = (0.02 * l).max(100.0);
            l < i.rated_w && m >= l - margin && m > margin
        }
        _ => false,
    })
}

/// What an online inverter produces, where a reading within its deadband of
/// the limit it holds counts as that limit: an inverter at its limit reads on
/// either side of it (the noise of its measurement). Counted a little above
/// it, the cap would have to come down for noise; a little below it, every
/// inverter's limit would have to move before any move of the cap could count.
fn at_most_told(i: &InverterView) -> Option<f64> {
    let m = i.measured_w?.max(0.0);
    Some(match i.limit_w {
        Some(told) if (m - told).abs() <= deadband_w(i.rated_w) => told,
        _ => m,
    })
}

/// Per online inverter: (measured, the limit `cap` gives it, settled against
/// what it was told (`settle.rs`); its rating when released).
fn moves<'a>(
    rule: CurtailmentFulfilment,
    inv: &'a [InverterView],
    cap: Option<f64>,
) -> impl Iterator<Item = (f64, f64)> + 'a {
    let limits = cap.map(|c| production_limits(rule, inv, c.max(0.0)));
    inv.iter().enumerate().filter_map(move |(k, i)| {
        let m = at_most_told(i)?;
        let rated = i.rated_w.max(0.0);
        let l = limits.as_ref().map_or(rated, |l| l[k].min(rated));
        Some((m, l))
    })
}

/// The most the inverters can give while they move to what `cap` (`None`:
/// released) gives them.
pub fn worst(rule: CurtailmentFulfilment, inv: &[InverterView], cap: Option<f64>) -> f64 {
    moves(rule, inv, cap).map(|(m, l)| m.max(l)).sum()
}

/// What the inverters give once they have moved, if the sun stays as it is.
pub fn expected(rule: CurtailmentFulfilment, inv: &[InverterView], cap: Option<f64>) -> f64 {
    moves(rule, inv, cap).map(|(m, l)| m.min(l)).sum()
}

/// The largest site cap (at most `room`) whose [`worst`] stays within `room`.
/// When none can (the inverters produce more than `room` now and must come
/// down first), `room` itself: what they settle at. The worst is monotone in
/// the cap, so a bisection finds it.
pub fn cap_within(rule: CurtailmentFulfilment, inv: &[InverterView], room: f64) -> f64 {
    let rated: f64 = inv.iter().map(|i| i.rated_w.max(0.0)).sum();
    let steady = room.clamp(0.0, rated);
    let fits = |c: f64| worst(rule, inv, Some(c)) <= room + 1e-6;
    if !fits(0.0) {
        return steady;
    }
    let (mut lo, mut hi) = (0.0, steady);
    if fits(hi) {
        return hi;
    }
    while hi - lo > 1.0 {
        let mid = 0.5 * (lo + hi);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(rated: f64, measured: Option<f64>) -> InverterView {
        InverterView {
            rated_w: rated,
            measured_w: measured,
            priority: 0,
            limit_w: None,
        }
    }

    #[test]
    fn the_worst_counts_an_inverter_above_its_new_limit_where_it_is() {
        let r = cap_rule(CurtailmentFulfilment::Proportional);
        // East produces 28 kW, west is shaded at 5 kW.
        let i = [inv(30_000.0, Some(28_000.0)), inv(20_000.0, Some(5_000.0))];
        assert_eq!(measured(&i), 33_000.0);
        assert_eq!(worst(r, &i, None), 50_000.0);
        // A 30 kW cap: east 25 kW (still at 28), west its 5 kW.
        assert_eq!(worst(r, &i, Some(30_000.0)), 33_000.0);
        assert_eq!(expected(r, &i, Some(30_000.0)), 30_000.0);
        // A 40 kW cap: each its production, then its room, then the rest:
        // east 30 kW, west 10 kW (could rise to it).
        assert_eq!(worst(r, &i, Some(40_000.0)), 40_000.0);
        assert_eq!(expected(r, &i, Some(40_000.0)), 33_000.0);
        assert_eq!(cap_within(r, &i, 40_000.0), 40_000.0);
        // An inverter producing nothing gets no room out of what another
        // produces: the cap covers the production, and no more counts.
        let shaded = [inv(30_000.0, Some(0.0)), inv(20_000.0, Some(16_100.0))];
        assert_eq!(cap_within(r, &shaded, 16_100.0), 16_100.0);
        assert_eq!(worst(r, &shaded, Some(16_100.0)), 16_100.0);
        let down = [inv(30_000.0, Some(18_000.0)), inv(20_000.0, Some(5_000.0))];
        assert_eq!(cap_within(r, &down, 40_000.0), 40_000.0);
        // Nothing fits below what is produced now: the cap they settle at.
        assert_eq!(cap_within(r, &i, 20_000.0), 20_000.0);
        // An offline inverter counts for nothing.
        let i = [inv(30_000.0, Some(10_000.0)), inv(20_000.0, None)];
        assert_eq!(rated(&i), 30_000.0);
        assert_eq!(worst(r, &i, None), 30_000.0);
    }
}
