//! What the link sends: retained state (status, listing, steering), the outbox
//! (live rows at once, the backlog paced), RPC answers, and what it does with
//! each PUBACK: an accepted row is deleted, a refused one stays and is sent
//! again after the refusal's backoff (`refusal.rs`).
//!
//! Only sequencing: which rows, in which order, under which window. It must not
//! decide how long to wait (that is `refusal.rs` and `backoff.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Link, Outgoing, State};
use crate::api::device_views;
use crate::model::DeviceId;
use crate::uplink::flight::{Pacer, Publish, Tag};
use crate::uplink::outbox::{decode_row, Row};
use crate::uplink::payload;
use crate::uplink::refusal::Reason;
use crate::uplink::stats::bump;

/// Telemetry publishes awaiting PUBACK at most.
const WINDOW: usize = 64;
/// Rows read from the outbox per query at most.
const FETCH: usize = 64;
/// How long the end of a refusal hold waits again for telemetry still in flight.
const SETTLE: Duration = Duration::from_millis(100);

impl Link {
    /// The broker accepted a publish.
    pub(super) fn on_accepted(&self, s: &mut State, tag: Tag) {
        if let Tag::Telemetry(seq) = tag {
            bump(&self.p.stats.telemetry_acked);
            s.acked.push(seq);
        }
        if let Some(end) = s.refusals.accepted(Instant::now(), tag) {
            self.p.stats.refusing.store(false, Ordering::Relaxed);
            tracing::info!(
                refused = end.refused,
                lasted_s = end.lasted.as_secs(),
                "MQTT broker accepts publishes again"
            );
        }
    }

    /// The broker refused a publish: nothing is deleted; the first refusal of
    /// a spell is logged with its topic and reason.
    pub(super) fn on_refused(&self, s: &mut State, p: Publish, reason: Reason) {
        if let Some(c) = self.p.stats.refused.get(reason.index()) {
            bump(c);
        }
        let random = s.jitter.next_u64();
        if s.refusals.refused(Instant::now(), p.tag, random) {
            self.p.stats.refusing.store(true, Ordering::Relaxed);
            let retry_in_ms = s
                .refusals
                .hold_until()
                .map(|t| t.saturating_duration_since(Instant::now()).as_millis() as u64);
            tracing::warn!(
                topic = %p.topic,
                reason = reason.name(),
                code = reason.0,
                retry_in_ms,
                "MQTT broker refuses publishes; refused telemetry stays in the outbox and is sent again after a backoff"
            );
        } else {
            tracing::debug!(topic = %p.topic, reason = reason.name(), "MQTT publish refused");
        }
    }

    /// A refusal hold is over: send again what was refused.
    pub(super) async fn end_hold(&mut self, s: &mut State) {
        if !s.connected {
            // The next connect sends everything again anyway.
            s.refusals.reconnected();
            return;
        }
        if s.refusals.holds_telemetry() && s.flight.telemetry_in_flight() > 0 {
            // Rows still on their way would go out twice after the rewind.
            s.refusals.postpone(Instant::now() + SETTLE);
            return;
        }
        let oldest = self.fetch(0, u64::MAX, 1).await.first().map(|r| r.seq);
        let retry = s.refusals.retry(oldest);
        tracing::debug!(?retry, "MQTT sending again what the broker refused");
        if retry.retained {
            self.publish_retained(s);
        }
        if retry.telemetry {
            self.rewind(s).await;
        }
        self.pump(s).await;
    }

    /// Every row not yet acknowledged becomes the backlog, sent again oldest
    /// first; acknowledged ones are deleted first so they are not.
    pub(super) async fn rewind(&self, s: &mut State) {
        self.p.outbox.remove(std::mem::take(&mut s.acked));
        if let Err(e) = self.p.outbox.commit_removals().await {
            tracing::warn!(error = %e, "acknowledged outbox rows not deleted; they are sent again");
        }
        s.boundary = *self.p.outbox.appended().borrow();
        s.backlog_cursor = 0;
        s.live_cursor = s.boundary;
        s.pacer = Pacer::new(self.p.drain_rate, Instant::now());
    }

    pub(super) fn send_answer(&self, s: &mut State, out: Outgoing) {
        if s.connected {
            self.send(
                s,
                out.topic,
                false,
                out.payload,
                out.correlation,
                Tag::Answer,
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
        self.send_marked(s, topic, retain, payload, correlation, tag, false)
    }

    /// [`Self::send`], with the clock's mark for telemetry stamped while the
    /// wall clock was known not to be synchronised.
    #[allow(clippy::too_many_arguments)]
    fn send_marked(
        &self,
        s: &mut State,
        topic: String,
        retain: bool,
        payload: Vec<u8>,
        correlation: Option<axum::body::Bytes>,
        tag: Tag,
        unsynchronised: bool,
    ) -> bool {
        match self
            .client
            .publish(topic.clone(), retain, payload, correlation, unsynchronised)
        {
            Ok(()) => {
                bump(&self.p.stats.published);
                s.flight.queued(tag, topic);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "MQTT publish not queued");
                false
            }
        }
    }

    /// Status, listing and every site's steering state (all retained).
    pub(super) fn publish_retained(&mut self, s: &mut State) {
        if !s.connected {
            return;
        }
        let status = payload::status_online(env!("CARGO_PKG_VERSION"), self.p.started_at_ms);
        self.send(s, self.p.topics.status(), true, status, None, Tag::Retained);
        self.publish_listing(s);
        self.publish_steering(s, true);
    }

    pub(super) fn publish_listing(&self, s: &mut State) {
        if !s.connected || s.refusals.holds_retained() {
            return;
        }
        let devices = self.p.live.devices();
        let body =
            serde_json::to_vec(&device_views(&self.p.live, &devices, None)).unwrap_or_default();
        self.send(s, self.p.topics.devices(), true, body, None, Tag::Retained);
    }

    pub(super) fn publish_steering(&mut self, s: &mut State, all: bool) {
        let states = self.p.steering.borrow_and_update().clone();
        // While held, the retry publishes every site's state.
        if !s.connected || s.refusals.holds_retained() {
            return;
        }
        for (site, body) in states {
            let fresh = s
                .steering_sent
                .get(&site)
                .is_none_or(|b| !Arc::ptr_eq(b, &body));
            if all || fresh {
                let bytes = serde_json::to_vec(&*body).unwrap_or_default();
                if self.send(
                    s,
                    self.p.topics.steering(&site),
                    true,
                    bytes,
                    None,
                    Tag::Retained,
                ) {
                    s.steering_sent.insert(site, body);
                }
            }
        }
    }

    pub(super) fn pace_deadline(&self, s: &State) -> Option<Instant> {
        let backlog_left = s.backlog_cursor < s.boundary;
        let room = s.flight.telemetry_in_flight() < WINDOW;
        let held = s.refusals.holds_telemetry();
        (s.connected && backlog_left && room && !held).then(|| s.pacer.next_token())
    }

    /// Sends what the window allows: live rows first, then paced backlog rows.
    /// Nothing while the broker's refusal holds telemetry back.
    pub(super) async fn pump(&self, s: &mut State) {
        self.p.outbox.remove(std::mem::take(&mut s.acked));
        if !s.connected || s.refusals.holds_telemetry() {
            return;
        }
        let room = WINDOW
            .saturating_sub(s.flight.telemetry_in_flight())
            .min(FETCH);
        if room > 0 && *self.p.outbox.appended().borrow() > s.live_cursor {
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
        self.p
            .outbox
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
            let Some((samples, unsynchronised)) = decode_row(DeviceId(0), &row.body) else {
                tracing::error!(seq = row.seq, device = %row.device, "corrupt outbox row dropped");
                s.acked.push(row.seq);
                last = Some(row.seq);
                continue;
            };
            let body = payload::measurements(&row.device, &samples, row.seq);
            let topic = self.p.topics.measurements(&row.device);
            let tag = Tag::Telemetry(row.seq);
            if !self.send_marked(s, topic, false, body, None, tag, unsynchronised) {
                break;
            }
            last = Some(row.seq);
        }
        last
    }

    /// Retained offline status, then DISCONNECT (which makes the broker drop the will).
    pub(super) fn say_goodbye(&self) {
        let _ = self.client.publish(
            self.p.topics.status(),
            true,
            payload::status_offline(),
            None,
            false,
        );
        let _ = self.client.disconnect();
    }
}
