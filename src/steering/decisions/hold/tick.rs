//! What one tick of the grid loop works from: the plan's values, the limits'
//! aim points, and the load, estimated only from a meter reading that shows
//! power from after the loop's last change, or made again at once when a
//! commanded device came online or went offline (`docs/steering.md`,
//! "Transitions"). Pure.

use super::super::alloc::InverterView;
use super::super::limits::{GridLimits, Limit};
use super::estimate::{self, History, Load, Readings};
use super::{aim, deadband, pv};
use super::{LoopSettings, LoopState, Sensed, SitePlan, StoragePlan};
use crate::config::CurtailmentFulfilment;

/// A fresh meter reading: the grid (+ import), when it was read, and how old
/// the power it shows may be, ms.
pub(super) struct Reading {
    pub grid_w: f64,
    pub ts_ms: i64,
    pub report_lag_ms: i64,
}

pub(super) struct Tick<'a> {
    /// Which commanded devices the load estimate counts in the supply
    /// (those with a reading): [`LoopState::counted`].
    pub counted: Vec<bool>,
    pub settings: &'a LoopSettings,
    pub limits: &'a GridLimits,
    pub plan: &'a SitePlan,
    pub inverters: &'a [InverterView],
    pub s: &'a Sensed,
    pub prev: &'a LoopState,
    /// How the loop's own cap is spread.
    pub rule: CurtailmentFulfilment,
    pub grid_w: f64,
    /// The online inverters: measured and rated production, W.
    pub pv_now: f64,
    pub rated: f64,
    /// "At" a power: within 2 % of the rated production, at least 100 W.
    pub margin: f64,
    pub db: f64,
    /// Seconds of ramp a move away from a held limit may take this tick: 0
    /// while the load estimate may predate the last change (the loop moves
    /// away only on what it knows), else the time since the last such move
    /// when the loop was on its way, or one tick (at most 5).
    pub relax_dt_s: f64,
    /// When the oldest of the devices' readings was taken.
    pub read_at: i64,
    pub load: Load,
    pub estimated_at_ms: i64,
    pub supply: History,
    /// The export's aim point (0 without an export limit).
    pub aim_x: f64,
    /// The most supply (production + storage) the export limit allows, and
    /// the least the import limit does, around their aim points.
    pub budget: Option<f64>,
    pub floor: Option<f64>,
    /// The plan's storage at its worst for the export and for the import.
    pub plan_x: f64,
    pub plan_i: f64,
    /// What the released storage did on its own.
    pub auto_w: f64,
    /// What the plan itself does: its power, or what the released storage did.
    pub plan_own: f64,
    pub plan_cap: Option<f64>,
    /// The production limit in force last tick (`None`: released).
    pub last_cap: Option<f64>,
    /// The production sits at the loop's own cap (not the plan's): it could
    /// give more.
    pub at_cap: bool,
}

impl<'a> Tick<'a> {
    pub fn new(
        settings: &'a LoopSettings,
        limits: &'a GridLimits,
        plan: &'a SitePlan,
        inverters: &'a [InverterView],
        s: &'a Sensed,
        prev: &'a LoopState,
        meter: Reading,
    ) -> Tick<'a> {
        let pv_now = pv::measured(inverters);
        let rated = pv::rated(inverters);
        let supply_now = pv_now + s.battery_w;
        let mut supply = prev.supply.clone();
        supply.record(&s.readings);
        let read_at = s
            .readings
            .iter()
            .flatten()
            .map(|(t, _)| *t)
            .min()
            .unwrap_or(s.now_ms);

        // Only from a reading that shows power from after the last change and
        // device readings taken after it (or, after a while, whatever there
        // is: a device that stopped answering must not freeze it); the
        // devices' own readings carry the change in the meantime.
        let shows_from = meter.ts_ms - meter.report_lag_ms;
        let fresh = shows_from > prev.changed_at_ms && s.readings_from_ms > prev.changed_at_ms;
        let overdue = s.now_ms - prev.estimated_at_ms > settings.settle_ms;
        // The last estimate counted the output of the devices then offline
        // (or not read yet) in the load: once one is online, or one goes
        // offline, it is neither held nor frozen but made again, or that
        // output would count twice (or not at all) as the device is told.
        let db = site_deadband(limits, rated, s, meter.grid_w);
        let counted = counted(&s.readings);
        let same_devices = prev.counted == counted;
        let (load, estimated_at_ms) = match prev.load {
            Some(l) if same_devices && !fresh && !overdue => (l, prev.estimated_at_ms),
            _ => {
                let read = estimate::from_reading(
                    meter.grid_w,
                    &supply,
                    &s.readings,
                    (shows_from, meter.ts_ms),
                    supply_now,
                );
                (
                    estimate::held(prev.load.filter(|_| same_devices), read, db),
                    s.now_ms,
                )
            }
        };

        let relax_dt_s = relax_dt_s(settings, s, prev, fresh);

        let (plan_x, plan_i, auto_w) = planned_storage(plan.storage, s, prev);
        let plan_cap = plan.production.limit_w().map(|l| l.max(0.0));
        let last_cap = prev.last_production.flatten();
        let margin = (0.02 * rated).max(100.0);
        let aim_x = limits.export.map_or(0.0, aim);
        let at_cap = last_cap.is_some_and(|c| {
            c < rated - margin && plan_cap.is_none_or(|p| c < p - margin) && pv::at_limit(inverters)
        });
        Tick {
            counted,
            settings,
            limits,
            plan,
            inverters,
            s,
            prev,
            rule: pv::cap_rule(settings.curtailment),
            grid_w: meter.grid_w,
            pv_now,
            rated,
            margin,
            db,
            relax_dt_s,
            read_at,
            load,
            estimated_at_ms,
            supply,
            aim_x,
            budget: limits.export.map(|_| load.low_w + aim_x),
            floor: limits.import.map(|i| load.high_w - aim(i)),
            plan_x,
            plan_i,
            auto_w,
            plan_own: match plan.storage {
                StoragePlan::Power(_) => plan_x,
                StoragePlan::Release => auto_w,
            },
            plan_cap,
            last_cap,
            at_cap,
        }
    }
}

/// Seconds of ramp a move away from a held limit may take this tick
/// ([`Tick::relax_dt_s`]): 0 on a load estimate that may predate the last
/// change, else the time since the last such move while the loop was on its
/// way, or one tick, at most 5.
fn relax_dt_s(settings: &LoopSettings, s: &Sensed, prev: &LoopState, fresh: bool) -> f64 {
    let dt_s = ((s.now_ms - prev.at_ms) as f64 / 1000.0).clamp(0.0, 5.0);
    match prev.relaxed_at_ms {
        _ if !fresh => 0.0,
        Some(at) if s.now_ms - at <= settings.settle_ms + 1000 => {
            ((s.now_ms - at) as f64 / 1000.0).clamp(0.0, 5.0)
        }
        _ => dt_s,
    }
}

/// Which of the commanded devices have a reading (are online).
fn counted(readings: &Readings) -> Vec<bool> {
    readings.iter().map(Option::is_some).collect()
}

/// The deadband of the site's outputs: that of the limits the grid is near
/// (`hold::deadband`, half the tightest tolerance), at most 1 % of what the
/// site can move (its online inverters' rating and its storage's larger
/// power), but not below 500 W: a band wider than that is never needed
/// against noise, and far limits would make it hide real moves. A limit
/// farther from the grid than a tenth of what the site can move (and its
/// tolerance) does not count: an import limit 277 kW away from an export
/// held at 182 kW does not narrow the moves that hold the export, and an
/// unwritten move of a deadband cannot reach it. With no limit near, all
/// count.
fn site_deadband(limits: &GridLimits, rated: f64, s: &Sensed, grid_w: f64) -> f64 {
    let capacity = rated + s.charge_cap_w.max(s.discharge_cap_w);
    let reach = 0.1 * capacity;
    let near =
        |l: Option<Limit>, distance: f64| l.filter(|l| distance <= reach + super::tolerance_w(l.w));
    let close = GridLimits {
        export: near(limits.export, limits.export.map_or(0.0, |l| l.w + grid_w)),
        import: near(limits.import, limits.import.map_or(0.0, |l| l.w - grid_w)),
    };
    let db = if close.export.is_none() && close.import.is_none() {
        deadband(limits)
    } else {
        deadband(&close)
    };
    db.min((0.01 * capacity).max(500.0))
}

/// The storage as the plan leaves it, at its worst for each limit: (for the
/// export, for the import, what it did on its own), W, + discharge. Released
/// storage runs its own logic: measured while it does; once the loop took it
/// over, what it did before (discharging for the export, charging for the
/// import).
fn planned_storage(plan: StoragePlan, s: &Sensed, prev: &LoopState) -> (f64, f64, f64) {
    let auto_w = match (plan, prev.storage_w, prev.auto_w) {
        (StoragePlan::Release, Some(_), Some(a)) => a,
        _ => s.battery_w,
    };
    let (x, i) = match plan {
        StoragePlan::Power(p) => {
            let p = p.clamp(-s.charge_cap_w, s.discharge_cap_w);
            (p, p)
        }
        StoragePlan::Release if prev.storage_w.is_some() => (auto_w.max(0.0), auto_w.min(0.0)),
        StoragePlan::Release => (s.battery_w, s.battery_w),
    };
    (x, i, auto_w)
}
