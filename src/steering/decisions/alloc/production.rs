//! Production: a site limit L (W) spread over inverters by `proportional`,
//! `priority` (the last in the list is curtailed first) or `dynamic` (closed loop
//! on measured power: headroom an inverter does not use goes to the others),
//! and the grid loop's own cap ([`allocate_cap`]: what each produces first,
//! then room to grow).

use super::{fill_in_order, priority_order, water_fill};
use crate::config::CurtailmentFulfilment;

/// What one inverter can do now.
#[derive(Clone, Debug, PartialEq)]
pub struct InverterView {
    pub rated_w: f64,
    /// Latest measured production (W), when known.
    pub measured_w: Option<f64>,
    /// Lower goes first (is curtailed last) under `priority`.
    pub priority: u32,
    /// The limit it was last told (W); `None` while released.
    pub limit_w: Option<f64>,
}

/// Under `dynamic`, an inverter producing below its share keeps this fraction of
/// its rating above what it produces, so it can grow back towards its share.
pub const DYNAMIC_HEADROOM: f64 = 0.05;

/// Per-inverter limits (W); they sum to `min(max(limit, 0), Σ rated)` and none
/// exceeds its rating.
pub fn allocate_production(
    rule: CurtailmentFulfilment,
    inverters: &[InverterView],
    limit_w: f64,
) -> Vec<f64> {
    let rated: Vec<f64> = inverters.iter().map(|i| i.rated_w.max(0.0)).collect();
    let limit = limit_w.max(0.0);
    match rule {
        CurtailmentFulfilment::Proportional => water_fill(limit, &rated, &rated),
        CurtailmentFulfilment::Priority => {
            let p: Vec<u32> = inverters.iter().map(|i| i.priority).collect();
            fill_in_order(limit, &rated, &priority_order(&p))
        }
        CurtailmentFulfilment::Dynamic => {
            if inverters.iter().any(|i| i.measured_w.is_none()) {
                return water_fill(limit, &rated, &rated);
            }
            // What each would use now: its production plus some room to grow.
            let demand: Vec<f64> = inverters
                .iter()
                .zip(&rated)
                .map(|(i, r)| {
                    let m = i.measured_w.unwrap_or(0.0).max(0.0);
                    (m + DYNAMIC_HEADROOM * r).min(*r)
                })
                .collect();
            let first = water_fill(limit, &rated, &demand);
            let given: f64 = first.iter().sum();
            let room: Vec<f64> = rated.iter().zip(&first).map(|(r, f)| r - f).collect();
            let extra = water_fill(limit - given, &rated, &room);
            first.iter().zip(extra).map(|(a, b)| a + b).collect()
        }
    }
}

/// The grid loop's own production cap spread over the inverters: by priority
/// where `rule` is `priority`, else each inverter first gets what it produces
/// (shares by rating, at most its production), then room to grow
/// ([`DYNAMIC_HEADROOM`] of its rating above its production, shares by
/// rating), then what is left by rating. Unlike `dynamic`, a shaded
/// inverter's room never comes out of what another produces: the loop counts
/// each inverter at the larger of its production and its limit, so room given
/// before production would be counted as production that is not there.
/// Limits sum to `min(max(cap, 0), Σ rated)`, none exceeds its rating, and a
/// larger cap never gives any inverter less. With a measurement missing:
/// proportional.
pub fn allocate_cap(
    rule: CurtailmentFulfilment,
    inverters: &[InverterView],
    cap_w: f64,
) -> Vec<f64> {
    if rule == CurtailmentFulfilment::Priority {
        return allocate_production(rule, inverters, cap_w);
    }
    let rated: Vec<f64> = inverters.iter().map(|i| i.rated_w.max(0.0)).collect();
    let cap = cap_w.max(0.0);
    let measured: Option<Vec<f64>> = inverters
        .iter()
        .zip(&rated)
        .map(|(i, r)| i.measured_w.map(|m| m.clamp(0.0, *r)))
        .collect();
    let Some(produced) = measured else {
        return water_fill(cap, &rated, &rated);
    };
    let grow: Vec<f64> = produced
        .iter()
        .zip(&rated)
        .map(|(m, r)| ((m + DYNAMIC_HEADROOM * r).min(*r) - m).max(0.0))
        .collect();
    let mut out = water_fill(cap, &rated, &produced);
    // Each pass spreads what the ones before left (nothing while the cap is
    // below the production).
    let add = |caps: &[f64], out: &mut Vec<f64>| {
        let given: f64 = out.iter().sum();
        let more = water_fill(cap - given, &rated, caps);
        for (o, m) in out.iter_mut().zip(more) {
            *o += m;
        }
    };
    add(&grow, &mut out);
    let room: Vec<f64> = rated.iter().zip(&out).map(|(r, o)| r - o).collect();
    add(&room, &mut out);
    out
}
