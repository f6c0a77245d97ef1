//! The grid loop without a meter reading: the safe state, which cannot export
//! more than `maxExport` even with no load, nor charge more than `maxImport`,
//! and leaves alone what cannot break either (a site whose inverters and
//! storage together stay within the limits is not touched). Pure.

use super::super::alloc::InverterView;
use super::super::limits::GridLimits;
use super::{describe, pv};
use super::{
    Change, Held, LoopMode, LoopState, Meter, ProductionPlan, Sensed, Side, SitePlan, StoragePlan,
};
use crate::config::CurtailmentFulfilment;

/// The safe state without a meter reading, assuming the site has no load and
/// every inverter may give its rating:
/// - production at most `maxExport`, where the inverters' ratings add up to
///   more;
/// - a storage discharge only as far as the export limit leaves room beside
///   what the inverters may give (an inverter that does not answer counts at
///   its rating); a storage that was charging keeps charging what the
///   production has not yet given back;
/// - charging at most `maxImport` (as if nothing were produced);
/// - a released storage stays released when all it may do fits both limits,
///   else it is set to what the above allows (idle, or charging).
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
    // Every inverter's rating, answering or not.
    let rated: f64 = inverters.iter().map(|i| i.rated_w.max(0.0)).sum();
    let plan_limit = plan.production.limit_w();
    let production = match (limits.export, plan_limit) {
        (Some(x), _) if rated <= x.w => plan.production,
        (Some(x), Some(l)) if l > x.w => ProductionPlan::Cap(x.w),
        (Some(x), None) => ProductionPlan::Cap(x.w),
        _ => plan.production,
    };
    // What the export limit leaves the storage: negative while the inverters
    // are still above it (the storage takes the rest until they are down).
    let room = limits.export.map(|x| {
        let silent: f64 = inverters
            .iter()
            .filter(|i| i.measured_w.is_none())
            .map(|i| i.rated_w.max(0.0))
            .sum();
        x.w - pv::worst(rule, inverters, production.limit_w()) - silent
    });
    let discharge_fits = room.is_none_or(|r| s.discharge_cap_w <= r);
    let charge_fits = limits.import.is_none_or(|i| s.charge_cap_w <= i.w);
    let requested = plan.storage.power_w();
    let storage = match requested {
        None if discharge_fits && charge_fits => None,
        _ => {
            let mut w = requested.unwrap_or(0.0);
            if let Some(r) = room {
                // At most the room (a charge where it is negative), but no
                // more charge than the batteries take.
                w = w.min(r).max(-s.charge_cap_w.max(0.0));
            }
            if let Some(i) = limits.import {
                w = w.max(-i.w);
            }
            // (+ 0.0: never a negative zero on the wire.)
            Some(w + 0.0)
        }
    };

    let mut changes = Vec::new();
    if requested != storage {
        changes.push(Change {
            side: Side::Storage,
            requested_w: requested,
            applied_w: storage,
            reason: format!(
                "grid meter lost ({why}): discharge only within {} with every inverter at its rating, charging within maxImport",
                describe(limits.export)
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
        storage: storage.map_or(StoragePlan::Release, StoragePlan::Power),
        production,
        mode: LoopMode::MeterLost,
        changes,
        state: LoopState {
            at_ms: s.now_ms,
            changed_at_ms: s.now_ms,
            last_storage: Some(storage),
            last_production: Some(production.limit_w()),
            storage_w: storage,
            supply,
            ..LoopState::default()
        },
    }
}
