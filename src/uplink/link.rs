//! The task that owns the MQTT connection: it polls the event loop, reconnects
//! with backoff, republishes retained state on every connect, drains the outbox
//! (live rows at once, the backlog paced), deletes rows on PUBACK, and hands RPC
//! requests to the bridge.
//!
//! The event loop's `poll` future is never dropped half-way (rumqttc is not
//! cancel-safe): it stays pinned while other work runs beside it. Nothing is
//! queued on the client while disconnected, so what rumqttc reports after a
//! CONNACK belongs to this connection. Decisions live in `flight.rs` and
//! `backoff.rs`; this file only sequences them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::backoff::{Backoff, Jitter};
use super::client::{Client, EventLoop, Incoming, LinkEvent};
use super::dedup::Dedup;
use super::flight::{Flight, Pacer, Tag};
use super::outbox::{decode, Outbox, Row};
use super::payload;
use super::rpc::{Answer, Bridge};
use super::stats::{bump, LinkStats};
use super::steering::SteeringStates;
use super::topics::Topics;
use crate::api::device_views;
use crate::liveness::Heartbeat;
use crate::model::{time::now_ms, DeviceId};
use crate::telemetry::Live;

/// Telemetry publishes awaiting PUBACK at most.
const WINDOW: usize = 64;
/// Rows read from the outbox per query at most.
const FETCH: usize = 64;
/// How long a clean shutdown waits for DISCONNECT to go out.
const GOODBYE: Duration = Duration::from_secs(2);
const HOUSEKEEPING: Duration = Duration::from_secs(60);

/// An RPC answer on its way out.
pub(super) struct Outgoing {
    topic: String,
    correlation: Option<axum::body::Bytes>,
    payload: Vec<u8>,
}

pub(super) struct Link {
    pub client: Client,
    pub topics: Topics,
    pub outbox: Outbox,
    pub bridge: Arc<Bridge>,
    pub dedup: Dedup,
    pub live: Arc<Live>,
    pub catalog: watch::Receiver<u64>,
    pub steering: watch::Receiver<SteeringStates>,
    pub started_at_ms: i64,
    pub drain_rate: u32,
    pub connected: watch::Sender<bool>,
    pub stats: Arc<LinkStats>,
    pub heartbeat: Heartbeat,
}

struct State {
    flight: Flight,
    connected: bool,
    /// Rows up to here existed at connect time: the backlog.
    boundary: u64,
    backlog_cursor: u64,
    live_cursor: u64,
    pacer: Pacer,
    acked: Vec<u64>,
    steering_sent: HashMap<String, Arc<Value>>,
}

enum Step {
    Event(Result<LinkEvent, String>),
    Stop,
}

impl Link {
    pub(super) async fn run(mut self, mut eventloop: EventLoop, cancel: CancellationToken) {
        let (answers_tx, mut answers) = mpsc::channel::<Outgoing>(64);
        let mut appended = self.outbox.appended();
        let mut s = State {
            flight: Flight::default(),
            connected: false,
            boundary: 0,
            backlog_cursor: 0,
            live_cursor: 0,
            pacer: Pacer::new(self.drain_rate, Instant::now()),
            acked: Vec::new(),
            steering_sent: HashMap::new(),
        };
        let backoff = Backoff::default();
        let mut jitter = Jitter::from_os();
        let mut attempt = 0u32;
        let mut stopping: Option<Instant> = None;
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING);
        let mut beat = Heartbeat::ticker();

        loop {
            let step = {
                let poll = eventloop.poll();
                tokio::pin!(poll);
                loop {
                    self.heartbeat.beat();
                    let pace = self.pace_deadline(&s);
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
                        Ok(()) = self.catalog.changed() => self.publish_listing(&mut s),
                        Ok(()) = self.steering.changed() => self.publish_steering(&mut s, false),
                        () = sleep_until(pace.unwrap_or_else(Instant::now)), if pace.is_some() => self.pump(&mut s).await,
                        _ = housekeeping.tick() => self.housekeeping(),
                        _ = beat.tick() => {}
                    }
                }
            };
            match step {
                Step::Stop => break,
                Step::Event(Ok(LinkEvent::Disconnecting)) if stopping.is_some() => break,
                Step::Event(Ok(event)) => {
                    if let LinkEvent::Connected { .. } = event {
                        attempt = 0;
                    }
                    self.on_event(&mut s, event, &answers_tx).await;
                }
                Step::Event(Err(error)) => {
                    self.on_lost(&mut s, &error, attempt);
                    eventloop.forget_pending();
                    if stopping.is_some() {
                        break;
                    }
                    let delay = backoff.delay(attempt, jitter.next_u64());
                    attempt = attempt.saturating_add(1);
                    tracing::debug!(
                        delay_ms = delay.as_millis() as u64,
                        attempt,
                        "MQTT reconnect after backoff"
                    );
                    let wait = sleep(delay);
                    tokio::pin!(wait);
                    loop {
                        self.heartbeat.beat();
                        tokio::select! {
                            () = &mut wait => break,
                            _ = beat.tick() => {}
                            () = cancel.cancelled() => return,
                            // Answers cannot go out now; the requester retries with the same id.
                            Some(_) = answers.recv() => {}
                        }
                    }
                }
            }
        }
        self.outbox.remove(std::mem::take(&mut s.acked));
        if let Err(e) = self.outbox.commit_removals().await {
            tracing::warn!(error = %e, "cannot delete acknowledged outbox rows at shutdown");
        }
        tracing::info!("MQTT uplink stopped");
    }

    async fn on_event(
        &mut self,
        s: &mut State,
        event: LinkEvent,
        answers: &mpsc::Sender<Outgoing>,
    ) {
        match event {
            LinkEvent::Connected { session_present } => {
                s.connected = true;
                bump(&self.stats.connects);
                s.flight.reset();
                tracing::info!(session_present, "MQTT connected");
                if self.client.subscribe(self.topics.rpc_request()).is_err() {
                    tracing::warn!("cannot queue the RPC subscription");
                }
                let status = payload::status_online(env!("CARGO_PKG_VERSION"), self.started_at_ms);
                self.send(s, self.topics.status(), true, status, None, Tag::Other);
                self.publish_listing(s);
                self.publish_steering(s, true);
                // Rows acknowledged on the last connection must not count as backlog.
                if let Err(e) = self.outbox.commit_removals().await {
                    tracing::warn!(error = %e, "acknowledged outbox rows not deleted; they are sent again");
                }
                s.boundary = *self.outbox.appended().borrow();
                s.backlog_cursor = 0;
                s.live_cursor = s.boundary;
                s.pacer = Pacer::new(self.drain_rate, Instant::now());
                self.pump(s).await;
            }
            LinkEvent::Sent(pkid) => s.flight.sent(pkid),
            LinkEvent::Acked(pkid) => {
                if let Some(seq) = s.flight.acked(pkid) {
                    bump(&self.stats.telemetry_acked);
                    s.acked.push(seq);
                    self.pump(s).await;
                }
            }
            LinkEvent::Message(m) => self.on_message(m, answers),
            // Connected for the outside once RPC requests reach us too.
            LinkEvent::Subscribed => {
                self.connected.send_replace(true);
            }
            LinkEvent::Other | LinkEvent::Disconnecting => {}
        }
    }

    fn on_lost(&mut self, s: &mut State, error: &str, attempt: u32) {
        if s.connected {
            bump(&self.stats.connections_lost);
            tracing::warn!(error, "MQTT connection lost; telemetry waits in the outbox");
        } else {
            bump(&self.stats.connect_failures);
            tracing::warn!(error, attempt, "MQTT connect failed");
        }
        s.connected = false;
        s.flight.reset();
        self.connected.send_replace(false);
        self.outbox.remove(std::mem::take(&mut s.acked));
    }

    fn on_message(&self, m: Incoming, answers: &mpsc::Sender<Outgoing>) {
        if m.topic != self.topics.rpc_request() {
            tracing::debug!(topic = %m.topic, "message on an unexpected topic ignored");
            return;
        }
        bump(&self.stats.rpc_requests);
        let bridge = self.bridge.clone();
        let answers = answers.clone();
        let topics = self.topics.clone();
        tokio::spawn(async move {
            let Answer { id, payload } = bridge.answer(&m.payload).await;
            let topic = match (m.response_topic, id) {
                (Some(t), _) => t,
                (None, Some(id)) => topics.rpc_response(&id),
                (None, None) => {
                    tracing::warn!(
                        "RPC request without a usable id or response topic: not answered"
                    );
                    return;
                }
            };
            let _ = answers
                .send(Outgoing {
                    topic,
                    correlation: m.correlation,
                    payload,
                })
                .await;
        });
    }

    fn send_answer(&self, s: &mut State, out: Outgoing) {
        if s.connected {
            self.send(
                s,
                out.topic,
                false,
                out.payload,
                out.correlation,
                Tag::Other,
            );
        }
    }

    /// Queues one QoS 1 publish on the current connection.
    fn send(
        &self,
        s: &mut State,
        topic: String,
        retain: bool,
        payload: Vec<u8>,
        correlation: Option<axum::body::Bytes>,
        tag: Tag,
    ) -> bool {
        match self.client.publish(topic, retain, payload, correlation) {
            Ok(()) => {
                bump(&self.stats.published);
                s.flight.queued(tag);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "MQTT publish not queued");
                false
            }
        }
    }

    fn publish_listing(&self, s: &mut State) {
        if !s.connected {
            return;
        }
        let body = serde_json::to_vec(&device_views(&self.live, None)).unwrap_or_default();
        self.send(s, self.topics.devices(), true, body, None, Tag::Other);
    }

    fn publish_steering(&mut self, s: &mut State, all: bool) {
        if !s.connected {
            return;
        }
        let states = self.steering.borrow_and_update().clone();
        for (site, body) in states {
            let fresh = s
                .steering_sent
                .get(&site)
                .is_none_or(|b| !Arc::ptr_eq(b, &body));
            if all || fresh {
                let bytes = serde_json::to_vec(&*body).unwrap_or_default();
                if self.send(
                    s,
                    self.topics.steering(&site),
                    true,
                    bytes,
                    None,
                    Tag::Other,
                ) {
                    s.steering_sent.insert(site, body);
                }
            }
        }
    }

    fn pace_deadline(&self, s: &State) -> Option<Instant> {
        let backlog_left = s.backlog_cursor < s.boundary;
        let room = s.flight.telemetry_in_flight() < WINDOW;
        (s.connected && backlog_left && room).then(|| s.pacer.next_token())
    }

    /// Sends what the window allows: live rows first, then paced backlog rows.
    async fn pump(&self, s: &mut State) {
        self.outbox.remove(std::mem::take(&mut s.acked));
        if !s.connected {
            return;
        }
        let room = WINDOW
            .saturating_sub(s.flight.telemetry_in_flight())
            .min(FETCH);
        if room > 0 && *self.outbox.appended().borrow() > s.live_cursor {
            let rows = self.fetch(s.live_cursor, u64::MAX, room).await;
            if let Some(last) = self.send_rows(s, &rows) {
                s.live_cursor = last;
            }
        }
        let room = WINDOW
            .saturating_sub(s.flight.telemetry_in_flight())
            .min(FETCH);
        if room > 0 && s.backlog_cursor < s.boundary {
            let n = s.pacer.take(Instant::now(), room);
            if n > 0 {
                let rows = self.fetch(s.backlog_cursor, s.boundary, n).await;
                if rows.len() < n {
                    s.backlog_cursor = s.boundary;
                }
                if let Some(last) = self.send_rows(s, &rows) {
                    s.backlog_cursor = s.backlog_cursor.max(last);
                }
            }
        }
    }

    async fn fetch(&self, after: u64, upto: u64, limit: usize) -> Vec<Row> {
        self.outbox
            .fetch(after, upto, limit)
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot read the outbox");
                Vec::new()
            })
    }

    /// Publishes rows in order until the client refuses; returns the last seq sent.
    fn send_rows(&self, s: &mut State, rows: &[Row]) -> Option<u64> {
        let mut last = None;
        for row in rows {
            let Some(samples) = decode(DeviceId(0), &row.body) else {
                tracing::error!(seq = row.seq, device = %row.device, "corrupt outbox row dropped");
                s.acked.push(row.seq);
                last = Some(row.seq);
                continue;
            };
            let body = payload::measurements(&row.device, &samples, row.seq);
            let topic = self.topics.measurements(&row.device);
            if !self.send(s, topic, false, body, None, Tag::Telemetry(row.seq)) {
                break;
            }
            last = Some(row.seq);
        }
        last
    }

    /// Retained offline status, then DISCONNECT (which makes the broker drop the will).
    fn say_goodbye(&self) {
        let _ = self
            .client
            .publish(self.topics.status(), true, payload::status_offline(), None);
        let _ = self.client.disconnect();
    }

    fn housekeeping(&self) {
        let dedup = self.dedup.clone();
        tokio::spawn(async move {
            if let Err(e) = dedup.prune(now_ms()).await {
                tracing::warn!(error = %e, "RPC dedup prune failed");
            }
        });
    }
}
