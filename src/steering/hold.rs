//! The grid loop: holds the site's grid limits at the meter (`docs/steering.md`,
//! "The grid loop"). Given what the signal asks of the site (a storage power or a
//! release, a production limit), the limits in force, the meter and the devices'
//! measured powers, it says what the site gets instead, one tick at a time.
//!
//! The model is the power balance at the connection point:
//! `grid = load − production − storage` (grid + import, storage + discharge),
//! where `load` is everything the agent does not command (consumption, and the
//! output of devices it cannot reach). The load is estimated from the meter with
//! the commanded devices' measured powers fed forward (`estimate.rs`).
//!
//! Real devices follow a setpoint in seconds and a meter reports late, so:
//! - **No action on stale readings.** After a change of the site's commands the
//!   load estimate is frozen until the meter shows power from after the change
//!   (its reading newer than the change by its reporting lag); meanwhile the
//!   devices' own readings carry the change.
//! - **A production cap held in advance.** While an export limit is in force the
//!   production is capped at what the site can take (load + limit + what the
//!   storage absorbs now), so a returning sun meets a cap already in place.
//! - **Transitions at their worst.** Every device is counted where it is worst
//!   for the limit while it moves (`pv.rs`): the storage is not let go faster
//!   than the production comes down, and the production not let up faster than
//!   the storage takes it.
//!
//! Against oscillation: hysteresis before a hold is let go, a deadband on small
//! moves, and a ramp on moves away from a held limit; corrections towards
//! safety are never slowed.
//!
//! Pure: no clock, no live state, no I/O. The caller keeps [`LoopState`] from one
//! tick to the next.

mod estimate;
pub mod pv;

use super::alloc::InverterView;
use super::limits::{GridLimits, Limit};
use crate::config::{CurtailmentFulfilment, ExportOrder};
use estimate::{History, Load};

/// How far a correction towards safety leads: the devices are told the target
/// plus this share of what they still have to go, so a device that follows
/// with a lag gets there in about half the time, and the lead fades as it
/// arrives.
const LEAD: f64 = 1.5;

/// A lead only once the devices' readings were taken this long after the
/// target was set: a device that follows at once has arrived by then.
const LEAD_AFTER_MS: i64 = 1000;

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
    /// The grid loop's own cap (W), spread by [`cap_rule`]: the inverters'
    /// limits sum to it, and an inverter producing below its share gives the
    /// rest to the others.
    Cap(f64),
}

impl ProductionPlan {
    /// The limit, W; `None` when released.
    pub fn limit_w(self) -> Option<f64> {
        match self {
            ProductionPlan::Release => None,
            ProductionPlan::Limit(l) | ProductionPlan::Cap(l) => Some(l),
        }
    }
}

/// How the loop's own cap is spread: by priority where the site curtails by
/// priority, else `dynamic` (proportional shares, where an inverter producing
/// below its share keeps a little room above what it produces and gives the
/// rest to the others: the limits still sum to the cap, so a returning sun
/// cannot pass it, and a shaded inverter costs the others nothing).
pub fn cap_rule(site_rule: CurtailmentFulfilment) -> CurtailmentFulfilment {
    match site_rule {
        CurtailmentFulfilment::Priority => CurtailmentFulfilment::Priority,
        CurtailmentFulfilment::Proportional | CurtailmentFulfilment::Dynamic => {
            CurtailmentFulfilment::Dynamic
        }
    }
}

impl StoragePlan {
    /// The power, W; `None` when released.
    pub fn power_w(self) -> Option<f64> {
        match self {
            StoragePlan::Release => None,
            StoragePlan::Power(p) => Some(p),
        }
    }
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
    /// Sum over the site's meters (+ import), read at `ts_ms` (the oldest); it
    /// may show the power of up to `report_lag_ms` before that.
    Fresh {
        grid_w: f64,
        ts_ms: i64,
        report_lag_ms: i64,
    },
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
    /// The latest reading of each commanded device (batteries, then
    /// inverters): when it was taken and its power, W (+ discharge and
    /// production); `None` while it is offline.
    pub readings: Vec<Option<(i64, f64)>>,
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
    /// The longest the load estimate stays frozen while the site keeps
    /// changing (a device that stopped answering must not freeze it).
    pub settle_ms: i64,
}

/// What the loop remembers between ticks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopState {
    pub export_held: bool,
    pub import_held: bool,
    /// The last trusted load estimate.
    pub load: Option<Load>,
    /// When the site-level outputs last changed.
    pub changed_at_ms: i64,
    /// When `load` was estimated.
    pub estimated_at_ms: i64,
    /// The storage power the loop set last tick (it overrode the plan).
    pub storage_w: Option<f64>,
    /// What the released storage did on its own before the loop took it over.
    pub auto_w: Option<f64>,
    /// Since when the storage target and the production cap stand.
    pub storage_since_ms: i64,
    pub cap_since_ms: i64,
    /// Charging beyond what the export needs, held while the production sits
    /// at its cap so that it can show what it could give (storage first).
    pub headroom_w: f64,
    /// The site-level outputs of last tick (`None` = released), for change detection.
    pub last_storage: Option<Option<f64>>,
    pub last_production: Option<Option<f64>>,
    /// The devices' readings by the time they were taken, for the load estimate.
    pub supply: History,
    pub at_ms: i64,
}

/// What the loop is doing, for the steering state and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoopMode {
    /// No meter, or the loop is turned off: limits clamp only what the agent commands.
    #[default]
    Off,
    /// Within the limits: the plan passes (with the production capped in advance).
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

/// The storage as the plan leaves it, at its worst for each limit: (for the
/// export, for the import), W, + discharge. Released storage runs its own
/// logic: measured while it does; once the loop took it over, what it did
/// before (discharging for the export, charging for the import).
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

/// One tick of the loop with a fresh meter.
pub fn hold(
    settings: &LoopSettings,
    limits: &GridLimits,
    plan: &SitePlan,
    inverters: &[InverterView],
    s: &Sensed,
    prev: &LoopState,
) -> Held {
    let Meter::Fresh {
        grid_w,
        ts_ms: meter_ts,
        report_lag_ms,
    } = s.meter
    else {
        return meter_lost(
            cap_rule(settings.curtailment),
            limits,
            plan,
            inverters,
            s,
            prev,
        );
    };
    let rule = cap_rule(settings.curtailment);
    let pv_now = pv::measured(inverters);
    let rated = pv::rated(inverters);
    let supply_now = pv_now + s.battery_w;
    let mut supply = prev.supply.clone();
    supply.record(&s.readings);
    // When the oldest of the devices' readings was taken.
    let read_at = s
        .readings
        .iter()
        .flatten()
        .map(|(t, _)| *t)
        .min()
        .unwrap_or(s.now_ms);

    // The load: only from a meter reading that shows power from after the
    // last change and device readings taken after it (or, after a while,
    // whatever there is: a device that stopped answering must not freeze
    // it); the devices' own readings carry the change in the meantime. The
    // reading is paired with the supply over the span it may show.
    let db = deadband(limits);
    let shows_from = meter_ts - report_lag_ms;
    let fresh = shows_from > prev.changed_at_ms && s.readings_from_ms > prev.changed_at_ms;
    let overdue = s.now_ms - prev.estimated_at_ms > settings.settle_ms;
    let (load, estimated_at_ms) = match prev.load {
        Some(l) if !fresh && !overdue => (l, prev.estimated_at_ms),
        _ => (
            estimate::from_reading(
                grid_w,
                &supply,
                &s.readings,
                (shows_from, meter_ts),
                supply_now,
            ),
            s.now_ms,
        ),
    };

    let (plan_x, plan_i, auto_w) = planned_storage(plan.storage, s, prev);
    let plan_cap = plan.production.limit_w().map(|l| l.max(0.0));
    let last_cap = prev.last_production.flatten();
    let margin = (0.02 * rated).max(100.0);
    let dt_s = ((s.now_ms - prev.at_ms) as f64 / 1000.0).clamp(0.0, 5.0);
    let aim_x = limits.export.map_or(0.0, aim);
    let budget = limits.export.map(|_| load.low_w + aim_x);
    let floor = limits.import.map(|i| load.high_w - aim(i));

    // The production sits at the loop's own cap (not the plan's), and that
    // cap was where the storage target puts it (not lower while the storage
    // was still on its way there): the production could give more.
    let at_cap = last_cap.is_some_and(|c| {
        c < rated - margin && plan_cap.is_none_or(|p| c < p - margin) && pv::at_limit(inverters)
    });

    // Export: the storage target, then (below) the cap it leaves room for.
    let mut storage = plan_x;
    let mut headroom = 0.0;
    if let Some(budget) = budget {
        // What the storage must take: from the middle of the load's range (the
        // cap below keeps to its low end, so this only decides how much of the
        // production the storage takes, not whether the limit holds).
        let need = pv_now + plan_x - (load.mid_w() + aim_x);
        let target = match settings.export_order {
            ExportOrder::StorageFirst => {
                let prev_target = prev.storage_w.unwrap_or(plan_x);
                let steady = last_cap.is_some_and(|c| c >= budget - prev_target - margin);
                headroom = if s.charge_cap_w <= 1.0 {
                    0.0
                } else if at_cap && steady {
                    (0.05 * rated).max(2.0 * db)
                } else if at_cap || last_cap.is_some_and(|c| pv_now >= c - prev.headroom_w - margin)
                {
                    prev.headroom_w
                } else {
                    0.0
                };
                let want = plan_x - need.max(0.0) - headroom;
                // Never less charging while the production is held at its cap.
                if at_cap {
                    want.min(prev_target)
                } else {
                    want
                }
            }
            ExportOrder::CurtailFirst => {
                // A released storage discharging into an export past its aim
                // gives that discharge up first: it keeps its energy.
                let cut = match plan.storage {
                    StoragePlan::Release => need.clamp(0.0, plan_x.max(0.0)),
                    StoragePlan::Power(_) => 0.0,
                };
                (plan_x - cut).min(budget)
            }
        };
        // A released storage that discharges while the production sits at
        // the loop's cap stops: the production takes the load over (as the
        // storage gives way, not before), and the storage keeps its energy.
        let target = match plan.storage {
            StoragePlan::Release if at_cap && plan_x > db => target.min(0.0),
            _ => target,
        };
        let target = target.max(-s.charge_cap_w).min(plan_x);
        // Take the storage over only for a move worth a write.
        if prev.storage_w.is_some() || target < plan_x - db {
            storage = target;
        }
    }
    let export_storage = storage < plan_x - 1.0;

    // Import: charge less (maximize grid import), let the production run
    // (never past what the export allows), then discharge.
    let mut lifted = false;
    let mut short_i = 0.0;
    let mut import_held = false;
    let mut storage_i = if export_storage { storage } else { plan_i };
    let provisional_cap = budget
        .map(|b| b - storage)
        .map(|c| plan_cap.map_or(c, |p| p.min(c)));
    let cap_now = if budget.is_some() {
        provisional_cap
    } else {
        plan_cap
    };
    if let (Some(floor), Some(i)) = (floor, limits.import) {
        let pv_expected = pv::expected(rule, inverters, cap_now);
        let deficit = floor - (pv_expected + storage_i);
        let threshold = if prev.import_held {
            -tolerance_w(i.w)
        } else {
            0.0
        };
        if deficit > threshold {
            import_held = true;
            let mut need = deficit.max(0.0);
            let raise = |storage: &mut f64, need: &mut f64, ceiling: f64| {
                let to = (*storage + *need).min(ceiling.max(*storage));
                *need -= to - *storage;
                *storage = to;
            };
            if plan.import_order == ImportOrder::ChargeLessFirst {
                raise(&mut storage_i, &mut need, 0.0);
            }
            // What the export allows the production (released without one).
            let lift_to = budget.map(|b| b - storage_i);
            let capped = match (cap_now, lift_to) {
                (Some(c), Some(l)) => c < l - 1.0,
                (Some(_), None) => true,
                (None, _) => false,
            };
            // Lifted last tick: kept lifted while the import is held.
            let lifted_before = prev.import_held
                && match (last_cap, cap_now) {
                    (None, Some(_)) => true,
                    (Some(l), Some(c)) => l > c + 1.0,
                    _ => false,
                };
            if capped && (need > 0.0 || lifted_before) {
                lifted = true;
                let gain = pv::expected(rule, inverters, lift_to) - pv_expected;
                need = (need - gain.max(0.0)).max(0.0);
            }
            raise(&mut storage_i, &mut need, s.discharge_cap_w);
            short_i = need;
            storage = storage_i;
        }
    }

    // Deadband and ramp on the storage the loop sets; a storage handed back
    // moves towards the plan at the ramp and is released once there.
    let moved = export_storage || (import_held && (storage - plan_i).abs() > 1.0);
    // What the plan itself does: its power, or what the released storage
    // did on its own.
    let plan_own = match plan.storage {
        StoragePlan::Power(_) => plan_x,
        StoragePlan::Release => auto_w,
    };
    let mut storage_taken = moved || prev.storage_w.is_some();
    if storage_taken {
        let to = if moved { storage } else { plan_own };
        storage = settle(
            prev.storage_w,
            to,
            if import_held { -1.0 } else { 1.0 },
            db,
            settings.storage_ramp_w_per_s * dt_s,
        )
        .clamp(-s.charge_cap_w, s.discharge_cap_w);
        // Handed back once within a deadband of the plan; but not while the
        // site imports and the production is still coming up to a cap that
        // rose: a released storage would cover the import on its own and add
        // to the production as it comes.
        let rising = last_cap.is_some_and(|c| pv_now < c - margin)
            && s.now_ms - prev.cap_since_ms < settings.settle_ms;
        let hold_on = budget.is_some() && grid_w > db && rising;
        if !moved && !hold_on && (storage - plan_own).abs() < db.max(1.0) {
            storage = plan_own;
            storage_taken = false;
        }
    }

    // The cap: what the site can take with every device at its worst while it
    // moves. The storage is not let go faster than the production comes down.
    let mut cap = plan_cap;
    let mut short_x = 0.0;
    if let Some(budget) = budget {
        if storage_taken && storage > s.battery_w {
            // Less charging than now: only as far as the production, at its
            // worst while it comes down to the cap this leaves, gives room.
            let pv_worst = pv::worst(rule, inverters, Some(budget - storage));
            storage = storage.min((budget - pv_worst).max(s.battery_w));
        }
        // The storage as it is now or where it goes, whichever gives more
        // (a released storage: as it is; it may give way only in seconds).
        let storage_worst = match (storage_taken, plan.storage) {
            (true, _) => storage.max(s.battery_w),
            (false, StoragePlan::Release) => s.battery_w.max(-s.charge_cap_w),
            (false, StoragePlan::Power(_)) => plan_x.max(s.battery_w),
        };
        let room = budget - storage_worst;
        if room < -1.0 && s.charge_cap_w + storage <= 1.0 {
            short_x = -room;
        }
        // Released when the site can take all the inverters could give.
        let may_release = plan_cap.is_none() || lifted;
        let released_before = prev.last_production == Some(None);
        let release =
            may_release && (room >= rated + 1.0 || (released_before && room >= rated - db));
        let c = if release {
            rated
        } else {
            let c = pv::cap_within(rule, inverters, room);
            if lifted {
                c
            } else {
                plan_cap.map_or(c, |p| p.min(c))
            }
        };
        let c = settle(
            last_cap,
            c,
            1.0,
            db,
            settings.production_ramp_w_per_s * dt_s,
        )
        .max(0.0);
        cap = (!release || c < rated - 1.0).then_some(c);
    } else if lifted {
        cap = None;
    }
    let production = match (cap, plan_cap) {
        (None, _) => ProductionPlan::Release,
        (Some(c), Some(p)) if !lifted && c >= p - 0.5 => plan.production,
        (Some(c), _) => ProductionPlan::Cap(c),
    };
    let storage_out = if storage_taken {
        StoragePlan::Power(storage)
    } else {
        plan.storage
    };
    // Since when the targets stand (a move of less than the deadband keeps them).
    let storage_since_ms = match (prev.storage_w, storage_out.power_w()) {
        (Some(p), Some(t)) if (p - t).abs() < db => prev.storage_since_ms,
        _ => s.now_ms,
    };
    let cap_since_ms = match (last_cap, production.limit_w()) {
        (Some(l), Some(c)) if (l - c).abs() < db => prev.cap_since_ms,
        _ => s.now_ms,
    };
    // What the devices are told: a correction towards safety that the devices
    // were given last tick and have not reached leads by what they still have
    // to go (they follow in seconds; devices that follow at once never see a
    // lead); the targets are kept.
    let storage_told = match storage_out {
        StoragePlan::Power(t) => {
            let ongoing = prev.storage_w.is_some_and(|p| (p - t).abs() < db)
                && read_at >= storage_since_ms + LEAD_AFTER_MS;
            let towards_safety = ongoing
                && if import_held {
                    t > s.battery_w + db
                } else {
                    t < s.battery_w - db
                };
            let led = if towards_safety {
                t + LEAD * (t - s.battery_w)
            } else {
                t
            };
            // (+ 0.0: never a negative zero on the wire.)
            StoragePlan::Power(led.clamp(-s.charge_cap_w, s.discharge_cap_w) + 0.0)
        }
        StoragePlan::Release => StoragePlan::Release,
    };
    let production_told = match production {
        ProductionPlan::Cap(c)
            if c < pv_now - db
                && last_cap.is_some_and(|l| (l - c).abs() < db)
                && read_at >= cap_since_ms + LEAD_AFTER_MS =>
        {
            ProductionPlan::Cap((c - LEAD * (pv_now - c)).max(0.0))
        }
        other => other,
    };

    let export_binding = (at_cap && cap.is_some()) || export_storage || short_x > 0.0;
    let export_held = !import_held && export_binding;
    let mode = if import_held {
        LoopMode::HoldingImport
    } else if export_held {
        LoopMode::HoldingExport
    } else {
        LoopMode::Free
    };
    let held_by = if import_held {
        limits.import
    } else {
        limits.export
    };
    let mut changes = Vec::new();
    if short_x > 1.0 {
        changes.push(Change {
            side: Side::Production,
            requested_w: plan_cap,
            applied_w: Some(0.0),
            reason: format!(
                "{}: cannot be held, {short_x:.0} W too much with the storage charging all it can and production at 0",
                describe(limits.export)
            ),
        });
    }
    if short_i > 1.0 {
        changes.push(Change {
            side: Side::Storage,
            requested_w: Some(plan_i),
            applied_w: Some(storage),
            reason: format!(
                "{}: cannot be held, {short_i:.0} W too much with the storage discharging all it can",
                describe(limits.import)
            ),
        });
    }
    if storage_out != plan.storage {
        changes.push(Change {
            side: Side::Storage,
            requested_w: plan.storage.power_w(),
            applied_w: Some(storage),
            reason: describe(held_by),
        });
    }
    if production != plan.production {
        let reason = if lifted {
            format!("{}: curtailment lifted", describe(limits.import))
        } else if export_binding {
            describe(limits.export)
        } else {
            format!(
                "{}: production capped in advance at what the site can take",
                describe(limits.export)
            )
        };
        changes.push(Change {
            side: Side::Production,
            requested_w: plan_cap,
            applied_w: production.limit_w(),
            reason,
        });
    }

    let now_storage = storage_out.power_w();
    let now_production = production.limit_w();
    let changed = outputs_moved(prev.last_storage, now_storage)
        || outputs_moved(prev.last_production, now_production);
    Held {
        storage: storage_told,
        production: production_told,
        mode,
        changes,
        state: LoopState {
            export_held,
            import_held,
            load: Some(load),
            changed_at_ms: if changed {
                s.now_ms
            } else {
                prev.changed_at_ms
            },
            estimated_at_ms,
            storage_w: storage_taken.then_some(storage),
            auto_w: (plan.storage == StoragePlan::Release).then_some(auto_w),
            storage_since_ms,
            cap_since_ms,
            headroom_w: headroom,
            last_storage: Some(now_storage),
            last_production: Some(now_production),
            supply,
            at_ms: s.now_ms,
        },
    }
}

/// Whether a site-level output moved since last tick.
fn outputs_moved(before: Option<Option<f64>>, now: Option<f64>) -> bool {
    match (before, now) {
        (Some(Some(x)), Some(y)) => (x - y).abs() > 1.0,
        (Some(None), None) => false,
        _ => true,
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
/// most `maxImport` (as if nothing were produced). A storage that was charging
/// keeps charging what the production has not yet given back.
pub fn meter_lost(
    rule: CurtailmentFulfilment,
    limits: &GridLimits,
    plan: &SitePlan,
    inverters: &[InverterView],
    s: &Sensed,
    prev: &LoopState,
) -> Held {
    let Meter::Lost(why) = &s.meter else {
        unreachable!("meter_lost is only called without a fresh meter")
    };
    let mut changes = Vec::new();
    let requested = plan.storage.power_w();
    let plan_limit = plan.production.limit_w();
    let production = match (limits.export, plan_limit) {
        (Some(x), Some(l)) if l > x.w => ProductionPlan::Cap(x.w),
        (Some(x), None) => ProductionPlan::Cap(x.w),
        _ => plan.production,
    };
    let mut storage = requested.unwrap_or(0.0).min(0.0);
    if let Some(x) = limits.export {
        // Until the inverters are down at the limit, the storage takes the rest.
        let pv_worst = pv::worst(rule, inverters, production.limit_w());
        storage = storage.min(x.w - pv_worst).max(-s.charge_cap_w).min(0.0);
    }
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
    let mut supply = prev.supply.clone();
    supply.record(&s.readings);
    Held {
        storage: StoragePlan::Power(storage),
        production,
        mode: LoopMode::MeterLost,
        changes,
        state: LoopState {
            at_ms: s.now_ms,
            changed_at_ms: s.now_ms,
            last_storage: Some(Some(storage)),
            last_production: Some(production.limit_w()),
            storage_w: Some(storage),
            supply,
            ..LoopState::default()
        },
    }
}

#[cfg(test)]
mod plant;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transitions;
