//! What one limitation use case (LPC or LPP) holds the site to, from the
//! `eebus` crate's Controllable System state machine and what sitegate adds
//! over it (`docs/grid-operator.md`):
//!
//! - **Protective failsafe.** The use case lets a system run unlimited once
//!   the Failsafe Duration Minimum has passed, or 120 s after a restart, with
//!   the Energy Guard still silent (LPC/LPP-906, -922). sitegate keeps the
//!   failsafe value instead while no heartbeat arrives: a site is never left
//!   unlimited by an outage (the self-determined protective default
//!   LPC/LPP-921 allows). With the box audible but not writing, the use
//!   case's rule stands.
//! - **Resumed.** The crate's machine restarts in `init`, on the failsafe
//!   value. sitegate keeps each use case's state in the store; after a
//!   restart a limit still valid holds beside the failsafe value (the
//!   tighter wins), and a failsafe keeps the time it began, until the box
//!   writes again.
//!
//! Pure: the machine, the times and the record in; what holds out. No clock,
//! no I/O. The box's silence is measured on the node's monotonic clock (the
//! one the crate's machine runs on), wall ms only stamp what holds.

use eebus::usecases::limitation::{ControllableSystem, LimitationState};

/// How long without a heartbeat the box counts as gone (LPC/LPP-911).
pub const HEARTBEAT_TIMEOUT_MS: i64 = 120_000;

/// What was in force when the agent stopped, as the store keeps it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kept {
    /// The use case's state, as the specification names it.
    pub state: String,
    /// The failsafe value held (`init`, `failsafe state` or protective).
    pub failsafe: bool,
    /// Since when what held held, wall ms.
    pub since_ms: i64,
    /// The box's active limit, W, and when it ends (wall ms; `None`: never).
    pub limit: Option<(f64, Option<i64>)>,
    /// The failsafe value and the Failsafe Duration Minimum as the box last
    /// wrote them (or as configured).
    pub failsafe_w: f64,
    pub failsafe_duration_s: u64,
}

/// What the use case holds the site to now.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    /// The use case's state, as the specification names it.
    pub state: &'static str,
    /// W; `None`: the box lets the site run unlimited (the contract still
    /// holds).
    pub value_w: Option<f64>,
    /// The failsafe value holds (or a resumed limit beside it).
    pub failsafe: bool,
    /// The failsafe holds because the box stayed silent past the use case's
    /// own fallback.
    pub protective: bool,
    /// When the value ends, wall ms, if the box said.
    pub until_ms: Option<i64>,
}

/// What `system` holds the site to at `now_ms`.
///
/// `silent_ms`: how long since the box's last heartbeat, or since the start
/// when none came (monotonic). `limit_until_ms`: the end of the active
/// limit, wall ms, as sitegate noted it when the write was accepted.
/// `resumed`: what the store kept from before the restart, while the
/// machine has not left `init` since.
pub fn held(
    system: &ControllableSystem,
    now_ms: i64,
    silent_ms: i64,
    limit_until_ms: Option<i64>,
    resumed: Option<&Kept>,
) -> Held {
    let failsafe_w = system.config().failsafe_watts;
    let heard = silent_ms < HEARTBEAT_TIMEOUT_MS;
    let state = system.state();
    let name = state.as_str();
    let fail = |protective: bool| Held {
        state: name,
        value_w: Some(failsafe_w),
        failsafe: true,
        protective,
        until_ms: None,
    };
    match state {
        LimitationState::Limited => match system.effective_limit().watts() {
            Some(w) => Held {
                state: name,
                value_w: Some(w),
                failsafe: false,
                protective: false,
                until_ms: limit_until_ms,
            },
            None => unlimited(name),
        },
        LimitationState::Init => {
            let mut h = fail(false);
            if let Some((w, until)) = resumed.and_then(|k| k.limit) {
                if until.is_none_or(|u| u > now_ms) && w < failsafe_w {
                    h.value_w = Some(w);
                    h.until_ms = until;
                }
            }
            h
        }
        LimitationState::FailsafeState => fail(false),
        LimitationState::UnlimitedAutonomous if !heard => fail(true),
        LimitationState::UnlimitedAutonomous | LimitationState::UnlimitedControlled => {
            unlimited(name)
        }
    }
}

fn unlimited(state: &'static str) -> Held {
    Held {
        state,
        value_w: None,
        failsafe: false,
        protective: false,
        until_ms: None,
    }
}

/// When what holds began: `prev`'s start if the same thing still holds,
/// else now; a failsafe resumed after a restart keeps its start.
pub fn since(prev: Option<(&Held, i64)>, now: &Held, now_ms: i64, resumed: Option<&Kept>) -> i64 {
    match prev {
        Some((p, since)) if p.value_w == now.value_w && p.failsafe == now.failsafe => since,
        Some(_) => now_ms,
        None => match resumed {
            Some(k) if k.failsafe && now.failsafe => k.since_ms,
            _ => now_ms,
        },
    }
}

#[cfg(test)]
mod tests;
