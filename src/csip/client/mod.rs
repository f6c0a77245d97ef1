//! The CSIP-AUS client task of one site: the owner of its connection to the
//! utility server. Each second it polls what is due (`polls.rs`), moves the
//! schedule on in server time, hands the limits in force to steering,
//! samples the site for its telemetry, and posts what it owes the server
//! (the DER's status, readings, responses). Discovery and registration are
//! `discover.rs`, the programs `follow.rs`, what it reports `report.rs`.
//!
//! It never commands a device: steering holds the limits it hands over.
//! Whatever the server does, the schedule as last received (kept in the
//! store) stays in force.

mod clock;
mod discover;
mod follow;
pub mod polls;
pub mod readings;
mod report;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::http::{Http, HttpError};
use super::limits::{to_limits, Ramps, Step};
use super::resource::der::{Capability, DerLinks, Settings};
use super::resource::program::Mode;
use super::schedule::{Event, Schedule};
use super::status::{State, Status};
use super::store::{CsipStore, Pending, Saved};
use super::xml::XmlError;
use crate::config::csip_files::CsipMaterial;
use crate::config::CsipConfig;
use crate::model::time::now_ms;
use crate::steering::runtime::SiteRuntime;
use crate::steering::SteeringService;
use crate::telemetry::Live;
use clock::ServerClock;
use polls::Polls;
use readings::Averager;

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

/// The most Responses and readings kept waiting for the server.
const PENDING_MAX: usize = 1_000;
/// The most reading posts kept waiting for the server.
const READINGS_MAX: usize = 120;

pub(crate) struct Client {
    cfg: CsipConfig,
    lfdi: String,
    sfdi: u64,
    http: Option<Http>,
    site: Arc<SiteRuntime>,
    live: Arc<Live>,
    steering: SteeringService,
    store: CsipStore,
    status: Status,
    /// The CSIP-AUS namespace written: the server's own once seen.
    ns: String,
    links: Links,
    /// When discovery runs next (monotonic ms); `None` once it succeeded.
    discover_at: Option<i64>,
    discover_backoff_ms: i64,
    polls: Polls,
    schedule: Schedule,
    clock: ServerClock,
    ramps: Ramps,
    pending: VecDeque<Pending>,
    averager: Averager,
    readings: VecDeque<(String, String)>,
    /// The site's and the DER's mirror: href and post rate.
    mirrors: Vec<(u16, String, Option<u32>)>,
    der: Option<DerLinks>,
    sent_capability: Option<Capability>,
    sent_settings: Option<Settings>,
    sent_status: Option<(u8, u8)>,
    set_grad_w: u16,
    /// What the controls in force do to the DER now.
    held: super::site::Held,
    dirty: bool,
    /// The last request's error, by poll, so a failure repeating is logged
    /// once.
    last_error: Option<String>,
    last_tick_ms: i64,
    rng: u64,
    started: tokio::time::Instant,
}

/// Runs the client until `cancel`: a tick each second, and at once when a
/// poll falls due between two.
pub async fn run(p: Parts, cancel: CancellationToken) {
    let Some(mut c) = Client::new(p).await else {
        return;
    };
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
                let at = c.started + Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0));
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
}

impl Client {
    async fn new(p: Parts) -> Option<Client> {
        let (lfdi, sfdi) = match &p.material {
            Ok(m) => (m.identity.lfdi.clone(), m.identity.sfdi),
            Err(_) => (String::new(), 0),
        };
        let timeout = Duration::from_millis(p.config.timeout_ms);
        let http = match p.material {
            Ok(m) => match super::tls::client_config(&m.tls) {
                Ok(tls) => Some(Http::new(p.config.server.clone(), Arc::new(tls), timeout)),
                Err(e) => {
                    tracing::error!(site = %p.config.site, error = %e, "CSIP-AUS client cannot set up TLS: the schedule as last received holds");
                    None
                }
            },
            Err(e) => {
                tracing::error!(site = %p.config.site, error = %e, "CSIP-AUS certificate files cannot be used: the schedule as last received holds");
                None
            }
        };
        let saved = match p.store.load(&p.config.site).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(site = %p.config.site, error = %e, "the CSIP-AUS schedule kept in the store cannot be read");
                None
            }
        };
        let Saved {
            schedule,
            offset_ms,
            pending,
        } = saved.unwrap_or_default();
        if !schedule.programs.is_empty() || !schedule.events.is_empty() {
            tracing::info!(
                site = %p.config.site,
                programs = schedule.programs.len(),
                events = schedule.events.len(),
                "CSIP-AUS schedule restored from the store"
            );
        }
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        p.status.update(|s| {
            s.state = if http.is_some() {
                State::Discovering
            } else {
                State::NoCertificate
            };
        });
        Some(Client {
            lfdi,
            sfdi,
            discover_at: http.as_ref().map(|_| 0),
            http,
            site: p.site,
            live: p.live,
            steering: p.steering,
            store: p.store,
            status: p.status,
            ns: super::xml::write::CSIPAUS.to_string(),
            links: Links::default(),
            discover_backoff_ms: 0,
            polls: Polls::default(),
            schedule,
            clock: ServerClock::new(offset_ms),
            ramps: Ramps::default(),
            pending: pending.into(),
            averager: Averager::default(),
            readings: VecDeque::new(),
            mirrors: Vec::new(),
            der: None,
            sent_capability: None,
            sent_settings: None,
            sent_status: None,
            set_grad_w: 0,
            held: super::site::Held::default(),
            dirty: false,
            last_error: None,
            last_tick_ms: now_ms(),
            rng: u64::from_le_bytes(seed) | 1,
            started: tokio::time::Instant::now(),
            cfg: p.config,
        })
    }

    /// When the next poll (or discovery) is due, monotonic ms.
    fn next_poll_ms(&self) -> Option<i64> {
        if self.state() == State::PinRefused {
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

    /// One second's work.
    async fn tick(&mut self) {
        let mono = self.mono_ms();
        if self.discover_at.is_some_and(|t| t <= mono) {
            self.discover().await;
        }
        if self.discover_at.is_none() && self.state() != State::PinRefused {
            for p in self.polls.due(self.mono_ms()) {
                self.poll(&p).await;
            }
        }
        let now = now_ms();
        let events = self.schedule.advance(self.clock.server_ms(now));
        self.handle(events);
        self.hand_over(now);
        self.sample(now);
        if self.talking() {
            self.report(now).await;
        }
        if self.dirty {
            self.save().await;
        }
        self.last_tick_ms = now;
    }

    fn state(&self) -> State {
        self.status.snapshot().state
    }

    /// Whether the client talks to the server now.
    fn talking(&self) -> bool {
        self.http.is_some()
            && self.discover_at.is_none()
            && !matches!(self.state(), State::PinRefused | State::NoCertificate)
    }

    fn set_state(&self, state: State) {
        self.status.update(|s| s.state = state);
    }

    /// A request answered: the server is reachable.
    fn contact(&mut self, resource: &'static str) {
        let now = now_ms();
        let was = self.state();
        self.status.update(|s| {
            s.last_contact_ms = Some(now);
            *s.polls.entry(resource).or_default() += 1;
            if s.state == State::Unreachable {
                s.state = State::Following;
            }
        });
        if was == State::Unreachable {
            tracing::info!(site = %self.cfg.site, server = %self.cfg.server.host, "CSIP-AUS server reachable again");
        }
        self.last_error = None;
    }

    /// A request failed: counted, logged once while it repeats.
    fn failed(&mut self, what: &str, f: &Failure) {
        let text = f.to_string();
        self.status.update(|s| {
            *s.failures.entry(f.kind()).or_default() += 1;
            s.last_error = Some(format!("{what}: {text}"));
            if !f.answered() && matches!(s.state, State::Following | State::Discovering) {
                s.state = State::Unreachable;
            }
        });
        if self.last_error.as_deref() != Some(&text) {
            tracing::warn!(site = %self.cfg.site, resource = what, error = %text, "CSIP-AUS request failed: the schedule as last received holds");
            self.last_error = Some(text);
        }
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

    /// Records what happened to events: history, log, and the Responses
    /// they ask for.
    fn handle(&mut self, events: Vec<Event>) {
        for e in events {
            self.dirty = true;
            let limits = self
                .schedule
                .events
                .get(&e.mrid)
                .map(|t| describe(&t.control.base))
                .unwrap_or_default();
            let required = e.status.required_by(e.response_required);
            if e.status == super::resource::response::ResponseStatus::Received {
                self.check_values(&e.mrid);
            }
            tracing::info!(
                site = %self.cfg.site,
                mrid = %e.mrid,
                program = %e.program,
                event = e.status.wire_name(),
                limits = %limits,
                "CSIP-AUS control"
            );
            self.steering.note(crate::steering::audit::AuditEvent {
                site: self.cfg.site.clone(),
                at_ms: self.clock.local_ms(e.at_ms),
                kind: crate::steering::audit::AuditKind::Csip {
                    mrid: e.mrid.clone(),
                    program: e.program.clone(),
                    event: event_of(e.status),
                    limits,
                    response: required.then(|| e.status.code()),
                },
            });
            if let (true, Some(reply_to)) = (required, e.reply_to) {
                if self.pending.len() >= PENDING_MAX {
                    tracing::warn!(site = %self.cfg.site, "CSIP-AUS responses waiting for the server: the oldest dropped");
                    self.pending.pop_front();
                }
                self.pending.push_back(Pending {
                    reply_to,
                    mrid: e.mrid,
                    status: e.status,
                    at_s: e.at_ms.div_euclid(1000),
                });
            }
        }
    }

    /// Says what a new control asks that the site cannot or need not follow.
    fn check_values(&self, mrid: &str) {
        let Some(t) = self.schedule.events.get(mrid) else {
            return;
        };
        let rating = super::site::snapshot(&self.live, &self.site.devices).set_max_w();
        for m in [Mode::Import, Mode::Export, Mode::Generation, Mode::Load] {
            let Some(v) = t.control.base.value(m) else {
                continue;
            };
            if v < 0.0 {
                tracing::warn!(site = %self.cfg.site, mrid, mode = m.element(), value = v, "CSIP-AUS control with a negative limit: held as 0 W");
            } else if rating > 0.0 && v > rating && matches!(m, Mode::Generation | Mode::Load) {
                tracing::info!(site = %self.cfg.site, mrid, mode = m.element(), value = v, rating, "CSIP-AUS limit above the DER's rating: it does not bind");
            }
        }
    }

    /// Hands the limits in force to steering.
    fn hand_over(&mut self, now: i64) {
        let server = self.clock.server_ms(now);
        let f = self.schedule.in_force(server);
        let snap = super::site::snapshot(&self.live, &self.site.devices);
        let dt_s = ((now - self.last_tick_ms) as f64 / 1000.0).clamp(0.0, 10.0);
        let failsafe = matches!(self.state(), State::Unreachable | State::NoCertificate);
        let set = to_limits(
            &f,
            &mut self.ramps,
            &Step {
                now_ms: now,
                dt_s,
                offset_ms: server - now,
                set_max_w: snap.set_max_w(),
                failsafe,
            },
        );
        if let Some(g) = f.set_grad_w {
            if g != self.set_grad_w {
                self.set_grad_w = g;
            }
        }
        self.status.update(|s| {
            s.limits = set.clone();
            s.offset_ms = server - now;
            s.events_followed = self.schedule.pending().len();
        });
        self.site.set_csip(set);
        let snap = self.status.snapshot();
        self.site
            .set_csip_status(crate::steering::sources::SourceStatus {
                state: snap.state.wire_name().to_string(),
                server: format!(
                    "https://{}:{}{}",
                    self.cfg.server.host, self.cfg.server.port, self.cfg.server.path
                ),
                identity: self.lfdi.clone(),
                last_contact_ms: snap.last_contact_ms,
                error: snap.last_error,
            });
        let off = |m: Mode| f.get(m).is_some_and(|v| v < 0.5);
        self.held = super::site::Held {
            disconnected: off(Mode::Connect),
            deenergized: off(Mode::Energize),
        };
    }

    /// Saves the schedule when it changed.
    async fn save(&mut self) {
        let saved = Saved {
            schedule: self.schedule.clone(),
            offset_ms: self.clock.server_ms(now_ms()) - now_ms(),
            pending: self.pending.iter().cloned().collect(),
        };
        match self.store.save(&self.cfg.site, saved, now_ms()).await {
            Ok(()) => self.dirty = false,
            Err(e) => {
                tracing::warn!(site = %self.cfg.site, error = %e, "the CSIP-AUS schedule could not be kept in the store: tried again");
            }
        }
    }
}

fn event_of(s: super::resource::response::ResponseStatus) -> crate::steering::audit::ControlEvent {
    use super::resource::response::ResponseStatus as R;
    use crate::steering::audit::ControlEvent as E;
    match s {
        R::Received => E::Received,
        R::Started => E::Started,
        R::Completed => E::Completed,
        R::Cancelled => E::Cancelled,
        R::Superseded => E::Superseded,
        R::Expired => E::Expired,
    }
}

/// What a control sets, in words.
pub fn describe(b: &super::resource::program::ControlBase) -> String {
    Mode::ALL
        .iter()
        .filter_map(|m| {
            let v = b.value(*m)?;
            Some(match m {
                Mode::Connect | Mode::Energize => format!("{} {}", m.element(), v >= 0.5),
                Mode::MaxLimPct => format!("{} {v} %", m.element()),
                _ => format!("{} {} W", m.element(), v.round()),
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
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

    #[test]
    fn a_control_is_described_in_its_elements_names() {
        let b = crate::csip::resource::program::ControlBase {
            export_w: Some(1_500.4),
            connect: Some(false),
            ..Default::default()
        };
        assert_eq!(describe(&b), "opModConnect false, opModExpLimW 1500 W");
    }
}
