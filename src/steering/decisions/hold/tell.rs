//! What the devices are told: the loop's targets, with a lead on a correction
//! towards safety that the devices were given and have not reached. A device
//! that follows with a lag then gets there in about half the time; the lead
//! fades as it arrives, and a device that follows at once never sees one.
//! Pure.

use super::tick::Tick;
use super::{ProductionPlan, StoragePlan};

/// The devices are told the target plus this share of what they still have
/// to go.
const LEAD: f64 = 2.0;

/// A lead only once the devices' readings were taken this long after the
/// target was set: a device that follows at once has arrived by then.
const LEAD_AFTER_MS: i64 = 1000;

/// Since when the targets stand (a move of less than the deadband keeps
/// them): (storage, production), epoch ms.
pub(super) fn since(t: &Tick, storage: StoragePlan, production: ProductionPlan) -> (i64, i64) {
    let stands = |before: Option<f64>, now: Option<f64>, since: i64| match (before, now) {
        (Some(b), Some(n)) if (b - n).abs() < t.db => since,
        _ => t.s.now_ms,
    };
    (
        stands(t.prev.storage_w, storage.power_w(), t.prev.storage_since_ms),
        stands(t.last_cap, production.limit_w(), t.prev.cap_since_ms),
    )
}

/// The commands for the targets; `import_held` says which way is safety for
/// the storage.
pub(super) fn told(
    t: &Tick,
    (storage, production): (StoragePlan, ProductionPlan),
    (storage_since, cap_since): (i64, i64),
    import_held: bool,
) -> (StoragePlan, ProductionPlan) {
    let s = t.s;
    let storage = match storage {
        StoragePlan::Power(target) => {
            let ongoing = t.prev.storage_w.is_some_and(|p| (p - target).abs() < t.db)
                && t.read_at >= storage_since + LEAD_AFTER_MS;
            let towards_safety = ongoing
                && if import_held {
                    target > s.battery_w + t.db
                } else {
                    target < s.battery_w - t.db
                };
            let led = if towards_safety {
                target + LEAD * (target - s.battery_w)
            } else {
                target
            };
            // (+ 0.0: never a negative zero on the wire.)
            StoragePlan::Power(led.clamp(-s.charge_cap_w, s.discharge_cap_w) + 0.0)
        }
        StoragePlan::Release => StoragePlan::Release,
    };
    let production = match production {
        ProductionPlan::Cap(c)
            if c < t.pv_now - t.db
                && t.last_cap.is_some_and(|l| (l - c).abs() < t.db)
                && t.read_at >= cap_since + LEAD_AFTER_MS =>
        {
            ProductionPlan::Cap((c - LEAD * (t.pv_now - c)).max(0.0))
        }
        other => other,
    };
    (storage, production)
}
