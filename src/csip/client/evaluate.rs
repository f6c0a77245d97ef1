//! The client's evaluation half: each second, whatever the server does or
//! however long its requests take, the schedule moves on in server time,
//! what happened is recorded, and the limits in force (with their ramps)
//! are handed to steering. It does no I/O; a poll that hangs until its
//! timeout never delays an event's start or end.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::events::Recorder;
use super::shared::SharedRef;
use crate::csip::limits::{to_limits, Ramps, Step};
use crate::csip::resource::program::Mode;
use crate::csip::site::{snapshot, Held};
use crate::csip::status::{State, Status};
use crate::model::time::now_ms;

pub(crate) struct Evaluator {
    pub recorder: Recorder,
    pub shared: SharedRef,
    pub status: Status,
    pub ramps: Ramps,
    pub last_ms: i64,
}

impl Evaluator {
    /// Steps every second until `cancel`.
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => self.step(now_ms()),
            }
        }
    }

    /// One step at wall time `now`.
    pub fn step(&mut self, now: i64) {
        let site = &self.recorder.site;
        let snap = snapshot(&self.recorder.live, &site.devices);
        let state = self.status.snapshot();
        let (f, server_now, pending) = {
            let mut sh = self.shared.lock();
            let server_now = sh.clock.server_ms(now);
            let events = sh.schedule.advance(server_now);
            self.recorder.record(&mut sh, events);
            let f = sh.schedule.in_force(server_now);
            let off = |m: Mode| f.get(m).is_some_and(|v| v < 0.5);
            sh.held = Held {
                disconnected: off(Mode::Connect),
                deenergized: off(Mode::Energize),
            };
            sh.set_grad_w = f.set_grad_w.unwrap_or(0);
            (f, server_now, sh.schedule.pending().len())
        };
        let dt_s = ((now - self.last_ms) as f64 / 1000.0).clamp(0.0, 10.0);
        self.last_ms = now;
        let set = to_limits(
            &f,
            &mut self.ramps,
            &Step {
                now_ms: now,
                dt_s,
                offset_ms: server_now - now,
                set_max_w: snap.set_max_w(),
                failsafe: matches!(state.state, State::Unreachable | State::NoCertificate),
            },
        );
        self.status.update(|s| {
            s.limits = set.clone();
            s.offset_ms = server_now - now;
            s.events_followed = pending;
        });
        site.set_server_limits(crate::steering::sources::Server::Csip, set);
        site.set_server_status(
            crate::steering::sources::Server::Csip,
            self.status.source_status(),
        );
    }
}
