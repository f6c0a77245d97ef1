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
//!   for the limit while it moves (`pv.rs`, `export.rs`): the storage is not
//!   let go faster than the production comes down, and the production not let
//!   up faster than the storage takes it.
//! - **A lead on slow corrections** (`tell.rs`).
//!
//! A tick in steps: what it works from (`tick.rs`), the export's storage
//! target (`export.rs`), the import (`import.rs`), the hand-back of a storage
//! the loop let go (here), the production cap (`export.rs`), what the devices
//! are told (`tell.rs`). Without a meter: `lost.rs`.
//!
//! Against oscillation: hysteresis before a hold is let go, a deadband on small
//! moves, and a ramp on moves away from a held limit; corrections towards
//! safety are never slowed.
//!
//! Pure: no clock, no live state, no I/O. The caller keeps [`LoopState`] from one
//! tick to the next.

mod estimate;
mod export;
mod import;
mod lost;
pub mod pv;
mod tell;
mod tick;
mod types;

pub use lost::meter_lost;
pub use pv::cap_rule;
pub use types::*;

use super::alloc::InverterView;
use super::limits::{GridLimits, Limit};
use crate::config::ExportOrder;
use tick::{Reading, Tick};

/// The steady band around a held limit: ±2 % of it, at least 500 W.
pub fn tolerance_w(limit_w: f64) -> f64 {
    (0.02 * limit_w.abs()).max(500.0)
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
        ts_ms,
        report_lag_ms,
    } = s.meter
    else {
        let rule = cap_rule(settings.curtailment);
        return meter_lost(rule, limits, plan, inverters, s, prev);
    };
    let reading = Reading {
        grid_w,
        ts_ms,
        report_lag_ms,
    };
    let t = Tick::new(settings, limits, plan, inverters, s, prev, reading);

    let (export_target, headroom) = export::storage_target(&t);
    let export_storage = export_target < t.plan_x - 1.0;
    let import = import::import_hold(&t, export_target, export_storage);
    let (mut storage, storage_taken, storage_on_way) = hand_back(&t, &import, export_storage);
    let cap = export::cap(&t, storage, storage_taken, import.lifted, headroom);
    storage = cap.storage;

    let production = match (cap.cap, t.plan_cap) {
        (None, _) => ProductionPlan::Release,
        (Some(c), Some(p)) if !import.lifted && c >= p - 0.5 => plan.production,
        (Some(c), _) => ProductionPlan::Cap(c),
    };
    let storage_out = if storage_taken {
        StoragePlan::Power(storage)
    } else {
        plan.storage
    };
    let since = tell::since(&t, storage_out, production);
    let told = tell::told(&t, (storage_out, production), since, import.held);

    let export_binding = (t.at_cap && cap.cap.is_some()) || export_storage || cap.short_w > 0.0;
    let export_held = !import.held && export_binding;
    let mode = if import.held {
        LoopMode::HoldingImport
    } else if export_held {
        LoopMode::HoldingExport
    } else {
        LoopMode::Free
    };
    let changes = changes(
        &t,
        (storage_out, production),
        storage,
        &import,
        (export_binding, cap.short_w),
    );
    let (now_storage, now_production) = (storage_out.power_w(), production.limit_w());
    let changed = outputs_moved(prev.last_storage, now_storage)
        || outputs_moved(prev.last_production, now_production);
    Held {
        storage: told.0,
        production: told.1,
        mode,
        changes,
        state: LoopState {
            export_held,
            import_held: import.held,
            load: Some(t.load),
            changed_at_ms: if changed {
                s.now_ms
            } else {
                prev.changed_at_ms
            },
            estimated_at_ms: t.estimated_at_ms,
            counted: t.counted.clone(),
            storage_w: storage_taken.then_some(storage),
            auto_w: (plan.storage == StoragePlan::Release).then_some(t.auto_w),
            storage_since_ms: since.0,
            cap_since_ms: since.1,
            headroom_w: headroom,
            last_storage: Some(now_storage),
            last_production: Some(now_production),
            supply: t.supply.clone(),
            relaxed_at_ms: if cap.on_way || storage_on_way {
                Some(s.now_ms)
            } else if changed {
                None
            } else {
                prev.relaxed_at_ms
            },
            at_ms: s.now_ms,
        },
    }
}

/// Whether an output moved away from the limit it holds (`relax`: +1 up, −1
/// down) this tick and the ramp kept it short of `want`: the loop is on its
/// way, and its next move continues the ramp from now.
fn on_way(last: Option<f64>, now: f64, want: f64, relax: f64) -> bool {
    last.is_some_and(|l| (now - l) * relax > 1.0 && (want - now) * relax > 1.0)
}

/// The storage the loop sets, after the deadband and the ramp, whether it
/// sets one, and whether the ramp kept it short of where it goes: a storage
/// handed back moves towards the plan at the ramp and is released once within
/// a deadband of it; but not while the site imports and the production is
/// still coming up to a cap that rose (a released storage would cover the
/// import on its own and add to the production as it comes), nor where
/// letting it go would cut the production ([`lets_go`]).
fn hand_back(t: &Tick, import: &import::ImportHold, export_storage: bool) -> (f64, bool, bool) {
    let (s, prev) = (t.s, t.prev);
    let storage = import.storage;
    let moved = export_storage || (import.held && (storage - t.plan_i).abs() > 1.0);
    if !moved && prev.storage_w.is_none() {
        return (storage, false, false);
    }
    let to = if moved { storage } else { t.plan_own };
    let relax = if import.held { -1.0 } else { 1.0 };
    let ramp = t.settings.storage_ramp_w_per_s * t.relax_dt_s;
    let storage =
        settle(prev.storage_w, to, relax, t.db, ramp).clamp(-s.charge_cap_w, s.discharge_cap_w);
    let on_way = on_way(prev.storage_w, storage, to, relax);
    let rising = t.last_cap.is_some_and(|c| t.pv_now < c - t.margin)
        && s.now_ms - prev.cap_since_ms < t.settings.settle_ms;
    let hold_on = t.budget.is_some() && t.grid_w > t.db && rising;
    if !moved
        && !hold_on
        && (storage - t.plan_own).abs() < t.db.max(1.0)
        && lets_go(t, storage, import.lifted)
    {
        (t.plan_own, false, false)
    } else {
        (storage, true, on_way)
    }
}

/// Whether a storage the loop holds at `storage` may be let go: the cap that
/// makes room for it released (`export::cap`) leaves the production, within a
/// deadband, what the cap for it held leaves. A released storage counts at its
/// worst for the export (its discharge, not its charging: it may stop), and
/// the largest cap whose production's worst fits what is left can be far lower
/// (an inverter whose limit stays above what it produces counts at that
/// limit). Let go there, the storage would be let go faster than the
/// production comes down: the cap would fall at once and the site would import
/// what the load needs (2 kW over a zero import limit, in a cycle of hand-back,
/// cut and import hold). Held, `export::cap` keeps it where the production
/// leaves room.
fn lets_go(t: &Tick, storage: f64, lifted: bool) -> bool {
    let gives = |c: export::Cap| pv::expected(t.rule, t.inverters, c.cap);
    let released = gives(export::cap(t, t.plan_own, false, lifted, 0.0));
    released >= gives(export::cap(t, storage, true, lifted, 0.0)) - t.db
}

/// What the loop changed of the plan, with the reasons the steering state
/// shows.
fn changes(
    t: &Tick,
    (storage_out, production): (StoragePlan, ProductionPlan),
    storage: f64,
    import: &import::ImportHold,
    (export_binding, short_x): (bool, f64),
) -> Vec<Change> {
    let (limits, plan) = (t.limits, t.plan);
    let mut changes = Vec::new();
    if short_x > 1.0 {
        changes.push(Change {
            side: Side::Production,
            requested_w: t.plan_cap,
            applied_w: Some(0.0),
            reason: format!(
                "{}: cannot be held, {short_x:.0} W too much with the storage charging all it can and production at 0",
                describe(limits.export)
            ),
        });
    }
    if import.short_w > 1.0 {
        changes.push(Change {
            side: Side::Storage,
            requested_w: Some(t.plan_i),
            applied_w: Some(storage),
            reason: format!(
                "{}: cannot be held, {:.0} W too much with the storage discharging all it can",
                describe(limits.import),
                import.short_w
            ),
        });
    }
    // The storage charges all it can: then it is that, beside the export
    // limit, which caps the production.
    let charging_all = t.s.charge_cap_w > 1.0 && storage <= -t.s.charge_cap_w + t.db.max(1.0);
    if storage_out != plan.storage {
        let reason = if import.held {
            describe(limits.import)
        } else if t.settings.export_order == ExportOrder::StorageFirst && storage < t.plan_i - 1.0 {
            storage_first_reason(plan.storage, storage, limits.export, charging_all)
        } else {
            describe(limits.export)
        };
        changes.push(Change {
            side: Side::Storage,
            requested_w: plan.storage.power_w(),
            applied_w: Some(storage),
            reason,
        });
    }
    if production != plan.production {
        let reason = if import.lifted {
            format!("{}: curtailment lifted", describe(limits.import))
        } else if export_binding && charging_all {
            format!(
                "{}: production capped, the storage charging all it can",
                describe(limits.export)
            )
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
            requested_w: t.plan_cap,
            applied_w: production.limit_w(),
            reason,
        });
    }
    changes
}

/// Why the storage charges more (or discharges less) than the plan asks
/// under storage first: the production the export limit leaves goes into
/// it, or its discharge gives way to the production. Said as such, so that
/// a partner sees why its request is not what the batteries do.
fn storage_first_reason(
    asked: StoragePlan,
    applied: f64,
    export: Option<Limit>,
    charging_all: bool,
) -> String {
    let what = match asked {
        StoragePlan::Power(w) if w < 0.0 => format!("charging more than the {:.0} W asked", -w),
        StoragePlan::Power(w) if applied < -1.0 => {
            format!("charging instead of the {w:.0} W discharge asked")
        }
        StoragePlan::Power(w) => format!("discharging less than the {w:.0} W asked"),
        StoragePlan::Release if applied < -1.0 => "charging".to_string(),
        StoragePlan::Release => "discharging less than it would".to_string(),
    };
    let all = if charging_all { ", all it can" } else { "" };
    let why = if applied < -1.0 {
        "to take the production"
    } else {
        "so that the site can take the production"
    };
    format!(
        "storage first: {what}{all}, {why} {} leaves",
        describe(export)
    )
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

/// Moves smaller than half the tightest tolerance are not worth a write: the
/// band scales with the limit (a 1 MW limit moves in steps of 10 kW, not of
/// the meter's noise), and with the aim half a tolerance inside the limit, a
/// site held within it never passes the limit on a move it leaves unwritten.
/// Without a limit (nothing to hold), 500 W.
pub fn deadband(limits: &GridLimits) -> f64 {
    let db = [limits.export, limits.import]
        .into_iter()
        .flatten()
        .map(|l| 0.5 * tolerance_w(l.w))
        .fold(f64::INFINITY, f64::min);
    if db.is_finite() {
        db
    } else {
        500.0
    }
}

/// The new output given the last one: unchanged within the deadband; a move in
/// the `relax` direction (+1: up, −1: down) at most `ramp` (none with a ramp
/// of 0); a move the other way (towards safety) at once.
fn settle(last: Option<f64>, new: f64, relax: f64, deadband: f64, ramp: f64) -> f64 {
    let Some(last) = last else { return new };
    let d = new - last;
    if d.abs() < deadband {
        return last;
    }
    if d * relax > 0.0 && ramp <= 0.0 {
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

#[cfg(test)]
mod tests;
