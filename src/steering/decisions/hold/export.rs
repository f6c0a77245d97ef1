//! The export side of a tick: how much the storage takes (storage first or
//! curtail first), and the production cap the site can take with every device
//! counted at its worst while it moves. Pure.

use super::pv;
use super::tick::Tick;
use super::StoragePlan;
use crate::config::ExportOrder;

/// The storage target the export wants (`plan_x` where it leaves the storage
/// alone) and the headroom held for it, W.
pub(super) fn storage_target(t: &Tick) -> (f64, f64) {
    let Some(budget) = t.budget else {
        return (t.plan_x, 0.0);
    };
    let (s, prev) = (t.s, t.prev);
    // What the storage must take: from the middle of the load's range (the cap
    // keeps to its low end, so this only decides how much of the production
    // the storage takes, not whether the limit holds).
    let need = t.pv_now + t.plan_x - (t.load.mid_w() + t.aim_x);
    let mut headroom = 0.0;
    let target = match t.settings.export_order {
        ExportOrder::StorageFirst => {
            let prev_target = prev.storage_w.unwrap_or(t.plan_x);
            // The cap was where the storage target puts it (not lower while
            // the storage was on its way there).
            let steady = t
                .last_cap
                .is_some_and(|c| c >= budget - prev_target - t.margin);
            // While the production sits at the cap, the storage takes a
            // little more, so the inverters can show what they could give.
            headroom = if s.charge_cap_w <= 1.0 {
                0.0
            } else if t.at_cap && steady {
                (0.05 * t.rated).max(2.0 * t.db)
            } else if t.at_cap
                || t.last_cap
                    .is_some_and(|c| t.pv_now >= c - prev.headroom_w - t.margin)
            {
                prev.headroom_w
            } else {
                0.0
            };
            let want = t.plan_x - need.max(0.0) - headroom;
            // Never less charging while the production is held at its cap.
            if t.at_cap {
                want.min(prev_target)
            } else {
                want
            }
        }
        ExportOrder::CurtailFirst => {
            // A released storage discharging into an export past its aim gives
            // that discharge up first: it keeps its energy.
            let cut = match t.plan.storage {
                StoragePlan::Release => need.clamp(0.0, t.plan_x.max(0.0)),
                StoragePlan::Power(_) => 0.0,
            };
            (t.plan_x - cut).min(budget)
        }
    };
    // A released storage that discharges while the production sits at the
    // loop's cap stops: the production takes the load over (as the storage
    // gives way, not before), and the storage keeps its energy.
    let target = match t.plan.storage {
        StoragePlan::Release if t.at_cap && t.plan_x > t.db => target.min(0.0),
        _ => target,
    };
    let target = target.max(-s.charge_cap_w).min(t.plan_x);
    // Take the storage over only for a move worth a write.
    if prev.storage_w.is_some() || target < t.plan_x - t.db {
        (target, headroom)
    } else {
        (t.plan_x, headroom)
    }
}

/// The production cap and the storage it leaves room for.
pub(super) struct Cap {
    /// `None`: released.
    pub cap: Option<f64>,
    /// The storage target, held back where it would let go faster than the
    /// production comes down.
    pub storage: f64,
    /// What the export limit cannot have even with the storage charging all
    /// it can and no production, W.
    pub short_w: f64,
    /// The cap rose this tick, and the ramp kept it below where it goes.
    pub on_way: bool,
}

/// The cap: what the site can take with every device at its worst while it
/// moves. A storage the loop lets go is not let go faster than the production
/// comes down, and the production is not let up before the storage takes it.
/// `headroom_w` of the storage's charging is there only so the inverters can
/// show what they could give (`storage_target`): it does not release them.
pub(super) fn cap(t: &Tick, mut storage: f64, taken: bool, lifted: bool, headroom_w: f64) -> Cap {
    let s = t.s;
    let Some(budget) = t.budget else {
        let cap = if lifted { None } else { t.plan_cap };
        return Cap {
            cap,
            storage,
            short_w: 0.0,
            on_way: false,
        };
    };
    if taken && storage > s.battery_w {
        // Less charging than now: only as far as the production, at its worst
        // while it comes down to the cap this leaves, gives room.
        let pv_worst = pv::worst(t.rule, t.inverters, Some(budget - storage));
        storage = storage.min((budget - pv_worst).max(s.battery_w));
    }
    // The storage as it is now or where it goes, whichever gives more (a
    // released storage: as it is, it may give way only in seconds; one handed
    // back this tick: as it discharged on its own before it was taken over).
    let storage_worst = match (taken, t.plan.storage) {
        (true, _) => storage.max(s.battery_w),
        (false, StoragePlan::Release) => s.battery_w.max(t.plan_x).max(-s.charge_cap_w),
        (false, StoragePlan::Power(_)) => t.plan_x.max(s.battery_w),
    };
    let room = budget - storage_worst;
    let short_w = if room < -1.0 && s.charge_cap_w + storage <= 1.0 {
        -room
    } else {
        0.0
    };
    // Released when the site can take all the inverters could give without
    // the headroom: a release that the headroom made would end as soon as the
    // headroom went with it (the production no longer at its cap), in a cycle
    // of release and cap, each a write to every inverter. Held instead, a cap
    // at or above what they give moves only as the room does.
    let may_release = t.plan_cap.is_none() || lifted;
    let released_before = t.prev.last_production == Some(None);
    let spare = room - headroom_w;
    let release =
        may_release && (spare >= t.rated + 1.0 || (released_before && spare >= t.rated - t.db));
    let c = if release {
        t.rated
    } else {
        let c = pv::cap_within(t.rule, t.inverters, room);
        match t.plan_cap {
            Some(p) if !lifted => p.min(c),
            _ => c,
        }
    };
    // The ramp (and the wait for a meter reading from after the last change)
    // is for moves away from a limit that can bind. Where the site can take
    // all the inverters could give, none can: the cap moves at once, so a
    // partner's raise of its curtailment is written on the evaluation its
    // change wakes, not a tick or a meter reading later. A cap lifted for the
    // import keeps the ramp: the storage's hand-back waits on the production
    // coming up to it (`hold.rs`, `hand_back`).
    let ramp = if !lifted && room >= t.rated + 1.0 {
        f64::INFINITY
    } else {
        t.settings.production_ramp_w_per_s * t.relax_dt_s
    };
    let want = c;
    // The deadband is for the loop's own cap; a plan's limit that binds is
    // followed as it is.
    let db = if t.plan_cap.is_some_and(|p| !lifted && want >= p - 0.5) {
        0.0
    } else {
        t.db
    };
    let c = super::settle(t.last_cap, c, 1.0, db, ramp).max(0.0);
    Cap {
        cap: (!release || c < t.rated - 1.0).then_some(c),
        storage,
        short_w,
        on_way: super::on_way(t.last_cap, c, want, 1.0),
    }
}
