//! The LPC/LPP rules as sitegate holds them, each a named case, on explicit
//! times: hours run in microseconds.

use std::time::Duration;

use eebus::usecases::limitation::{
    ControllableSystem, CsConfig, LimitWrite, LimitationState, LocalDecision,
};

use super::*;

const FAILSAFE_W: f64 = 4_200.0;
const S: i64 = 1_000;
const H: i64 = 3_600 * S;

/// A Controllable System on a clock of wall ms from 0, with the box's
/// heartbeats noted as the node notes them.
struct Rig {
    cs: ControllableSystem,
    heartbeat_ms: Option<i64>,
    until_ms: Option<i64>,
    resumed: Option<Kept>,
}

fn at(ms: i64) -> Duration {
    Duration::from_millis(ms as u64)
}

impl Rig {
    fn new() -> Rig {
        Rig {
            cs: ControllableSystem::new(
                CsConfig::new(FAILSAFE_W, Duration::from_secs(2 * 3_600)).on_cem(),
                Duration::ZERO,
            ),
            heartbeat_ms: None,
            until_ms: None,
            resumed: None,
        }
    }
    fn beat(&mut self, ms: i64) {
        self.cs.handle_timeout(at(ms));
        self.cs.on_heartbeat(at(ms));
        self.heartbeat_ms = Some(ms);
    }
    fn write(&mut self, ms: i64, w: LimitWrite) -> bool {
        let ok = self
            .cs
            .on_limit_write(&w, LocalDecision::Apply, at(ms))
            .is_accepted();
        if ok {
            self.until_ms = w.duration.map(|d| ms + d.as_millis() as i64);
            self.resumed = None;
        }
        ok
    }
    /// Beats every 60 s from `from` to `to`.
    fn beat_through(&mut self, from: i64, to: i64) {
        let mut t = from;
        while t <= to {
            self.beat(t);
            t += 60 * S;
        }
    }
    fn held(&mut self, ms: i64) -> Held {
        self.cs.handle_timeout(at(ms));
        held(
            &self.cs,
            ms,
            ms - self.heartbeat_ms.unwrap_or(0),
            self.until_ms,
            self.resumed.as_ref(),
        )
    }
}

#[test]
fn heartbeat_loss_enters_failsafe_within_120_s() {
    let mut r = Rig::new();
    r.beat(S);
    assert!(r.write(2 * S, LimitWrite::active(3_000.0)));
    assert_eq!(r.held(60 * S).value_w, Some(3_000.0));
    // The last heartbeat at 1 s: still limited at 120 s, failsafe from 121 s.
    assert!(!r.held(120 * S).failsafe);
    let h = r.held(121 * S);
    assert_eq!(h.state, "failsafe state");
    assert_eq!((h.value_w, h.failsafe), (Some(FAILSAFE_W), true));
}

#[test]
fn a_limit_without_a_duration_outlives_an_hour() {
    let mut r = Rig::new();
    r.beat(0);
    assert!(r.write(S, LimitWrite::active(5_000.0)));
    r.beat_through(60 * S, 2 * H);
    let h = r.held(2 * H + S);
    assert_eq!(
        (h.state, h.value_w, h.until_ms),
        ("limited", Some(5_000.0), None)
    );
}

#[test]
fn a_limit_with_a_duration_ends_with_it() {
    let mut r = Rig::new();
    r.beat(0);
    assert!(r.write(S, LimitWrite::active_for(5_000.0, Duration::from_secs(900))));
    r.beat_through(60 * S, 899 * S);
    assert_eq!(r.held(900 * S).until_ms, Some(901 * S));
    r.beat(901 * S);
    let h = r.held(902 * S);
    assert_eq!((h.state, h.value_w), ("unlimited/controlled", None));
}

#[test]
fn a_returning_heartbeat_alone_does_not_leave_failsafe_before_120_s() {
    let mut r = Rig::new();
    r.beat(0);
    assert!(r.write(S, LimitWrite::active(3_000.0)));
    assert!(r.held(200 * S).failsafe);
    // Back at 300 s, heartbeats only.
    r.beat_through(300 * S, 419 * S);
    assert!(r.held(419 * S).failsafe, "{:?}", r.held(419 * S));
    r.beat(420 * S);
    // 120 s of heartbeats without a limit: the box is present, not
    // controlling (LPC/LPP-921); the use case's rule stands.
    let h = r.held(421 * S);
    assert_eq!((h.state, h.value_w), ("unlimited/autonomous", None));
}

#[test]
fn failsafe_is_left_on_a_heartbeat_and_a_fresh_write() {
    let mut r = Rig::new();
    r.beat(0);
    assert!(r.write(S, LimitWrite::active(3_000.0)));
    assert!(r.held(200 * S).failsafe);
    // A write without a heartbeat before it changes nothing.
    assert!(!r.write(250 * S, LimitWrite::active(6_000.0)));
    assert!(r.held(251 * S).failsafe);
    r.beat(300 * S);
    assert!(r.write(301 * S, LimitWrite::active(6_000.0)));
    let h = r.held(302 * S);
    assert_eq!((h.failsafe, h.value_w), (false, Some(6_000.0)));
}

#[test]
fn a_24_h_outage_never_leaves_the_site_unlimited() {
    let mut r = Rig::new();
    r.beat(0);
    assert!(r.write(S, LimitWrite::deactivated()));
    assert_eq!(r.held(30 * S).value_w, None);
    let mut t = 121 * S;
    while t <= 24 * H {
        let h = r.held(t);
        assert_eq!(h.value_w, Some(FAILSAFE_W), "at {} s: {h:?}", t / S);
        t += 10 * 60 * S;
    }
    // Past the Failsafe Duration Minimum the use case would run unlimited;
    // with the box still silent the failsafe holds, marked protective.
    let h = r.held(24 * H);
    assert_eq!(r.cs.state(), LimitationState::UnlimitedAutonomous);
    assert!(h.failsafe && h.protective, "{h:?}");
}

#[test]
fn the_failsafe_holds_from_the_start_until_the_box_writes() {
    let mut r = Rig::new();
    let h = r.held(0);
    assert_eq!(
        (h.state, h.value_w, h.failsafe),
        ("init", Some(FAILSAFE_W), true)
    );
    // No box at all: past the settle window, still the failsafe value.
    let h = r.held(10 * 60 * S);
    assert!(h.failsafe && h.protective, "{h:?}");
}

#[test]
fn heartbeats_from_the_start_never_enter_the_failsafe_state() {
    // evcc #21642: failsafe 10 s after connecting. Here the box beats at
    // once and writes within its window; the failsafe state never comes.
    let mut r = Rig::new();
    r.beat(2 * S);
    assert!(r.write(10 * S, LimitWrite::active(8_000.0)));
    let mut t = 10 * S;
    while t < H {
        r.beat(t);
        let h = r.held(t);
        assert_eq!((h.state, h.failsafe), ("limited", false), "at {} s", t / S);
        t += 55 * S;
    }
}

#[test]
fn a_restart_in_failsafe_stays_in_failsafe() {
    let kept = Kept {
        state: "failsafe state".into(),
        failsafe: true,
        since_ms: -3 * H,
        limit: None,
        failsafe_w: FAILSAFE_W,
        failsafe_duration_s: 7_200,
    };
    let mut r = Rig::new();
    r.resumed = Some(kept.clone());
    let h = r.held(0);
    assert!(h.failsafe);
    assert_eq!(
        since(None, &h, 0, Some(&kept)),
        -3 * H,
        "the failsafe keeps its start"
    );
    // Still silent after the settle window: the failsafe holds.
    assert!(r.held(5 * 60 * S).failsafe);
    // The box back with a write: it ends.
    r.beat(6 * 60 * S);
    assert!(r.write(6 * 60 * S + S, LimitWrite::active(7_000.0)));
    let h = r.held(6 * 60 * S + 2 * S);
    assert_eq!((h.failsafe, h.value_w), (false, Some(7_000.0)));
}

#[test]
fn a_restart_keeps_a_tighter_limit_until_it_ends() {
    let kept = Kept {
        state: "limited".into(),
        failsafe: false,
        since_ms: -10 * S,
        limit: Some((1_000.0, Some(100 * S))),
        failsafe_w: FAILSAFE_W,
        failsafe_duration_s: 7_200,
    };
    let mut r = Rig::new();
    r.resumed = Some(kept);
    let h = r.held(S);
    assert_eq!((h.value_w, h.until_ms), (Some(1_000.0), Some(100 * S)));
    // Ended: the failsafe value, not the old limit.
    assert_eq!(r.held(101 * S).value_w, Some(FAILSAFE_W));
}
