//! The task that owns the MQTT connection: it sets the client up (retrying while
//! the TLS files cannot be used), polls the event loop, reconnects with backoff,
//! tells what ended a connection (a session taken over, a message too large, the
//! broker closing it again and again), and offers RPC requests to the workers
//! (`workers.rs`), answering 429 itself past their queue's bound.
//! What goes out (retained state, the outbox, retries of what the broker
//! refused) is `link/outgoing.rs`.
//!
//! The event loop's `poll` future is never dropped half-way (rumqttc is not
//! cancel-safe): it stays pinned while other work runs beside it. Nothing is
//! queued on the client while disconnected, so what rumqttc reports after a
//! CONNACK belongs to this connection. Decisions live in `flight.rs`,
//! `backoff.rs` and `refusal.rs`; this file only sequences them.

mod outgoing;
mod version;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep, sleep_until, Instant, Interval};
use tokio_util::sync::CancellationToken;

use super::backoff::{Attempts, Ended, RETRY};
use super::client::{self, Client, EventLoop, Incoming, LinkEvent, Lost, LostKind};
use super::dedup::Dedup;
use super::flight::{Flight, Pacer, Tag};
use super::outbox::Outbox;
use super::refusal::Refusals;
use super::rpc::{Answer, Bridge, MAX_REQUEST as RPC_MAX_REQUEST};
use super::stats::{bump, LinkStats};
use super::steering::SteeringStates;
use super::topics::Topics;
use super::workers::{destination, respond, Context, Offer, Outgoing, Workers};
use crate::config::MqttConfig;
use crate::liveness::Heartbeat;
use crate::telemetry::Live;
use crate::util::Jitter;

/// How long a clean shutdown waits for DISCONNECT to go out.
const GOODBYE: Duration = Duration::from_secs(2);
const HOUSEKEEPING: Duration = Duration::from_secs(60);

/// What building the client needs.
#[derive(Clone)]
pub(super) struct Setup {
    pub config: MqttConfig,
    pub gateway_id: String,
    pub topics: Topics,
}

impl Setup {
    /// The client and its event loop, built off the runtime's threads (it
    /// reads and parses the TLS files).
    async fn build(&self) -> Result<(Client, EventLoop), String> {
        let s = self.clone();
        match tokio::task::spawn_blocking(move || {
            client::build(&s.config, &s.gateway_id, &s.topics)
        })
        .await
        {
            Ok(Ok(pair)) => Ok(pair),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the setup task failed: {e}")),
        }
    }
}

/// Everything else the link needs.
pub(super) struct Parts {
    pub client_id: String,
    pub max_incoming_kb: u32,
    pub topics: Topics,
    pub outbox: Outbox,
    /// The RPC workers' queue.
    pub rpc: Workers,
    /// The bridge and topics the workers answer with, for what the link
    /// answers itself (over the bound, too large to queue).
    pub rpc_context: Arc<Context>,
    pub dedup: Dedup,
    /// For the dedup record's pruning (one at a time).
    pub tasks: super::tasks::Tasks,
    pub live: Arc<Live>,
    pub catalog: watch::Receiver<u64>,
    pub steering: watch::Receiver<SteeringStates>,
    pub started_at_ms: i64,
    pub drain_rate: u32,
    pub connected: watch::Sender<bool>,
    pub stats: Arc<LinkStats>,
    pub heartbeat: Heartbeat,
}

struct Link {
    client: Client,
    p: Parts,
    /// Which MQTT version it speaks, and whether to change it.
    version: version::Version,
    /// The dedup record's pruning, while it runs.
    pruning: Option<tokio::task::JoinHandle<()>>,
    /// The RPC queue was full at the last offer (logged once per spell).
    rpc_full: bool,
}

struct State {
    flight: Flight,
    connected: bool,
    /// Rows up to here existed at connect time (or at the last retry): the backlog.
    boundary: u64,
    backlog_cursor: u64,
    live_cursor: u64,
    pacer: Pacer,
    acked: Vec<u64>,
    steering_sent: HashMap<String, Arc<Value>>,
    refusals: Refusals,
    attempts: Attempts,
    jitter: Jitter,
    /// Connections in a row the broker closed before they were stable.
    short_closes: u32,
    /// The next connect asks for a clean session (set back after it).
    clean_next: bool,
}

impl State {
    /// Before the first connect, the outbox paced at `drain_rate` from `now`.
    fn new(drain_rate: u32, now: Instant) -> State {
        State {
            flight: Flight::default(),
            connected: false,
            boundary: 0,
            backlog_cursor: 0,
            live_cursor: 0,
            pacer: Pacer::new(drain_rate, now),
            acked: Vec::new(),
            steering_sent: HashMap::new(),
            refusals: Refusals::default(),
            attempts: Attempts::default(),
            jitter: Jitter::from_os(),
            short_closes: 0,
            clean_next: false,
        }
    }
}

enum Step {
    Event(Result<LinkEvent, Lost>),
    Stop,
}

/// Sets the client up, then runs the link until `cancel`.
pub(super) async fn run(
    setup: Setup,
    parts: Parts,
    answers: mpsc::Receiver<Outgoing>,
    cancel: CancellationToken,
) {
    let Some((client, eventloop)) = set_up(&setup, &parts, &cancel).await else {
        return;
    };
    Link {
        client,
        p: parts,
        version: version::Version::new(setup),
        pruning: None,
        rpc_full: false,
    }
    .run(eventloop, answers, cancel)
    .await;
}

/// Builds the client, retrying with backoff while its TLS files cannot be used
/// (the reason is kept for `/readyz`). `None` when cancelled first.
async fn set_up(
    setup: &Setup,
    parts: &Parts,
    cancel: &CancellationToken,
) -> Option<(Client, EventLoop)> {
    let mut jitter = Jitter::from_os();
    let mut attempts = Attempts::default();
    let mut beat = Heartbeat::ticker();
    loop {
        let error = match setup.build().await {
            Ok(pair) => {
                if parts.stats.setup_problem().is_some() {
                    tracing::info!("MQTT uplink set up: its TLS files can be used now");
                }
                parts.stats.set_setup_problem(None);
                return Some(pair);
            }
            Err(e) => e,
        };
        let (attempt, _) = attempts.failed(Instant::now());
        let delay = RETRY.full_jitter(attempt, jitter.next_u64());
        tracing::warn!(
            error,
            retry_in_ms = delay.as_millis() as u64,
            "MQTT uplink cannot be set up; polling, storing and steering go on without it"
        );
        parts.stats.set_setup_problem(Some(error));
        if !pause(delay, &parts.heartbeat, &mut beat, cancel).await {
            return None;
        }
    }
}

/// Waits `delay`, beating; false when cancelled first.
async fn pause(
    delay: Duration,
    heartbeat: &Heartbeat,
    beat: &mut Interval,
    cancel: &CancellationToken,
) -> bool {
    let wait = sleep(delay);
    tokio::pin!(wait);
    loop {
        heartbeat.beat();
        tokio::select! {
            () = &mut wait => return true,
            _ = beat.tick() => {}
            () = cancel.cancelled() => return false,
        }
    }
}

impl Link {
    async fn run(
        mut self,
        mut eventloop: EventLoop,
        mut answers: mpsc::Receiver<Outgoing>,
        cancel: CancellationToken,
    ) {
        let mut appended = self.p.outbox.appended();
        let mut s = State::new(self.p.drain_rate, Instant::now());
        let mut stopping: Option<Instant> = None;
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING);
        let mut beat = Heartbeat::ticker();

        loop {
            let step = {
                let poll = eventloop.poll();
                tokio::pin!(poll);
                loop {
                    self.p.heartbeat.beat();
                    let pace = self.pace_deadline(&s);
                    let hold = s.refusals.hold_until();
                    tokio::select! {
                        r = &mut poll => break Step::Event(r),
                        () = cancel.cancelled(), if stopping.is_none() => {
                            if !s.connected {
                                break Step::Stop;
                            }
                            self.say_goodbye();
                            stopping = Some(Instant::now() + GOODBYE);
                        }
                        () = sleep_until(stopping.unwrap_or_else(Instant::now)), if stopping.is_some() => break Step::Stop,
                        Some(out) = answers.recv() => self.send_answer(&mut s, out),
                        Ok(()) = appended.changed() => self.pump(&mut s).await,
                        Ok(()) = self.p.catalog.changed() => self.publish_listing(&mut s),
                        Ok(()) = self.p.steering.changed() => self.publish_steering(&mut s, false),
                        () = sleep_until(pace.unwrap_or_else(Instant::now)), if pace.is_some() => self.pump(&mut s).await,
                        () = sleep_until(hold.unwrap_or_else(Instant::now)), if hold.is_some() => self.end_hold(&mut s).await,
                        _ = housekeeping.tick() => self.housekeeping(),
                        _ = beat.tick() => {}
                    }
                }
            };
            match step {
                Step::Stop => break,
                Step::Event(Ok(LinkEvent::Disconnecting)) if stopping.is_some() => break,
                Step::Event(Ok(event)) => {
                    if matches!(event, LinkEvent::Connected { .. }) && s.clean_next {
                        // Only this connect started a clean session.
                        eventloop.set_clean(false);
                        s.clean_next = false;
                    }
                    self.on_event(&mut s, event).await;
                }
                Step::Event(Err(lost)) => {
                    let delay = self.after_lost(&mut s, &lost, &mut eventloop).await;
                    if stopping.is_some() {
                        break;
                    }
                    if !self
                        .wait_to_reconnect(delay, &mut beat, &mut answers, &cancel)
                        .await
                    {
                        return;
                    }
                }
            }
        }
        self.p.outbox.remove(std::mem::take(&mut s.acked));
        if let Err(e) = self.p.outbox.commit_removals().await {
            tracing::warn!(error = %e, "cannot delete acknowledged outbox rows at shutdown");
        }
        tracing::info!("MQTT uplink stopped");
    }

    /// What a lost connection changes: its backoff (the delay returned), a
    /// fall back to MQTT 3.1.1 when the broker closed MQTT 5 at CONNECT, a
    /// clean session for the next connect when asked, and rumqttc's pending
    /// requests forgotten.
    async fn after_lost(
        &mut self,
        s: &mut State,
        lost: &Lost,
        eventloop: &mut EventLoop,
    ) -> Duration {
        let was_connected = s.connected;
        let delay = self.on_lost(s, lost);
        if self.version.lost(&self.client, was_connected, lost.kind) {
            match self.version.build_311().await {
                Ok((client, events)) => {
                    tracing::warn!(
                        error = %lost.message,
                        "MQTT broker closed the connection at CONNECT under MQTT 5: the uplink speaks MQTT 3.1.1 from now on (mqtt.protocol pins one)"
                    );
                    self.client = client;
                    *eventloop = events;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "MQTT 3.1.1 client not built: staying on MQTT 5")
                }
            }
        }
        if s.clean_next {
            eventloop.set_clean(true);
        }
        eventloop.forget_pending();
        delay
    }

    /// Waits `delay` before reconnecting, beating; answers that come meanwhile
    /// are dropped. False when cancelled first.
    async fn wait_to_reconnect(
        &self,
        delay: Duration,
        beat: &mut Interval,
        answers: &mut mpsc::Receiver<Outgoing>,
        cancel: &CancellationToken,
    ) -> bool {
        tracing::debug!(
            delay_ms = delay.as_millis() as u64,
            "MQTT reconnect after backoff"
        );
        let wait = sleep(delay);
        tokio::pin!(wait);
        loop {
            self.p.heartbeat.beat();
            tokio::select! {
                () = &mut wait => return true,
                _ = beat.tick() => {}
                () = cancel.cancelled() => return false,
                // Answers cannot go out now; the requester retries with the same id.
                Some(_) = answers.recv() => {}
            }
        }
    }

    async fn on_event(&mut self, s: &mut State, event: LinkEvent) {
        match event {
            LinkEvent::Connected {
                session_present,
                max_packet,
            } => {
                self.p.rpc_context.broker_said(max_packet);
                s.connected = true;
                bump(&self.p.stats.connects);
                s.flight.reset();
                s.attempts.connected(Instant::now());
                s.refusals.reconnected();
                self.version.connected(&self.client);
                let protocol = if self.client.is_v5() { "5" } else { "3.1.1" };
                tracing::info!(session_present, protocol, "MQTT connected");
                if self
                    .client
                    .subscribe_requests(&[self.p.topics.rpc_request(), self.p.topics.ops_request()])
                    .is_err()
                {
                    tracing::warn!("cannot queue the RPC and ops subscription");
                }
                self.publish_retained(s);
                // Rows acknowledged on the last connection must not count as backlog.
                self.rewind(s).await;
                self.pump(s).await;
            }
            LinkEvent::Sent(pkid) => s.flight.sent(pkid),
            LinkEvent::Acked(pkid) => {
                let Some(p) = s.flight.settled(pkid) else {
                    return;
                };
                self.on_accepted(s, p.tag);
                if let Tag::Telemetry(_) = p.tag {
                    self.pump(s).await;
                }
            }
            LinkEvent::Refused { pkid, reason } => {
                if let Some(p) = s.flight.settled(pkid) {
                    self.on_refused(s, p, reason);
                }
            }
            LinkEvent::Message(m) => self.on_message(s, m).await,
            // Connected for the outside once RPC requests reach us too.
            LinkEvent::Subscribed => {
                self.p.connected.send_replace(true);
            }
            LinkEvent::Other | LinkEvent::Disconnecting => {}
        }
    }

    /// Says what ended the connection and returns how long to wait.
    fn on_lost(&mut self, s: &mut State, lost: &Lost) -> Duration {
        let (attempt, ended) = s.attempts.failed(Instant::now());
        let client_id = self.p.client_id.as_str();
        match (lost.kind, ended) {
            (LostKind::TakenOver, _) => {
                s.short_closes = 0;
                bump(&self.p.stats.takeovers_said);
                tracing::warn!(
                    client_id,
                    "MQTT session taken over by another client with this client id: two agents share it (give each its own gateway_id)"
                );
            }
            (LostKind::Oversized, _) => {
                bump(&self.p.stats.oversized_breaks);
                s.clean_next = true;
                tracing::error!(
                    max_incoming_kb = self.p.max_incoming_kb,
                    error = %lost.message,
                    "MQTT broker sent a message over mqtt.max_incoming_kb; reconnecting with a clean session to drop it (messages the broker queued for this gateway are dropped; RPC requesters retry)"
                );
            }
            (LostKind::ClosedByPeer, Ended::Short) => {
                s.short_closes += 1;
                if s.short_closes >= 2 {
                    bump(&self.p.stats.takeovers_suspected);
                }
                if s.short_closes == 2 || (s.short_closes > 2 && s.short_closes.is_multiple_of(10))
                {
                    tracing::warn!(
                        client_id,
                        closes = s.short_closes,
                        "MQTT broker keeps closing the connection soon after connect: another client with this client id may be taking the session over (many brokers do not say so)"
                    );
                }
            }
            (_, Ended::NotConnected | Ended::Stable) => s.short_closes = 0,
            _ => {}
        }
        if s.connected {
            bump(&self.p.stats.connections_lost);
            tracing::warn!(error = %lost.message, "MQTT connection lost; telemetry waits in the outbox");
        } else {
            bump(&self.p.stats.connect_failures);
            tracing::warn!(error = %lost.message, attempt, "MQTT connect failed");
        }
        s.connected = false;
        s.flight.reset();
        self.p.connected.send_replace(false);
        self.p.outbox.remove(std::mem::take(&mut s.acked));
        self.p
            .stats
            .refusing
            .store(s.refusals.active(), Ordering::Relaxed);
        RETRY.full_jitter(attempt, s.jitter.next_u64())
    }

    /// Hands an RPC request to the workers; answers it here when it is too
    /// large to queue (413) or when the queue is full (429).
    async fn on_message(&mut self, s: &mut State, m: Incoming) {
        if m.topic != self.p.topics.rpc_request() && m.topic != self.p.topics.ops_request() {
            tracing::debug!(topic = %m.topic, "message on an unexpected topic ignored");
            return;
        }
        if m.retain {
            // MQTT 3.1.1 cannot ask the broker to keep retained messages back.
            tracing::warn!(
                bytes = m.payload.len(),
                "retained RPC request ignored: requests must not be retained (clear it on the broker)"
            );
            return;
        }
        bump(&self.p.stats.rpc_requests);
        if m.payload.len() > RPC_MAX_REQUEST {
            // Answered without being parsed beyond its id: nothing to queue.
            if let Some(out) = respond(&self.p.rpc_context, m).await {
                self.send_answer(s, out);
            }
            return;
        }
        let (m, full) = match self.p.rpc.offer(m) {
            Offer::Queued => {
                self.rpc_full = false;
                return;
            }
            Offer::Refused(m, full) => (m, full),
        };
        let bytes = m.payload.len();
        let Answer { id, payload, .. } = Bridge::busy(&m.payload, full.detail()).await;
        if !self.rpc_full {
            self.rpc_full = true;
            tracing::warn!(
                rpc_id = ?id,
                bound = ?full,
                "RPC requests arrive faster than they are answered: answering 429 past the queue's bound"
            );
        }
        let load = &self.p.rpc_context.load;
        let ops = m.topic == self.p.topics.ops_request();
        match destination(&self.p.topics, ops, m.response_topic, id) {
            Some(topic) => {
                bump(&load.refused_answered);
                self.send_answer(
                    s,
                    Outgoing {
                        topic,
                        correlation: m.correlation,
                        payload,
                    },
                );
            }
            None => {
                bump(&load.refused_unanswered);
                tracing::warn!(
                    bytes,
                    "RPC request without a usable id or response topic over the queue's bound: dropped"
                );
            }
        }
    }

    /// Prunes the dedup record, unless the last prune still runs.
    fn housekeeping(&mut self) {
        if self.pruning.as_ref().is_some_and(|p| !p.is_finished()) {
            tracing::debug!("RPC dedup prune still running: this one skipped");
            return;
        }
        let dedup = self.p.dedup.clone();
        self.pruning = Some(self.p.tasks.spawn(async move {
            if let Err(e) = dedup.prune(crate::model::time::now_ms()).await {
                tracing::warn!(error = %e, "RPC dedup prune failed");
            }
        }));
    }
}
