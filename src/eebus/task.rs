//! The node's task: a SHIP hub (TLS 1.2, WebSocket, SHIP, SPINE, from the
//! `eebus` crate) that listens for the control box, dials it where its
//! address is configured, and trusts nothing but its SKI; the two use cases'
//! actors on it; and after every event what they hold, handed to steering
//! as the limits of source `eebus` and kept in the store.
//!
//! A limit write is acknowledged only once its limit is in force in the
//! site's runtime: the actor queues the answer, this task hands the limit
//! to steering, and the hub sends the answer on its next turn.
//!
//! Owns the hub and the actors; never commands a device.

use std::sync::Arc;
use std::time::Duration;

use eebus::runtime::{Hub, HubEvent, Node, TrustStore};
use eebus::ship::Ski;
use eebus::spine::{ErrorNumber, SpineEvent};
use eebus::tls::ShipTls;
use eebus::usecases::limitation::{self, ControllableSystemActor, CsEvent, LIMIT_ID};
use tokio_util::sync::CancellationToken;

use super::monitoring::Monitored;
use super::node::{self, UseCase};
use super::policy::{Held, Kept};
use super::store::EebusStore;
use super::{identity, limits_of, Tracked};
use crate::config::EebusConfig;
use crate::model::time::now_ms;
use crate::steering::runtime::SiteRuntime;
use crate::steering::sources::{Server, SourceStatus};

/// What the task needs.
pub struct Parts {
    pub config: EebusConfig,
    pub site: Arc<SiteRuntime>,
    /// What the site's meters read, for MGCP.
    pub live: Arc<crate::telemetry::Live>,
    /// Where each change of what a use case holds is recorded (the site's
    /// history).
    pub history: crate::steering::service::AuditQueue,
    pub store: EebusStore,
    pub state_dir: std::path::PathBuf,
}

/// One use case as the task follows it.
struct Follow {
    case: UseCase,
    actor: ControllableSystemActor,
    tracked: Tracked,
}

/// How often the loop takes the listener's connections and looks for its
/// cancellation, at the latest.
const DRAIN_EVERY: Duration = Duration::from_millis(200);

/// How often an overdue use-case deadline is run again.
const OVERDUE_EVERY: Duration = Duration::from_millis(10);

/// Refused writes are logged once per this many ms with their count.
const REFUSALS_LOGGED_EVERY_MS: i64 = 10_000;

/// Runs the node until `cancel`.
pub async fn run(p: Parts, cancel: CancellationToken) {
    let c = &p.config;
    let site = &p.site;
    let started_ms = now_ms();
    let mut status = SourceStatus {
        state: "waiting".into(),
        server: c.box_address.map(|a| a.to_string()).unwrap_or_default(),
        ..SourceStatus::default()
    };
    let Some((id, kept, built)) = prepare(&p, &mut status).await else {
        site.set_server_status(Server::Eebus, status);
        hold_failsafe(&p, started_ms, &cancel).await;
        return;
    };
    let node::Built {
        engine,
        use_cases: builders,
        monitors,
    } = built;
    let node_ski = id.ski;
    let ski = Ski::from_bytes(c.trusted_ski);
    let ship_id = identity::ship_id(c);
    let node = Node::new(ship_id.as_str(), ShipTls::new(id), TrustStore::with([ski]));
    let mut hub = Hub::new(node, engine);
    let now = hub.now();
    let follows: Vec<Follow> = builders
        .into_iter()
        .zip(kept)
        .map(|((case, b), kept)| Follow {
            case,
            actor: b.install(hub.engine_mut(), now),
            tracked: Tracked::new(kept),
        })
        .collect();
    let (mut incoming, announcement) = open_listener(c, node_ski, &mut status, &cancel).await;
    if let Some(a) = c.box_address {
        hub.remember(ski, a);
    }
    site.set_server_status(Server::Eebus, status.clone());
    let mut n = Running {
        hub,
        follows,
        status,
        refused: Refusals::default(),
        heard_at: None,
        monitors,
        measured_at: None,
        _announcement: announcement,
    };
    n.publish(&p).await;
    // `Hub::next` must not be raced (a write dropped half-way garbles the
    // stream): the cancellation and the listener's connections are taken
    // between calls, on a tick at least every `DRAIN_EVERY`.
    while !cancel.is_cancelled() {
        if let Some(rx) = &mut incoming {
            while let Ok(stream) = rx.try_recv() {
                n.hub.accept(stream);
            }
        }
        let now = n.hub.now();
        for f in &n.follows {
            // A deadline already due is run once, then no more often than
            // this: a deadline the machine does not move would spin the loop.
            n.hub
                .wake_at(f.actor.poll_timeout().max(now + OVERDUE_EVERY));
        }
        n.hub.wake_at(now + DRAIN_EVERY);
        match n.hub.next().await {
            Ok(e) => n.on_event(e, &p),
            Err(e) => {
                tracing::error!(error = %e, "EEBus hub stopped: the failsafe limits hold");
                n.status.state = "stopped".into();
                n.status.error = Some(e.to_string());
                site.set_server_status(Server::Eebus, n.status.clone());
                break;
            }
        }
        n.refused.log(now_ms());
        n.measure(&p);
        n.publish(&p).await;
    }
    n.hub
        .shutdown(eebus::ship::ConnectionCloseReason::Unspecific)
        .await;
    hold_failsafe(&p, started_ms, &cancel).await;
}

/// The node's identity, what the store kept of its use cases and its SPINE
/// device: `None` when it has no identity or cannot be built (said in the
/// log and in `status`; the failsafe limits hold then).
async fn prepare(
    p: &Parts,
    status: &mut SourceStatus,
) -> Option<(eebus::cert::Identity, [Option<Kept>; 2], node::Built)> {
    let id = match identity::load_or_make(&p.state_dir, &p.config) {
        Ok(id) => id,
        Err(e) => {
            tracing::error!(error = %e, "EEBus node has no identity: the failsafe limits hold");
            status.state = "noCertificate".into();
            status.error = Some(e.to_string());
            return None;
        }
    };
    status.identity = id.ski.to_display_string();
    let kept = load_kept(p).await;
    match node::build(&p.config, [kept[0].as_ref(), kept[1].as_ref()]) {
        Ok(b) => Some((id, kept, b)),
        Err(e) => {
            tracing::error!(error = %e, "EEBus node not built: the failsafe limits hold");
            status.error = Some(e);
            None
        }
    }
}

/// Listens for the box (and announces the node over mDNS where `mdns`);
/// without a listener the node only dials the box (said in `status`).
async fn open_listener(
    c: &EebusConfig,
    node_ski: Ski,
    status: &mut SourceStatus,
    cancel: &CancellationToken,
) -> (
    Option<tokio::sync::mpsc::Receiver<tokio::net::TcpStream>>,
    Option<super::announce::Announcement>,
) {
    match super::listener::listen(c.listen, cancel.child_token()).await {
        Ok((a, rx)) => {
            tracing::info!(listen = %a, ski = %status.identity, "EEBus node listening");
            let announcement = c
                .mdns
                .then(|| super::announce::announce(c, node_ski, a))
                .and_then(|r| {
                    r.map_err(|e| {
                        tracing::warn!(error = %e, "EEBus node not announced over mDNS: the box needs the controller's address")
                    })
                    .ok()
                });
            (Some(rx), announcement)
        }
        Err(e) => {
            tracing::error!(listen = %c.listen, error = %e, "EEBus node cannot listen: it dials the box only");
            status.error = Some(format!("cannot listen on {}: {e}", c.listen));
            (None, None)
        }
    }
}

/// What the store kept of each use case (LPC, then LPP); nothing when it
/// cannot be read (the use case starts in `init`, on the failsafe).
async fn load_kept(p: &Parts) -> [Option<Kept>; 2] {
    let mut kept = [None, None];
    for (i, name) in ["lpc", "lpp"].into_iter().enumerate() {
        match p.store.load(&p.config.site, name).await {
            Ok(k) => kept[i] = k,
            Err(e) => {
                tracing::warn!(use_case = name, error = %e, "EEBus state not read: starting in init")
            }
        }
    }
    kept
}

/// The node once it runs: the hub, the use cases, what is shown of it.
struct Running {
    hub: Hub,
    follows: Vec<Follow>,
    status: SourceStatus,
    refused: Refusals,
    /// When the box's last heartbeat arrived, on the hub's monotonic clock
    /// (which starts at zero with the node).
    heard_at: Option<Duration>,
    /// MGCP's and MPC's units, and when they were last read (hub clock).
    monitors: Vec<node::Monitor>,
    measured_at: Option<Duration>,
    /// The mDNS announcement, withdrawn when the node stops.
    _announcement: Option<super::announce::Announcement>,
}

impl Running {
    fn show(&self, p: &Parts) {
        p.site.set_server_status(Server::Eebus, self.status.clone());
    }

    fn on_event(&mut self, event: HubEvent, p: &Parts) {
        let now = self.hub.now();
        match event {
            HubEvent::TrustRequested { peer, origin } => {
                tracing::warn!(ski = %peer.ski.to_display_string(), %origin, "EEBus peer refused: its SKI is not the trusted box's");
                self.hub.refuse(peer.ski);
            }
            HubEvent::HandshakeFailed { origin, error, ski } => {
                tracing::warn!(%origin, ski = ?ski.map(|s| s.to_display_string()), error = %error, "EEBus connection refused");
            }
            HubEvent::Connected { ski, .. } => {
                tracing::info!(ski = %ski, "EEBus control box connected");
                self.status.state = "connected".into();
                self.status.error = None;
                self.status.last_contact_ms = Some(now_ms());
                self.show(p);
            }
            HubEvent::Disconnected { ski, reason } => {
                tracing::warn!(ski = %ski, reason = %reason, "EEBus control box gone");
                self.status.state = "waiting".into();
                self.show(p);
                for f in &mut self.follows {
                    forget_guard(f, self.hub.engine_mut(), now);
                }
            }
            HubEvent::Spine(event) => {
                if let SpineEvent::DataNotified { resolved, .. } = &event {
                    if limitation::read_heartbeat(resolved).is_some() {
                        self.heard_at = Some(now);
                        self.status.last_contact_ms = Some(now_ms());
                        self.show(p);
                    }
                }
                if let Some(refusal) = screen(&event, &self.follows, &p.config) {
                    if let SpineEvent::WriteRequested(w) = &event {
                        self.hub.engine_mut().reject_write(
                            w.token,
                            ErrorNumber::CommandRejected,
                            now,
                        );
                    }
                    self.refused.note(refusal);
                    return;
                }
                for f in &mut self.follows {
                    if let Some(e) = f.actor.handle_event(self.hub.engine_mut(), &event, now) {
                        on_decision(f, &e, &mut self.refused);
                    }
                }
            }
            HubEvent::Tick => {
                for f in &mut self.follows {
                    if let Some(e) = f.actor.handle_timeout(self.hub.engine_mut(), now) {
                        on_decision(f, &e, &mut self.refused);
                    }
                }
            }
            _ => {}
        }
    }

    /// Reads the meters into MGCP's unit and the batteries into MPC's once
    /// a second, and notifies the box's subscriptions of what moved.
    fn measure(&mut self, p: &Parts) {
        let now = self.hub.now();
        if self
            .measured_at
            .is_some_and(|t| now.saturating_sub(t) < Duration::from_secs(1))
        {
            return;
        }
        self.measured_at = Some(now);
        let at_ms = now_ms();
        for m in &mut self.monitors {
            let devices = match m.what {
                Monitored::GridConnectionPoint => &p.site.devices.meters,
                Monitored::Consumers => &p.site.devices.batteries,
            };
            super::monitoring::update(m.what, &mut m.unit, &p.live, devices, at_ms);
            m.unit.notify(self.hub.engine_mut(), &m.measurement, now);
        }
    }

    /// Hands what the use cases hold to steering at once, then keeps what
    /// changed: control never waits on the disk.
    async fn publish(&mut self, p: &Parts) {
        let now = now_ms();
        let silent = self
            .hub
            .now()
            .saturating_sub(self.heard_at.unwrap_or_default());
        let silent_ms = i64::try_from(silent.as_millis()).unwrap_or(i64::MAX);
        let mut helds: Vec<(Held, i64)> = Vec::new();
        let mut changed = Vec::new();
        for f in &mut self.follows {
            let (h, since, moved) = f.tracked.update(f.actor.system(), now, silent_ms);
            if moved {
                p.history.note(crate::steering::audit::AuditEvent {
                    site: p.config.site.clone(),
                    at_ms: now,
                    kind: crate::steering::audit::AuditKind::Eebus {
                        use_case: f.case.name.to_string(),
                        state: h.state.to_string(),
                        limit_w: h.value_w,
                        failsafe: h.failsafe,
                    },
                });
                if h.protective {
                    tracing::warn!(use_case = f.case.name, w = ?h.value_w, "EEBus box silent past the failsafe duration: the failsafe limit holds");
                }
                let config = f.actor.system().config();
                changed.push((
                    f.case.name,
                    Kept {
                        state: h.state.to_string(),
                        failsafe: h.failsafe,
                        since_ms: since,
                        limit: h.value_w.filter(|_| !h.failsafe).map(|w| (w, h.until_ms)),
                        failsafe_w: config.failsafe_watts,
                        failsafe_duration_s: config.failsafe_duration.as_secs(),
                    },
                ));
            }
            helds.push((h, since));
        }
        p.site
            .set_server_limits(Server::Eebus, limits_of(&p.config, &helds));
        for (name, kept) in changed {
            if let Err(e) = p.store.save(&p.config.site, name, kept, now).await {
                tracing::warn!(use_case = name, error = %e, "EEBus state not kept");
            }
        }
    }
}

/// A write the node refuses before the use case sees it: a limit above the
/// connection's contractual maximum. It changes no limit.
fn screen(event: &SpineEvent, follows: &[Follow], c: &EebusConfig) -> Option<String> {
    let SpineEvent::WriteRequested(w) = event else {
        return None;
    };
    let f = follows.iter().find(|f| f.case.load_control == w.feature)?;
    let write = limitation::read_limit_write(&w.resolved, LIMIT_ID)?;
    let max = match f.case.name {
        "lpc" => c.contractual_max_consumption_w,
        _ => c.contractual_max_production_w,
    };
    (write.is_active && write.watts > max).then(|| {
        format!(
            "{} limit {} W is above the contractual maximum {} W",
            f.case.name, write.watts, max
        )
    })
}

/// The box's connection is gone, and with it the engine's bindings and
/// subscriptions (LPC implementation guide §2.17), but the crate's actor
/// still counts the box as its bound Energy Guard with its heartbeat
/// followed. Told that both bindings were released, it binds the box anew
/// when it is back and subscribes to its heartbeat again; without it, a
/// box that reconnects is never heard again, and the site stays in
/// failsafe. The use case's state is untouched.
fn forget_guard(f: &mut Follow, engine: &mut eebus::spine::Engine, now: Duration) {
    for server in [&f.case.load_control, &f.case.device_configuration] {
        let released = SpineEvent::BindingReleased {
            client: server.clone(),
            server: server.clone(),
        };
        let _ = f.actor.handle_event(engine, &released, now);
    }
}

fn on_decision(f: &mut Follow, e: &CsEvent, refused: &mut Refusals) {
    let now = now_ms();
    match e {
        CsEvent::LimitDecided { write, outcome, .. } => {
            if outcome.is_accepted() {
                f.tracked.accepted(write, now);
                tracing::info!(use_case = f.case.name, active = write.is_active, w = write.watts, duration_s = ?write.duration.map(|d| d.as_secs()), "EEBus limit accepted");
            } else {
                refused.note(format!(
                    "{} limit {} W refused: {outcome:?}",
                    f.case.name, write.watts
                ));
            }
        }
        CsEvent::LimitUnreadable { outcome, .. } => {
            refused.note(format!("{} limit unreadable: {outcome:?}", f.case.name));
        }
        CsEvent::FailsafeDecided { outcome, .. } => {
            tracing::info!(
                use_case = f.case.name,
                ?outcome,
                failsafe_w = f.actor.system().config().failsafe_watts,
                "EEBus failsafe values written"
            );
        }
        CsEvent::StateChanged { from, to } => {
            tracing::info!(use_case = f.case.name, from = %from, to = %to, "EEBus use case state");
        }
        _ => {}
    }
}

/// Without a node: the failsafe values, as configured, until `cancel`.
async fn hold_failsafe(p: &Parts, started_ms: i64, cancel: &CancellationToken) {
    let c = &p.config;
    let fail = |w: f64| {
        (
            Held {
                state: "failsafe state",
                value_w: Some(w),
                failsafe: true,
                protective: true,
                until_ms: None,
            },
            started_ms,
        )
    };
    p.site.set_server_limits(
        Server::Eebus,
        limits_of(
            c,
            &[
                fail(c.failsafe_consumption_w),
                fail(c.failsafe_production_w),
            ],
        ),
    );
    cancel.cancelled().await;
}

/// Refused writes, counted between log lines: a flood of them is one line
/// every ten seconds, not one each.
#[derive(Default)]
struct Refusals {
    count: u64,
    last: Option<String>,
    logged_ms: i64,
}

impl Refusals {
    fn note(&mut self, why: String) {
        self.count += 1;
        self.last = Some(why);
    }
    fn log(&mut self, now: i64) {
        if self.count == 0 || now - self.logged_ms < REFUSALS_LOGGED_EVERY_MS {
            return;
        }
        tracing::warn!(count = self.count, last = ?self.last, "EEBus writes refused (NACK); no limit changed");
        self.count = 0;
        self.logged_ms = now;
    }
}
