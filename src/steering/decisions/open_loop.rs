//! The grid limits without the grid loop: for a site with no grid meter, or
//! whose loop is turned off (`grid_loop.enabled = false`). The limits then only
//! clamp what the agent itself commands to the storage, and maximize grid import
//! sizes its charging from the last measurements.
//!
//! Pure, like `hold`, whose answer type it shares.

use super::hold::{Change, Held, LoopMode, LoopState, ProductionPlan, Side, SitePlan, StoragePlan};
use super::limits::GridLimits;

/// Maximize grid import aims this fraction below `maxImport`, so that a load step
/// between two control ticks does not push the import over the limit.
pub const MGI_MARGIN: f64 = 0.02;

/// Site measurements the open loop uses; each is `None` when not every device
/// involved reported one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Net {
    pub grid_w: Option<f64>,
    pub battery_w: Option<f64>,
    pub production_w: Option<f64>,
}

/// The plan with the storage clamped to the limits (and maximize grid import
/// sized from the measurements when `mgi_charge_cap_w` is given: the most the
/// storage could charge).
pub fn open_loop(
    limits: &GridLimits,
    plan: &SitePlan,
    m: &Net,
    mgi_charge_cap_w: Option<f64>,
    now_ms: i64,
) -> Held {
    let mut changes = Vec::new();
    let (storage, production) = match mgi_charge_cap_w {
        Some(can) => maximize_import(limits, m, can, &mut changes),
        None => {
            let storage = match plan.storage {
                StoragePlan::Power(p) => {
                    let (to, why) = clamp(limits, m, p);
                    if let Some(reason) = why {
                        changes.push(Change {
                            side: Side::Storage,
                            requested_w: Some(p),
                            applied_w: Some(to),
                            reason,
                        });
                    }
                    StoragePlan::Power(to)
                }
                StoragePlan::Release => StoragePlan::Release,
            };
            (storage, plan.production)
        }
    };
    Held {
        storage,
        production,
        mode: LoopMode::Off,
        changes,
        state: LoopState {
            at_ms: now_ms,
            ..LoopState::default()
        },
    }
}

/// The storage may not push the grid beyond its limits: a discharge is cut so the
/// export stays within `maxExport`, a charge so the import stays within
/// `maxImport`. It only reduces the magnitude; it never turns idle into action.
fn clamp(limits: &GridLimits, m: &Net, p: f64) -> (f64, Option<String>) {
    // The site's net import without the storage, when measured; else the storage
    // alone must stay within the limits.
    let net = match (m.grid_w, m.battery_w) {
        (Some(g), Some(b)) => g + b,
        _ => 0.0,
    };
    if p > 0.0 {
        if let Some(x) = limits.export {
            let hi = (net + x.w).max(0.0);
            if p > hi {
                return (hi, Some(x.describe()));
            }
        }
    } else if p < 0.0 {
        if let Some(i) = limits.import {
            let lo = (net - i.w).min(0.0);
            if p < lo {
                return (lo, Some(i.describe()));
            }
        }
    }
    (p, None)
}

/// Storage charges as much as it can and production is held back, while the
/// import stays below `maxImport`, sized from the last measurements.
fn maximize_import(
    limits: &GridLimits,
    m: &Net,
    can_charge: f64,
    changes: &mut Vec<Change>,
) -> (StoragePlan, ProductionPlan) {
    let cap = limits.import.map(|l| l.w * (1.0 - MGI_MARGIN));
    let (charge, release_production) = match (cap, m.grid_w, m.battery_w, m.production_w) {
        (None, ..) => (can_charge, false),
        (Some(cap), Some(g), Some(b), Some(pv)) => {
            // The consumption the site has whatever the storage and PV do.
            let load = g + b + pv;
            let charge = (cap - load).clamp(0.0, can_charge);
            // With the load alone over the limit, production helps: let it run.
            (charge, load > cap)
        }
        (Some(cap), ..) => {
            changes.push(Change {
                side: Side::Storage,
                requested_w: Some(-can_charge),
                applied_w: Some(-can_charge.min(cap)),
                reason: "no complete grid, storage and production measurements: charging held to maxImport alone".into(),
            });
            (can_charge.min(cap), false)
        }
    };
    let production = if release_production {
        ProductionPlan::Release
    } else {
        ProductionPlan::Limit(0.0)
    };
    (StoragePlan::Power(-charge), production)
}
