//! The import side of a tick: charge less (maximize grid import), let the
//! production run as far as the export allows, then discharge within the
//! storage's limits and SoC floor. Pure.

use super::tick::Tick;
use super::{pv, tolerance_w, ImportOrder};

/// What the import limit makes of the storage and the production.
pub(super) struct ImportHold {
    pub held: bool,
    /// The production's cap was lifted to what the export allows.
    pub lifted: bool,
    /// The storage target (unchanged unless held).
    pub storage: f64,
    /// What the import limit cannot have with the storage discharging all
    /// it can, W.
    pub short_w: f64,
}

/// `storage`: the target so far; `taken`: the export set it.
pub(super) fn import_hold(t: &Tick, storage: f64, taken: bool) -> ImportHold {
    let none = ImportHold {
        held: false,
        lifted: false,
        storage,
        short_w: 0.0,
    };
    let (Some(floor), Some(limit)) = (t.floor, t.limits.import) else {
        return none;
    };
    let (s, prev) = (t.s, t.prev);
    let mut storage_i = if taken { storage } else { t.plan_i };
    let cap_now = match t.budget {
        Some(b) => {
            let c = b - storage;
            Some(t.plan_cap.map_or(c, |p| p.min(c)))
        }
        None => t.plan_cap,
    };
    let pv_expected = pv::expected(t.rule, t.inverters, cap_now);
    let deficit = floor - (pv_expected + storage_i);
    let threshold = if prev.import_held {
        -tolerance_w(limit.w)
    } else {
        0.0
    };
    if deficit <= threshold {
        return none;
    }
    let mut need = deficit.max(0.0);
    let raise = |storage: &mut f64, need: &mut f64, ceiling: f64| {
        let to = (*storage + *need).min(ceiling.max(*storage));
        *need -= to - *storage;
        *storage = to;
    };
    if t.plan.import_order == ImportOrder::ChargeLessFirst {
        raise(&mut storage_i, &mut need, 0.0);
    }
    // What the export allows the production (released without one).
    let lift_to = t.budget.map(|b| b - storage_i);
    let capped = match (cap_now, lift_to) {
        (Some(c), Some(l)) => c < l - 1.0,
        (Some(_), None) => true,
        (None, _) => false,
    };
    // Lifted last tick: kept lifted while the import is held.
    let lifted_before = prev.import_held
        && match (t.last_cap, cap_now) {
            (None, Some(_)) => true,
            (Some(l), Some(c)) => l > c + 1.0,
            _ => false,
        };
    let lifted = capped && (need > 0.0 || lifted_before);
    if lifted {
        let gain = pv::expected(t.rule, t.inverters, lift_to) - pv_expected;
        need = (need - gain.max(0.0)).max(0.0);
    }
    raise(&mut storage_i, &mut need, s.discharge_cap_w);
    ImportHold {
        held: true,
        lifted,
        storage: storage_i,
        short_w: need,
    }
}
