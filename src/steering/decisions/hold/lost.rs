//! The grid loop without a meter reading: the safe state, which cannot export
//! more than `maxExport` even with no load, and never discharges the storage.

use super::super::alloc::InverterView;
use super::super::limits::GridLimits;
use super::{describe, pv};
use super::{
    Change, Held, LoopMode, LoopState, Meter, ProductionPlan, Sensed, Side, SitePlan, StoragePlan,
};
use crate::config::CurtailmentFulfilment;

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
        // (+ 0.0: never a negative zero on the wire.)
        storage: StoragePlan::Power(storage + 0.0),
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
