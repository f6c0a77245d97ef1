//! The stretch of time between two steps of the wall clock (or from start to
//! the first), and whether the samples stamped in it are to be moved when
//! the step comes.
//!
//! A step says by how much the clock was off: the samples the agent stamped
//! since the epoch began were taken `size` earlier or later than stamped.
//! They are moved (`store/restamp.rs`) when both hold:
//! - the clock was not known to be synchronised at some time in the epoch
//!   (a synchronised clock that steps is more likely being led astray than
//!   corrected, and its samples stay as stamped);
//! - the step is larger than the epoch is long (plus a margin), so that the
//!   epoch's stamps and the ones after the step cannot overlap: a small step
//!   after a long run leaves the stamps (off by the step) as they are.
//!
//! Pure: no clock is read here.

use super::Step;

/// How much longer than the epoch a step must be to move its samples.
pub const MARGIN_MS: i64 = 10_000;

/// One epoch of the wall clock, as it stamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    /// The wall clock when it began (start, or right after a step).
    pub from_ms: i64,
    /// The wall clock right before it ended (the step), as it read then.
    pub to_ms: i64,
    /// Known synchronised at every tick of it.
    pub synchronised: bool,
}

/// A step and the epoch it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepEvent {
    pub step: Step,
    pub ended: Epoch,
}

/// The samples to move after `e`: the range as stamped and the shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Correction {
    pub from_ms: i64,
    pub to_ms: i64,
    pub shift_ms: i64,
}

/// Whether and how the samples of the epoch `e` ended are moved.
pub fn correction(e: &StepEvent) -> Result<Correction, &'static str> {
    let length = e.ended.to_ms - e.ended.from_ms;
    if e.ended.synchronised {
        return Err("the clock was synchronised before the step: the samples keep their times");
    }
    if e.step.size_ms.abs() <= length + MARGIN_MS {
        return Err("the step is shorter than the time since start or the last step: the samples keep their times");
    }
    Ok(Correction {
        from_ms: e.ended.from_ms,
        to_ms: e.ended.to_ms,
        shift_ms: e.step.size_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    fn event(from_ms: i64, to_ms: i64, size_ms: i64, synchronised: bool) -> StepEvent {
        StepEvent {
            step: Step {
                size_ms,
                at_ms: to_ms + size_ms,
            },
            ended: Epoch {
                from_ms,
                to_ms,
                synchronised,
            },
        }
    }

    #[test]
    fn large_steps_after_an_unsynchronised_epoch_move_it_and_others_do_not() {
        let t = 1_800_000_000_000;
        // 30 days ahead for 10 minutes, then back: moved back.
        let back = correction(&event(t, t + 600_000, -30 * DAY, false)).expect("moved");
        assert_eq!(
            (back.from_ms, back.to_ms, back.shift_ms),
            (t, t + 600_000, -30 * DAY)
        );
        // 40 days behind, then forward.
        assert!(correction(&event(t, t + 600_000, 40 * DAY, false)).is_ok());
        // A synchronised clock led astray: kept.
        assert!(correction(&event(t, t + 600_000, -30 * DAY, true)).is_err());
        // A step smaller than the epoch: the stamps would overlap; kept.
        assert!(correction(&event(t, t + 3_600_000, -5_000, false)).is_err());
        assert!(correction(&event(t, t + 3_600_000, -3_600_000, false)).is_err());
        assert!(correction(&event(t, t + 3_600_000, -3_700_000, false)).is_ok());
    }
}
