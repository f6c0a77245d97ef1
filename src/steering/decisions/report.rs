//! Per-device write bookkeeping as pure functions: when the next write is due
//! (changed setpoint, refresh before the device's revert timer, retry with
//! backoff) and what the steering state reports for the device.
//!
//! No I/O and no clock: the actuator passes `now`.

use std::time::Duration;

use super::decide::Command;
use crate::modbus::control::{RegWrite, WritePlan};
use crate::steering::value::Component;
use crate::util::Backoff;

/// What the control loop wants a device to have.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub command: Command,
    /// The component that decided it; `None` when it is the fallback.
    pub component: Option<Component>,
    /// The component to show for the device (its own one at fallback).
    pub shown: Component,
}

/// The last write made to a device.
#[derive(Clone, Debug, PartialEq)]
pub struct Last {
    pub writes: Vec<RegWrite>,
    pub command: Command,
    /// When the last attempt finished (epoch ms).
    pub at_ms: i64,
    /// Written and read back as expected.
    pub ok: bool,
    /// Consecutive failed attempts at these writes.
    pub failures: u32,
    /// When it last succeeded (epoch ms).
    pub written_at_ms: Option<i64>,
    pub error: Option<String>,
}

/// When to write next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    Now,
    At(i64),
    Never,
}

/// First retry after a failure; doubles per failure up to [`MAX_BACKOFF_MS`].
pub const MIN_BACKOFF_MS: i64 = 500;
pub const MAX_BACKOFF_MS: i64 = 30_000;

/// The wait after `failures` failed writes in a row (1 or more), without
/// jitter: one device, one actuator.
pub fn backoff_ms(failures: u32) -> i64 {
    let delays = Backoff::new(
        Duration::from_millis(MIN_BACKOFF_MS as u64),
        Duration::from_millis(MAX_BACKOFF_MS as u64),
    );
    delays.ceiling(failures.saturating_sub(1)).as_millis() as i64
}

/// The least time a refresh leaves before the revert timer would run out, ms:
/// room for a bus busy with a poll and a retry or two.
const REFRESH_MARGIN_MS: i64 = 10_000;

/// How long after a confirmed write the setpoint is written again: shortly
/// before the device's revert timer (`revert_s`) runs out, by a quarter of it
/// or 10 s, whichever is more, but never later than half of it (45 s at the
/// default 60 s, 1 s at 2 s).
pub fn refresh_ms(revert_s: u16) -> i64 {
    let revert = i64::from(revert_s) * 1000;
    let margin = (revert / 4).max(REFRESH_MARGIN_MS.min(revert / 2));
    (revert - margin).max(1)
}

/// Whether `plan` must be written now, later, or not at all. Changed registers
/// are written at once (even while backing off: a new value deserves a new
/// try); a failed write is retried with backoff; a setpoint that holds the device
/// under control is refreshed every `refresh_ms`.
pub fn due(plan: &WritePlan, command: Command, last: Option<&Last>, refresh_ms: i64) -> Due {
    let Some(last) = last else { return Due::Now };
    if last.writes != plan.writes {
        return Due::Now;
    }
    if !last.ok {
        return Due::At(last.at_ms + backoff_ms(last.failures));
    }
    if command.is_control() {
        return Due::At(last.at_ms + refresh_ms);
    }
    Due::Never
}

/// The reported state of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Applied,
    Pending,
    Failed,
    Fallback,
}

impl State {
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Applied => "applied",
            State::Pending => "pending",
            State::Failed => "failed",
            State::Fallback => "fallback",
        }
    }
}

/// What `GET /sites/{s}/steering` shows for one device.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceReport {
    pub device: String,
    pub desired: Option<Desired>,
    pub state: State,
    pub written_at_ms: Option<i64>,
    pub confirmed: bool,
    pub error: Option<String>,
    /// Why the device is told what it is told, when that is not obvious (a
    /// battery without a known rating gets 0 W); shown as `error` when there
    /// is no error.
    pub note: Option<String>,
}

impl DeviceReport {
    pub fn new(device: &str) -> Self {
        Self {
            device: device.to_string(),
            desired: None,
            state: State::Pending,
            written_at_ms: None,
            confirmed: false,
            error: None,
            note: None,
        }
    }

    /// The report after an attempt or a change of desire. `plan` is what the
    /// desired command needs written (`Err` when it cannot be planned).
    pub fn update(
        &mut self,
        desired: &Desired,
        plan: Result<&WritePlan, &str>,
        last: Option<&Last>,
    ) {
        self.desired = Some(desired.clone());
        self.written_at_ms = last.and_then(|l| l.written_at_ms);
        let matches = match (plan, last) {
            (Ok(p), Some(l)) => l.writes == p.writes,
            _ => false,
        };
        let (state, confirmed, error) = match (plan, last) {
            (Err(e), _) => (State::Failed, false, Some(e.to_string())),
            (Ok(_), Some(l)) if matches && l.ok => {
                let s = if desired.component.is_none() {
                    State::Fallback
                } else {
                    State::Applied
                };
                (s, true, None)
            }
            (Ok(_), Some(l)) if matches => (State::Failed, false, l.error.clone()),
            _ => (State::Pending, false, None),
        };
        self.state = state;
        self.confirmed = confirmed;
        self.error = error;
    }

    /// Pending: decided by the control loop, not taken up by the actuator yet.
    pub fn decided(&mut self, desired: &Desired) {
        self.desired = Some(desired.clone());
        self.state = State::Pending;
        self.confirmed = false;
        self.error = None;
    }

    /// Pending with a reason, e.g. the device is not discovered yet.
    pub fn waiting(&mut self, desired: &Desired, why: String) {
        self.desired = Some(desired.clone());
        self.state = State::Pending;
        self.confirmed = false;
        self.error = Some(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(v: u16) -> WritePlan {
        WritePlan {
            writes: vec![RegWrite {
                addr: 1,
                values: vec![v],
            }],
            read_back: Vec::new(),
            expect: vec![(1, v)],
        }
    }

    fn last(v: u16, ok: bool, at: i64, failures: u32) -> Last {
        Last {
            writes: plan(v).writes,
            command: Command::EssPower(f64::from(v)),
            at_ms: at,
            ok,
            failures,
            written_at_ms: ok.then_some(at),
            error: (!ok).then(|| "refused".to_string()),
        }
    }

    #[test]
    fn writes_changes_now_refreshes_controls_and_backs_off() {
        let c = Command::EssPower(5.0);
        assert_eq!(due(&plan(5), c, None, 1000), Due::Now);
        assert_eq!(due(&plan(5), c, Some(&last(4, true, 0, 0)), 1000), Due::Now);
        assert_eq!(
            due(&plan(5), c, Some(&last(5, true, 100, 0)), 1000),
            Due::At(1100)
        );
        assert_eq!(
            due(
                &plan(5),
                Command::EssRelease,
                Some(&last(5, true, 100, 0)),
                1000
            ),
            Due::Never
        );
        assert_eq!(
            due(&plan(5), c, Some(&last(5, false, 100, 1)), 1000),
            Due::At(600)
        );
        assert_eq!(
            due(&plan(5), c, Some(&last(5, false, 100, 3)), 1000),
            Due::At(2100)
        );
        // A new value is tried at once even while backing off.
        assert_eq!(
            due(&plan(6), c, Some(&last(5, false, 100, 9)), 1000),
            Due::Now
        );
        assert_eq!(backoff_ms(40), MAX_BACKOFF_MS);
    }

    #[test]
    fn refreshes_come_shortly_before_the_revert_timer_runs_out() {
        assert_eq!(refresh_ms(60), 45_000);
        assert_eq!(refresh_ms(600), 450_000);
        assert_eq!(refresh_ms(10), 5_000);
        assert_eq!(refresh_ms(2), 1_000);
        assert_eq!(refresh_ms(0), 1);
        for s in 1..=900 {
            let r = refresh_ms(s);
            let revert = i64::from(s) * 1000;
            assert!(r <= revert / 2 || revert - r >= 10_000, "{s} s: {r} ms");
            assert!(
                r >= revert / 2,
                "{s} s: refresh at {r} ms, sooner than needed"
            );
        }
    }

    #[test]
    fn states() {
        let d = Desired {
            command: Command::EssPower(5.0),
            component: Some(Component::Ess),
            shown: Component::Ess,
        };
        let mut r = DeviceReport::new("dvc");
        r.update(&d, Ok(&plan(5)), None);
        assert_eq!(r.state, State::Pending);
        r.update(&d, Ok(&plan(5)), Some(&last(5, true, 7, 0)));
        assert_eq!(
            (r.state, r.confirmed, r.written_at_ms),
            (State::Applied, true, Some(7))
        );
        r.update(&d, Ok(&plan(6)), Some(&last(5, true, 7, 0)));
        assert_eq!(r.state, State::Pending);
        r.update(&d, Ok(&plan(5)), Some(&last(5, false, 9, 1)));
        assert_eq!(
            (r.state, r.error.as_deref()),
            (State::Failed, Some("refused"))
        );
        let fb = Desired {
            component: None,
            ..d.clone()
        };
        r.update(&fb, Ok(&plan(5)), Some(&last(5, true, 7, 0)));
        assert_eq!(r.state, State::Fallback);
        r.update(&d, Err("no model 124"), None);
        assert_eq!(r.state, State::Failed);
        let shown = crate::steering::view::DeviceState::of(&r);
        assert_eq!(shown.setpoint_w, Some(5.0));
        assert_eq!(shown.component, Some(Component::Ess));
        assert_eq!(shown.error.as_deref(), Some("no model 124"));
    }
}
