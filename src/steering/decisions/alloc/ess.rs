//! Storage: a site target P (W, + discharge, − charge) spread over batteries by
//! `proportional`, `priority` or `socBalance`.

use super::{fill_in_order, priority_order, water_fill};
use crate::config::EssFulfilment;

/// What one battery can do now. Limits are already the tightest of config and
/// device reports.
#[derive(Clone, Debug, PartialEq)]
pub struct BatteryView {
    pub rated_w: f64,
    pub max_charge_w: f64,
    pub max_discharge_w: f64,
    /// Latest SoC in %, when known.
    pub soc: Option<f64>,
    pub soc_min: f64,
    pub soc_max: f64,
    pub capacity_wh: Option<f64>,
    /// Lower goes first under `priority`.
    pub priority: u32,
}

impl BatteryView {
    /// Most it may discharge: none at or below its minimum SoC. An unknown SoC
    /// leaves the decision to the battery's own management.
    pub fn discharge_cap(&self) -> f64 {
        match self.soc {
            Some(soc) if soc <= self.soc_min => 0.0,
            _ => self.max_discharge_w.max(0.0),
        }
    }

    /// Most it may charge: none at or above its maximum SoC.
    pub fn charge_cap(&self) -> f64 {
        match self.soc {
            Some(soc) if soc >= self.soc_max => 0.0,
            _ => self.max_charge_w.max(0.0),
        }
    }

    /// Most it can keep charging for `secs` before its maximum SoC stops it
    /// (its [`charge_cap`](Self::charge_cap) when SoC or capacity is unknown).
    pub fn charge_cap_for(&self, secs: f64) -> f64 {
        let cap = self.charge_cap();
        match (self.soc, self.capacity_wh) {
            (Some(soc), Some(wh)) if secs > 0.0 => {
                let room_wh = ((self.soc_max - soc) / 100.0 * wh).max(0.0);
                cap.min(room_wh * 3600.0 / secs)
            }
            _ => cap,
        }
    }
}

/// Per-battery setpoints (W, + discharge) and the target they sum to.
#[derive(Clone, Debug, PartialEq)]
pub struct EssAllocation {
    pub setpoints: Vec<f64>,
    /// The target clamped to the batteries' feasible range.
    pub target_w: f64,
}

/// The site SoC: the capacity-weighted mean of the batteries that report one
/// (equal weights where a capacity is unknown).
pub fn site_soc(batteries: &[BatteryView]) -> Option<f64> {
    let known: Vec<(f64, f64)> = batteries
        .iter()
        .filter_map(|b| b.soc.map(|s| (s, b.capacity_wh)))
        .map(|(s, c)| (s, c.filter(|c| *c > 0.0)))
        .map(|(s, c)| (s, c.unwrap_or(1.0)))
        .collect();
    let total: f64 = known.iter().map(|(_, c)| c).sum();
    (total > 0.0).then(|| known.iter().map(|(s, c)| s * c).sum::<f64>() / total)
}

pub fn allocate_ess(
    rule: EssFulfilment,
    batteries: &[BatteryView],
    target_w: f64,
) -> EssAllocation {
    let discharge = target_w > 0.0;
    let caps: Vec<f64> = batteries
        .iter()
        .map(|b| {
            if discharge {
                b.discharge_cap()
            } else {
                b.charge_cap()
            }
        })
        .collect();
    let magnitude = target_w.abs().min(caps.iter().sum());
    let spread = match rule {
        EssFulfilment::Proportional => {
            let w: Vec<f64> = batteries.iter().map(|b| b.rated_w).collect();
            water_fill(magnitude, &w, &caps)
        }
        EssFulfilment::Priority => {
            let p: Vec<u32> = batteries.iter().map(|b| b.priority).collect();
            fill_in_order(magnitude, &caps, &priority_order(&p))
        }
        EssFulfilment::SocBalance => {
            let w: Vec<f64> = batteries
                .iter()
                .map(|b| {
                    let (Some(soc), Some(cap)) = (b.soc, b.capacity_wh) else {
                        return 0.0;
                    };
                    let room = if discharge {
                        soc - b.soc_min
                    } else {
                        b.soc_max - soc
                    };
                    cap * room.max(0.0) / 100.0
                })
                .collect();
            water_fill(magnitude, &w, &caps)
        }
    };
    let sign = if discharge { 1.0 } else { -1.0 };
    EssAllocation {
        setpoints: spread.into_iter().map(|x| sign * x).collect(),
        target_w: sign * magnitude,
    }
}
