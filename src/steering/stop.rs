//! What an actuator does when the agent stops cleanly (SIGTERM, SIGINT): whether
//! its device may still be steered, and the release it is told then.
//!
//! A stopped agent holds nothing, so every device it may have left steered is
//! released, whatever the site's fallback (an `idle` fallback is a setpoint
//! too) and whether or not the device has a revert timer of its own: those
//! timers are the backstop for an agent that dies, not for one that stops. A
//! device is known released only when its last write was a release that was
//! read back as written (and no write was under way at the stop), or when
//! nothing was written in this run and the store says no earlier run left it
//! steered; anything else counts as steered.
//!
//! Pure: no I/O and no clock. The actuator runs the release (`actuator/release.rs`),
//! `stop_signal.rs` asks for it, and the agent waits at most
//! [`RELEASE_BOUND`] for it before the bus tasks stop.

use std::time::Duration;

use super::decide::Command;
use super::report::{Desired, Last};
use super::value::Component;
use crate::model::DeviceType;

/// How long a clean stop waits for the devices' releases, all together, before
/// the bus tasks stop. A device that has not taken its release by then stays
/// as it is (logged); the rest of the shutdown does not wait for it.
pub const RELEASE_BOUND: Duration = Duration::from_secs(2);

/// Whether the device may hold a setpoint of the agent's when it stops.
/// `last` is the last write of this run (`None`: nothing written yet);
/// `interrupted`: a write was under way when the stop came (it may still
/// reach the device); `kept_steered` is the store's mark for the device
/// (`None`: not known, the device was never contacted or the store could
/// not be read).
pub fn may_be_steered(last: Option<&Last>, interrupted: bool, kept_steered: Option<bool>) -> bool {
    if interrupted {
        return true;
    }
    match last {
        // A setpoint, or anything not confirmed.
        Some(l) => l.command.is_control() || !l.ok,
        None => kept_steered != Some(false),
    }
}

/// The release a device of `device_type` gets at stop: its control handed
/// back, shown as the fallback (no component decided it), as at expiry.
pub fn release_at_stop(device_type: DeviceType) -> Desired {
    let (command, shown) = match device_type {
        DeviceType::Battery => (Command::EssRelease, Component::Ess),
        DeviceType::Inverter | DeviceType::Meter => {
            (Command::ProductionRelease, Component::Curtailment)
        }
    };
    Desired {
        command,
        component: None,
        shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(command: Command, ok: bool) -> Last {
        Last {
            writes: Vec::new(),
            command,
            at_ms: 0,
            ok,
            failures: u32::from(!ok),
            written_at_ms: ok.then_some(0),
            error: (!ok).then(|| "no answer".to_string()),
        }
    }

    fn check(last: Option<&Last>, kept: Option<bool>, steered: bool) {
        assert_eq!(
            may_be_steered(last, false, kept),
            steered,
            "{last:?} {kept:?}"
        );
        // A step under way at the stop may still write anything.
        assert!(may_be_steered(last, true, kept), "{last:?} {kept:?}");
    }

    #[test]
    fn only_a_confirmed_release_or_a_clean_mark_counts_as_released() {
        let released = last(Command::EssRelease, true);
        let charge = last(Command::EssPower(-2000.0), true);
        let idle = last(Command::EssPower(0.0), true);
        let limit = last(Command::ProductionLimit(1000.0), true);
        let failed_release = last(Command::ProductionRelease, false);
        let failed_charge = last(Command::EssPower(-2000.0), false);
        // This run's last write decides, whatever the store's mark says.
        for kept in [None, Some(false), Some(true)] {
            check(Some(&released), kept, false);
            check(Some(&charge), kept, true);
            check(Some(&idle), kept, true);
            check(Some(&limit), kept, true);
            check(Some(&failed_release), kept, true);
            check(Some(&failed_charge), kept, true);
        }
        // Nothing written in this run: the mark, and unknown is steered.
        check(None, Some(false), false);
        check(None, Some(true), true);
        check(None, None, true);
    }

    #[test]
    fn the_release_follows_the_device_type_and_shows_as_fallback() {
        let bat = release_at_stop(DeviceType::Battery);
        assert_eq!(
            (bat.command, bat.component, bat.shown),
            (Command::EssRelease, None, Component::Ess)
        );
        let inv = release_at_stop(DeviceType::Inverter);
        assert_eq!(
            (inv.command, inv.component, inv.shown),
            (Command::ProductionRelease, None, Component::Curtailment)
        );
    }
}
