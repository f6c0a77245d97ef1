//! The grid loop: holds the site's grid limits at the meter (`docs/steering.md`,
//! "The grid loop"). Given what the signal asks of the site (a storage power or a
//! release, a production limit), the limits in force, the meter and the devices'
//! measured powers, it says what the site gets instead, one tick at a time.
//!
//! The model is the power balance at the connection point:
//! `grid = load − production − storage` (grid + import, storage + discharge),
//! where `load` is everything the agent does not command (consumption, and the
//! output of devices it cannot reach). The load is estimated from the meter with
//! the commanded devices' measured powers fed forward, and the loop picks the
//! storage power and production output that put the grid at an aim point just
//! inside the limit. Against oscillation: the load estimate is frozen after a
//! change until every reading is newer than it (no correction on readings taken
//! before the devices moved), a hysteresis band before a hold is let go, and a
//! deadband on small moves. Moves away from a held limit are ramp-limited;
//! corrections towards safety never are.
//!
//! Pure: no clock, no live state, no I/O. The caller keeps [`LoopState`] from one
//! tick to the next.

use super::alloc::{allocate_production, InverterView};
use super::limits::{GridLimits, Limit};
use crate::config::{CurtailmentFulfilment, ExportOrder};

/// The steady band around a held limit: ±2 % of it, at least 500 W.
pub fn tolerance_w(limit_w: f64) -> f64 {
    (0.02 * limit_w.abs()).max(500.0)
}

/// What the signal (or the fallback) asks of the storage, site total.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StoragePlan {
    /// Remote control released: the storage runs its own logic.
    Release,
    /// Exact power, W, + discharge.
    Power(f64),
}

/// What the production gets, site total.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProductionPlan {
    Release,
    /// A limit (W), spread by the site's curtailment rule.
    Limit(f64),
    /// What the grid loop wants produced (W): the limits are chosen so that the
    /// inverters' expected output is this (see [`limit_for_output`]).
    Output(f64),
}

/// Which way a shortfall at the import limit is made up first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportOrder {
    /// Let the production run, then discharge (the normal case: PV is free).
    LiftCurtailmentFirst,
    /// Charge less first, then let the production run, then discharge
    /// (maximize grid import: grid energy before PV).
    ChargeLessFirst,
}

/// The site-level request before the grid limits are held.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SitePlan {
    pub storage: StoragePlan,
    pub production: ProductionPlan,
    pub import_order: ImportOrder,
}

/// The grid meter as the loop sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Meter {
    /// Sum over the site's meters (+ import), measured at `ts_ms` (the oldest).
    Fresh { grid_w: f64, ts_ms: i64 },
    /// Offline or stale: why.
    Lost(String),
}

/// What the loop reads this tick.
#[derive(Clone, Debug, PartialEq)]
pub struct Sensed {
    pub now_ms: i64,
    pub meter: Meter,
    /// Measured power of the commanded batteries that are online, W, + discharge.
    pub battery_w: f64,
    /// The oldest reading among the meter and the online commanded devices.
    pub readings_from_ms: i64,
    /// Site totals of what the batteries may do now (SoC bounds applied).
    pub charge_cap_w: f64,
    pub discharge_cap_w: f64,
}

/// Fixed settings of a site's loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopSettings {
    pub export_order: ExportOrder,
    pub curtailment: CurtailmentFulfilment,
    /// Largest relaxing move per second: storage (W/s) and production (W/s).
    pub storage_ramp_w_per_s: f64,
    pub production_ramp_w_per_s: f64,
    /// After a change, readings older than it are not trusted for this long.
    pub settle_ms: i64,
}

/// What the loop remembers between ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoopState {
    pub export_held: bool,
    pub import_held: bool,
    /// The last trusted load estimate, W.
    pub load_w: Option<f64>,
    /// When the site-level outputs last changed.
    pub changed_at_ms: i64,
    /// The storage power the loop set last tick (it overrode the plan).
    pub storage_w: Option<f64>,
    /// What the released storage did on its own before the loop took it over.
    pub auto_w: Option<f64>,
    /// The production output the loop set last tick.
    pub production_w: Option<f64>,
    /// The site-level outputs of last tick (`None` = released), for change detection.
    pub last_storage: Option<Option<f64>>,
    pub last_production: Option<Option<f64>>,
    pub at_ms: i64,
}

/// What the loop is doing, for the steering state and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoopMode {
    /// No meter, or the loop is turned off: limits clamp only what the agent commands.
    #[default]
    Off,
    /// Within the limits: the plan passes unchanged.
    Free,
    HoldingExport,
    HoldingImport,
    /// The meter is offline or stale: the safe state.
    MeterLost,
}

impl LoopMode {
    pub const fn wire_name(self) -> &'static str {
        match self {
            LoopMode::Off => "off",
            LoopMode::Free => "free",
            LoopMode::HoldingExport => "holdingExport",
            LoopMode::HoldingImport => "holdingImport",
            LoopMode::MeterLost => "meterLost",
        }
    }
}

/// Which side of the site a loop change touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Storage,
    Production,
}

/// One change the loop made to the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub side: Side,
    /// The plan's value, W (`None`: released).
    pub requested_w: Option<f64>,
    /// What the site gets, W (`None`: released).
    pub applied_w: Option<f64>,
    pub reason: String,
}

/// The loop's answer for one tick.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub storage: StoragePlan,
    pub production: ProductionPlan,
    pub mode: LoopMode,
    pub changes: Vec<Change>,
    pub state: LoopState,
}

/// Expected total output if the production gets `plan`: per inverter the
/// smaller of its share and what it can give (its measured power, or its rating
/// while it sits at a limit: what it could give then is unknown).
pub fn expected_output(
    rule: CurtailmentFulfilment,
    inv: &[InverterView],
    limit: Option<f64>,
) -> f64 {
    let avail: Vec<f64> = inv.iter().map(available_w).collect();
    match limit {
        None => avail.iter().sum(),
        Some(l) => allocate_production(rule, inv, l)
            .iter()
            .zip(&avail)
            .map(|(a, v)| a.min(*v))
            .sum(),
    }
}

/// What one inverter could give: 0 offline, its rating while held at a limit.
pub fn available_w(i: &InverterView) -> f64 {
    let Some(m) = i.measured_w else { return 0.0 };
    let m = m.max(0.0);
    match i.limit_w {
        Some(l) if m >= l - (0.02 * i.rated_w).max(100.0) => i.rated_w.max(m),
        _ => m,
    }
}

/// The site limit under which the inverters' expected output is `output`: the
/// rule spreads the limit by rating, and inverters that give less than their
/// share leave the rest to the others. Bisection over a monotone function.
pub fn limit_for_output(rule: CurtailmentFulfilment, inv: &[InverterView], output: f64) -> f64 {
    let rated: f64 = inv.iter().map(|i| i.rated_w.max(0.0)).sum();
    let (mut lo, mut hi) = (output.max(0.0).min(rated), rated);
    if expected_output(rule, inv, Some(lo)) >= output {
        return lo;
    }
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if expected_output(rule, inv, Some(mid)) >= output {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo < 1.0 {
            break;
        }
    }
    hi
}

/// One tick of the loop with a fresh meter.
pub fn hold(
    settings: &LoopSettings,
    limits: &GridLimits,
    plan: &SitePlan,
    inverters: &[InverterView],
    s: &Sensed,
    prev: &LoopState,
) -> Held {
    let Meter::Fresh { grid_w, .. } = s.meter else {
        return meter_lost(limits, plan, s);
    };
    let rule = settings.curtailment;
    let measured_pv: f64 = inverters.iter().filter_map(|i| i.measured_w).sum();

    // The load, from readings taken after the last change (or, after a while,
    // whatever there is: a device that stopped answering must not freeze it).
    let trusted = s.readings_from_ms > prev.changed_at_ms
        || s.now_ms - prev.changed_at_ms > settings.settle_ms;
    let load = match (trusted, prev.load_w) {
        (false, Some(l)) => l,
        _ => grid_w + measured_pv + s.battery_w,
    };

    // The storage as planned. Released storage runs its own logic: measured while
    // it does; once the loop took it over, what it did before, taken at its
    // worst for each limit (discharging for the export, charging for the import).
    let auto_w = match (plan.storage, prev.storage_w, prev.auto_w) {
        (StoragePlan::Release, Some(_), Some(a)) => a,
        _ => s.battery_w,
    };
    let (storage_pred_x, storage_pred_i) = match plan.storage {
        StoragePlan::Power(p) => {
            let p = p.clamp(-s.charge_cap_w, s.discharge_cap_w);
            (p, p)
        }
        StoragePlan::Release if prev.storage_w.is_some() => (auto_w.max(0.0), auto_w.min(0.0)),
        StoragePlan::Release => (s.battery_w, s.battery_w),
    };
    let plan_limit = match plan.production {
        ProductionPlan::Release => None,
        ProductionPlan::Limit(l) | ProductionPlan::Output(l) => Some(l),
    };
    let pv_pred = expected_output(rule, inverters, plan_limit);

    // Supply (production + storage) the limits allow, around their aim points.
    let mut s_max = limits.export.map(|x| load + aim(x));
    let mut s_min = limits.import.map(|i| load - aim(i));
    if let (Some(hi), Some(lo)) = (s_max, s_min) {
        if lo > hi {
            let mid = 0.5 * (lo + hi);
            (s_max, s_min) = (Some(mid), Some(mid));
        }
    }
    let over = s_max.map(|hi| storage_pred_x + pv_pred - hi);
    let under = s_min.map(|lo| lo - storage_pred_i - pv_pred);
    let export_held = match (over, limits.export) {
        (Some(o), Some(x)) => {
            o > if prev.export_held {
                -tolerance_w(x.w)
            } else {
                0.0
            }
        }
        _ => false,
    };
    let import_held = match (under, limits.import) {
        (Some(u), Some(i)) => {
            u > if prev.import_held {
                -tolerance_w(i.w)
            } else {
                0.0
            }
        }
        _ => false,
    };

    let storage_pred = if export_held {
        storage_pred_x
    } else {
        storage_pred_i
    };
    let mut storage = storage_pred;
    let mut storage_taken = false;
    let mut output: Option<f64> = None;
    let mut lifted = false;
    let mut changes = Vec::new();

    if export_held {
        // Only ever less supply than the plan: charge more, produce less.
        let hi = s_max.unwrap_or(f64::INFINITY);
        let mut need = (storage_pred + pv_pred - hi).max(0.0);
        let mut pv = pv_pred;
        let charge = |storage: &mut f64, need: &mut f64| {
            let to = (*storage - *need).max(-s.charge_cap_w).min(*storage);
            *need -= *storage - to;
            *storage = to;
        };
        let curtail = |pv: &mut f64, need: &mut f64| {
            let to = (*pv - *need).max(0.0);
            *need -= *pv - to;
            *pv = to;
        };
        match settings.export_order {
            ExportOrder::StorageFirst => {
                charge(&mut storage, &mut need);
                curtail(&mut pv, &mut need);
            }
            ExportOrder::CurtailFirst => {
                curtail(&mut pv, &mut need);
                charge(&mut storage, &mut need);
            }
        }
        if pv < pv_pred - 1.0 || prev.production_w.is_some() {
            output = Some(pv);
        }
        storage_taken = storage < storage_pred - 1.0 || prev.storage_w.is_some();
        if need > 1.0 {
            changes.push(Change {
                side: Side::Production,
                requested_w: plan_limit,
                applied_w: Some(0.0),
                reason: format!(
                    "{}: cannot be held, {need:.0} W too much with the storage charging all it can and production at 0",
                    describe(limits.export)
                ),
            });
        }
    }
    if import_held {
        let lo = s_min.unwrap_or(f64::NEG_INFINITY);
        let mut need = (lo - (storage + output.unwrap_or(pv_pred))).max(0.0);
        let raise = |storage: &mut f64, need: &mut f64, ceiling: f64| {
            let to = (*storage + *need).min(ceiling.max(*storage));
            *need -= to - *storage;
            *storage = to;
        };
        let lift = |need: &mut f64, lifted: &mut bool| {
            let lifting = *need > 0.0 || prev.import_held && prev.last_production == Some(None);
            if lifting && (plan_limit.is_some() || output.is_some()) {
                *lifted = true;
                // What the released inverters give is known only once they run.
                let gain = (measured_pv - pv_pred).max(0.0);
                *need = (*need - gain).max(0.0);
            }
        };
        if plan.import_order == ImportOrder::ChargeLessFirst {
            raise(&mut storage, &mut need, 0.0);
        }
        lift(&mut need, &mut lifted);
        raise(&mut storage, &mut need, s.discharge_cap_w);
        storage_taken |= storage > storage_pred + 1.0 || prev.storage_w.is_some();
        if lifted {
            output = None;
        }
        if need > 1.0 {
            changes.push(Change {
                side: Side::Storage,
                requested_w: Some(storage_pred),
                applied_w: Some(storage),
                reason: format!(
                    "{}: cannot be held, {need:.0} W too much with the storage discharging all it can",
                    describe(limits.import)
                ),
            });
        }
    }

    // Deadband and ramp on the loop's own outputs.
    let dt_s = ((s.now_ms - prev.at_ms) as f64 / 1000.0).clamp(0.0, 5.0);
    if storage_taken {
        storage = settle(
            prev.storage_w,
            storage,
            if import_held { -1.0 } else { 1.0 },
            deadband(limits),
            settings.storage_ramp_w_per_s * dt_s,
        )
        .clamp(-s.charge_cap_w, s.discharge_cap_w);
    }
    if let Some(o) = output {
        output = Some(
            settle(
                prev.production_w,
                o,
                1.0,
                deadband(limits),
                settings.production_ramp_w_per_s * dt_s,
            )
            .max(0.0),
        );
    }

    let storage_out = if storage_taken {
        StoragePlan::Power(storage)
    } else {
        plan.storage
    };
    let production_out = match (output, lifted) {
        (_, true) => ProductionPlan::Release,
        (Some(o), false) => ProductionPlan::Output(o),
        (None, false) => plan.production,
    };
    let held_by = if export_held {
        limits.export
    } else {
        limits.import
    };
    if storage_taken && storage_out != plan.storage {
        changes.push(Change {
            side: Side::Storage,
            requested_w: match plan.storage {
                StoragePlan::Power(p) => Some(p),
                StoragePlan::Release => None,
            },
            applied_w: Some(storage),
            reason: describe(held_by),
        });
    }
    if production_out != plan.production {
        changes.push(Change {
            side: Side::Production,
            requested_w: plan_limit,
            applied_w: match production_out {
                ProductionPlan::Output(o) => Some(o),
                _ => None,
            },
            reason: if lifted {
                format!("{}: curtailment lifted", describe(limits.import))
            } else {
                describe(limits.export)
            },
        });
    }

    let mode = if export_held {
        LoopMode::HoldingExport
    } else if import_held {
        LoopMode::HoldingImport
    } else {
        LoopMode::Free
    };
    let now_storage = match storage_out {
        StoragePlan::Power(p) => Some(p),
        StoragePlan::Release => None,
    };
    let now_production = match production_out {
        ProductionPlan::Release => None,
        ProductionPlan::Limit(l) | ProductionPlan::Output(l) => Some(l),
    };
    let moved = |a: Option<Option<f64>>, b: Option<f64>| match (a, b) {
        (Some(Some(x)), Some(y)) => (x - y).abs() > 1.0,
        (Some(None), None) => false,
        _ => true,
    };
    let changed =
        moved(prev.last_storage, now_storage) || moved(prev.last_production, now_production);
    Held {
        storage: storage_out,
        production: production_out,
        mode,
        changes,
        state: LoopState {
            export_held,
            import_held,
            load_w: Some(load),
            changed_at_ms: if changed {
                s.now_ms
            } else {
                prev.changed_at_ms
            },
            storage_w: storage_taken.then_some(storage),
            auto_w: (plan.storage == StoragePlan::Release).then_some(auto_w),
            production_w: output,
            last_storage: Some(now_storage),
            last_production: Some(now_production),
            at_ms: s.now_ms,
        },
    }
}

/// Where the loop aims: half a tolerance inside the limit.
fn aim(l: Limit) -> f64 {
    l.w - 0.5 * tolerance_w(l.w)
}

/// Moves smaller than half the tightest tolerance are not worth a write.
fn deadband(limits: &GridLimits) -> f64 {
    [limits.export, limits.import]
        .into_iter()
        .flatten()
        .map(|l| 0.5 * tolerance_w(l.w))
        .fold(f64::INFINITY, f64::min)
        .min(500.0)
}

/// The new output given the last one: unchanged within the deadband; a move in
/// the `relax` direction (+1: up, −1: down) at most `ramp`; a move the other way
/// (towards safety) at once.
fn settle(last: Option<f64>, new: f64, relax: f64, deadband: f64, ramp: f64) -> f64 {
    let Some(last) = last else { return new };
    let d = new - last;
    if d.abs() < deadband {
        return last;
    }
    if d * relax > 0.0 && ramp.is_finite() {
        return last + relax * d.abs().min(ramp.max(deadband));
    }
    new
}

fn describe(l: Option<Limit>) -> String {
    l.map_or_else(|| "grid limit".to_string(), |l| l.describe())
}

/// The safe state without a meter reading: production at most `maxExport` (as if
/// the site had no load), no storage discharge (auto becomes idle), charging at
/// most `maxImport` (as if nothing were produced).
pub fn meter_lost(limits: &GridLimits, plan: &SitePlan, s: &Sensed) -> Held {
    let Meter::Lost(why) = &s.meter else {
        unreachable!("meter_lost is only called without a fresh meter")
    };
    let mut changes = Vec::new();
    let requested = match plan.storage {
        StoragePlan::Power(p) => Some(p),
        StoragePlan::Release => None,
    };
    let mut storage = requested.unwrap_or(0.0).min(0.0);
    if let Some(i) = limits.import {
        storage = storage.max(-i.w);
    }
    if requested != Some(storage) {
        changes.push(Change {
            side: Side::Storage,
            requested_w: requested,
            applied_w: Some(storage),
            reason: format!(
                "grid meter lost ({why}): no storage discharge, charging within maxImport"
            ),
        });
    }
    let plan_limit = match plan.production {
        ProductionPlan::Release => None,
        ProductionPlan::Limit(l) | ProductionPlan::Output(l) => Some(l),
    };
    let production = match (limits.export, plan_limit) {
        (Some(x), Some(l)) if l > x.w => ProductionPlan::Limit(x.w),
        (Some(x), None) => ProductionPlan::Limit(x.w),
        _ => plan.production,
    };
    if production != plan.production {
        changes.push(Change {
            side: Side::Production,
            requested_w: plan_limit,
            applied_w: limits.export.map(|x| x.w),
            reason: format!(
                "grid meter lost ({why}): production held to {} as if the site had no load",
                describe(limits.export)
            ),
        });
    }
    Held {
        storage: StoragePlan::Power(storage),
        production,
        mode: LoopMode::MeterLost,
        changes,
        state: LoopState {
            at_ms: s.now_ms,
            changed_at_ms: s.now_ms,
            ..LoopState::default()
        },
    }
}

#[cfg(test)]
mod tests;
