//! The CSIP-AUS client task of one site, in two halves joined in one task.
//! The I/O half owns the connection to the utility server: it polls what is
//! due (`polls.rs`), samples the site for its telemetry, and posts what it
//! owes the server (the DER's status, readings, responses); discovery and
//! registration are `discover.rs`, the programs `follow.rs`, what it
//! reports `report.rs`. The evaluation half (`evaluate.rs`) moves the
//! schedule on each second and hands the limits in force to steering,
//! whatever the I/O half is waiting for; they share `shared.rs`.
//!
//! It never commands a device: steering holds the limits it hands over.
//! Whatever the server does, the schedule as last received (kept in the
//! store) stays in force.

mod clock;
mod discover;
mod evaluate;
mod events;
mod follow;
pub mod polls;
pub mod readings;
mod report;
mod setup;
mod shared;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::http::{Http, HttpError};
use super::resource::der::{Capability, DerLinks, Settings};
use super::status::{State, Status};
use super::store::{CsipStore, Saved};
use super::xml::XmlError;
use crate::config::csip_files::CsipMaterial;
use crate::config::CsipConfig;
use crate::model::time::now_ms;
use crate::steering::runtime::SiteRuntime;
use crate::steering::SteeringService;
use crate::telemetry::Live;
use events::Recorder;
use polls::Polls;
use readings::Averager;
use shared::{Shared, SharedRef};

/// What the task works with.
pub struct Parts {
    pub config: CsipConfig,
    /// The certificate files as checked, or why they cannot be used.
    pub material: Result<CsipMaterial, String>,
    pub site: Arc<SiteRuntime>,
    pub live: Arc<Live>,
    pub steering: SteeringService,
    pub store: CsipStore,
    pub status: Status,
}

/// Why a poll got nothing usable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("the answer is not 2030.5 as expected: {0}")]
    Xml(#[from] XmlError),
    #[error("{0}")]
    Refused(String),
}

impl Failure {
    fn kind(&self) -> &'static str {
        match self {
            Failure::Http(h) => h.kind(),
            Failure::Xml(_) => "xml",
            Failure::Refused(_) => "refused",
        }
    }

    /// The server answered: it is reachable, if unhelpful.
    fn answered(&self) -> bool {
        match self {
            Failure::Http(h) => h.answered(),
            _ => true,
        }
    }
}

/// Where the device's resources are, as discovered.
#[derive(Clone, Debug, Default, PartialEq)]
struct Links {
    time: Option<String>,
    end_devices: Option<String>,
    mirrors: Option<String>,
    end_device: Option<String>,
    function_sets: Option<String>,
    ders: Option<String>,
    post_rate_s: Option<u32>,
}

/// The most reading posts kept waiting for the server.
const READINGS_MAX: usize = 120;

pub(crate) struct Client {
    cfg: CsipConfig,
    lfdi: String,
    sfdi: u64,
    http: Option<Http>,
    site: Arc<SiteRuntime>,
    live: Arc<Live>,
    recorder: Recorder,
    store: CsipStore,
    status: Status,
    /// The client's state, as `status` shows it (kept here for the loop).
    state: State,
    shared: SharedRef,
    /// The CSIP-AUS namespace written: the server's own once seen.
    ns: String,
    links: Links,
    /// When discovery runs next (monotonic ms); `None` once it succeeded.
    discover_at: Option<i64>,
    discover_backoff_ms: i64,
    polls: Polls,
    /// When the owed posts are tried next after a failure (monotonic ms).
    report_at: i64,
    report_backoff_ms: i64,
    averager: Averager,
    readings: VecDeque<(String, String)>,
    /// The site's and the DER's mirror: href and post rate.
    mirrors: Vec<(u16, String, Option<u32>)>,
    der: Option<DerLinks>,
    sent_capability: Option<Capability>,
    sent_settings: Option<Settings>,
    sent_status: Option<(u8, u8)>,
    /// The last request's error, so a failure repeating is logged once.
    last_error: Option<String>,
    rng: u64,
    started: tokio::time::Instant,
}

/// Runs the client until `cancel`: its I/O half, a pass each second and at
/// once when a poll falls due between two, beside its evaluation half.
pub async fn run(p: Parts, cancel: CancellationToken) {
    let (mut c, evaluator) = Client::new(p).await;
    let io = async {
        let mut next_tick = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = c.tick() => {}
            }
            let now = tokio::time::Instant::now();
            while next_tick <= now {
                next_tick += Duration::from_secs(1);
            }
            let wake = match c.next_poll_ms() {
                Some(ms) => {
                    let at =
                        c.started + Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0));
                    at.min(next_tick).max(now)
                }
                None => next_tick,
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
        c.save().await;
    };
    tokio::join!(io, evaluator.run(cancel.clone()));
}

impl Client {
    /// When the next poll (or discovery) is due, monotonic ms.
    fn next_poll_ms(&self) -> Option<i64> {
        if self.state == State::PinRefused {
            return None;
        }
        match self.discover_at {
            Some(t) => Some(t),
            None => self.polls.next_ms(),
        }
    }

    /// Monotonic ms since the task started.
    fn mono_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// One pass of the I/O half: discovery or the polls due, the site's
    /// telemetry, what is owed the server, the schedule saved.
    async fn tick(&mut self) {
        let mono = self.mono_ms();
        if self.discover_at.is_some_and(|t| t <= mono) {
            self.discover().await;
        }
        if self.discover_at.is_none() && self.state != State::PinRefused {
            for p in self.polls.due(self.mono_ms()) {
                self.poll(&p).await;
            }
        }
        let now = now_ms();
        let snap = super::site::snapshot(&self.live, &self.site.devices);
        self.sample(now, &snap);
        if self.talking() && self.mono_ms() >= self.report_at {
            self.report(now, &snap).await;
        }
        self.save().await;
    }

    /// The schedule, the clock and what is owed, locked for a moment.
    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock()
    }

    /// The server's time now, ms.
    fn server_ms(&self) -> i64 {
        self.shared().clock.server_ms(now_ms())
    }

    /// Whether the client talks to the server now.
    fn talking(&self) -> bool {
        self.http.is_some()
            && self.discover_at.is_none()
            && !matches!(self.state, State::PinRefused | State::NoCertificate)
    }

    fn set_state(&mut self, state: State) {
        self.state = state;
        self.status.update(|s| s.state = state);
        self.site.set_server_status(
            crate::steering::sources::Server::Csip,
            self.status.source_status(),
        );
    }

    /// A request answered: the server is reachable.
    fn contact(&mut self, resource: &'static str) {
        let now = now_ms();
        if self.state == State::Unreachable {
            tracing::info!(site = %self.cfg.site, server = %self.cfg.server.host, "CSIP-AUS server reachable again");
            self.set_state(State::Following);
            self.report_at = 0;
            self.report_backoff_ms = 0;
        }
        self.status.update(|s| {
            s.last_contact_ms = Some(now);
            *s.polls.entry(resource).or_default() += 1;
        });
        self.site.set_server_status(
            crate::steering::sources::Server::Csip,
            self.status.source_status(),
        );
        self.last_error = None;
    }

    /// A request failed: counted, logged once while it repeats.
    fn failed(&mut self, what: &str, f: &Failure) {
        let text = f.to_string();
        self.status.update(|s| {
            *s.failures.entry(f.kind()).or_default() += 1;
            s.last_error = Some(format!("{what}: {text}"));
        });
        if !f.answered() && matches!(self.state, State::Following | State::Discovering) {
            self.set_state(State::Unreachable);
        }
        if self.last_error.as_deref() != Some(&text) {
            tracing::warn!(site = %self.cfg.site, resource = what, error = %text, "CSIP-AUS request failed: the schedule as last received holds");
            self.last_error = Some(text);
        }
    }

    /// The owed posts failed for want of the server: tried again after a
    /// backoff (5 s, doubling to a minute), so a server that does not answer
    /// is not asked each second.
    fn report_later(&mut self) {
        self.report_backoff_ms = (self.report_backoff_ms * 2).clamp(5_000, 60_000);
        self.report_at = self.mono_ms() + self.report_backoff_ms;
    }

    /// A randomization offset within `bound` s (either sign).
    fn randomize(rng: &mut u64, bound: i16) -> i64 {
        if bound == 0 {
            return 0;
        }
        // xorshift64: a uniform spread, not a secret.
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let span = u64::from(bound.unsigned_abs()) + 1;
        let v = (*rng % span) as i64;
        if bound < 0 {
            -v
        } else {
            v
        }
    }

    /// Saves the schedule when it changed.
    async fn save(&mut self) {
        let saved = {
            let mut sh = self.shared();
            if !sh.dirty {
                return;
            }
            sh.dirty = false;
            Saved {
                offset_ms: sh.clock.server_ms(now_ms()) - now_ms(),
                schedule: sh.schedule.clone(),
                pending: sh.pending.iter().cloned().collect(),
            }
        };
        if let Err(e) = self.store.save(&self.cfg.site, saved, now_ms()).await {
            self.shared().dirty = true;
            tracing::warn!(site = %self.cfg.site, error = %e, "the CSIP-AUS schedule could not be kept in the store: tried again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn randomization_spreads_over_its_bound_of_either_sign() {
        let mut rng = 0x9E37_79B9_7F4A_7C15;
        let up: Vec<i64> = (0..2_000)
            .map(|_| Client::randomize(&mut rng, 60))
            .collect();
        assert!(up.iter().all(|v| (0..=60).contains(v)));
        let distinct: std::collections::BTreeSet<_> = up.iter().collect();
        assert_eq!(distinct.len(), 61, "every second of the window is taken");
        let down: Vec<i64> = (0..500).map(|_| Client::randomize(&mut rng, -30)).collect();
        assert!(down.iter().all(|v| (-30..=0).contains(v)));
        assert_eq!(Client::randomize(&mut rng, 0), 0);
    }
}
