//! Production: a site limit L (W) spread over inverters by `proportional`,
//! `priority` (the last in the list is curtailed first) or `dynamic` (closed loop
//! on measured power: headroom an inverter does not use goes to the others).

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
