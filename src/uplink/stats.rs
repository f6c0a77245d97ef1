//! The uplink's counters (connections, publishes, acknowledged and refused
//! publishes, takeovers, RPC requests) and its `/metrics` collector, which adds
//! the connection and refusal state, the RPC record and the outbox backlog. The
//! link task counts; `/metrics` reads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::refusal::Reason;
use super::Uplink;
use crate::metrics::{Collect, Encoder, Kind};

/// One slot per refusal reason MQTT 5 defines, and one for others.
const REASONS: usize = Reason::KNOWN.len() + 1;

#[derive(Debug, Default)]
pub(super) struct LinkStats {
    pub(super) connects: AtomicU64,
    pub(super) connect_failures: AtomicU64,
    pub(super) connections_lost: AtomicU64,
    pub(super) published: AtomicU64,
    pub(super) telemetry_acked: AtomicU64,
    pub(super) rpc_requests: AtomicU64,
    /// Refused publishes by [`Reason::index`].
    pub(super) refused: [AtomicU64; REASONS],
    /// A refusal spell is on.
    pub(super) refusing: AtomicBool,
    /// Sessions taken over, as the broker said (MQTT 5) or as it looked.
    pub(super) takeovers_said: AtomicU64,
    pub(super) takeovers_suspected: AtomicU64,
    /// RPC requests answered 413.
    pub(super) rpc_too_large: AtomicU64,
    /// Connections broken by an incoming message over `max_incoming_kb`.
    pub(super) oversized_breaks: AtomicU64,
    /// RPC answers over `max_outgoing_kb`, sent as a 413 problem instead.
    pub(super) answers_too_large: AtomicU64,
    /// Why the uplink cannot be set up (TLS files), while it cannot.
    setup_problem: Mutex<Option<String>>,
}

impl LinkStats {
    pub(super) fn set_setup_problem(&self, problem: Option<String>) {
        *self.setup_problem.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }

    pub(super) fn setup_problem(&self) -> Option<String> {
        self.setup_problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> f64 {
    c.load(Ordering::Relaxed) as f64
}

fn flag(b: &AtomicBool) -> f64 {
    if b.load(Ordering::Relaxed) {
        1.0
    } else {
        0.0
    }
}

impl Collect for Uplink {
    fn collect(&self, out: &mut Encoder) {
        self.collect_link(out);
        self.collect_rpc_and_outbox(out);
    }
}

impl Uplink {
    /// The session's families: connected, refusing, set up, refusals,
    /// takeovers, connections, publishes and acknowledgements.
    fn collect_link(&self, out: &mut Encoder) {
        let l = &self.link_stats;
        out.family(
            "sitegate_mqtt_connected",
            Kind::Gauge,
            "1 while a broker session is up and the RPC subscription is acknowledged.",
        )
        .sample(&[], if self.is_connected() { 1.0 } else { 0.0 });
        out.family(
            "sitegate_mqtt_refusing",
            Kind::Gauge,
            "1 while the broker refuses publishes (MQTT 5 PUBACK reason 0x80 or more) that were not accepted again: connected, but not delivering.",
        )
        .sample(&[], flag(&l.refusing));
        out.family(
            "sitegate_mqtt_set_up",
            Kind::Gauge,
            "1 once the uplink could be set up (its TLS files are usable); 0 while it retries (see /readyz).",
        )
        .sample(&[], if l.setup_problem().is_none() { 1.0 } else { 0.0 });
        let mut refused = out.family(
            "sitegate_mqtt_publishes_refused_total",
            Kind::Counter,
            "Publishes the broker refused, by PUBACK reason; refused telemetry stays in the outbox and is sent again.",
        );
        for (i, reason) in Reason::labels().enumerate() {
            refused.sample(&[("reason", reason)], get(&l.refused[i]));
        }
        out.family(
            "sitegate_mqtt_takeovers_total",
            Kind::Counter,
            "Sessions lost to another client with this client id: as the broker said (MQTT 5), or as it looked (closed again soon after connecting).",
        )
        .sample(&[("evidence", "broker")], get(&l.takeovers_said))
        .sample(&[("evidence", "suspected")], get(&l.takeovers_suspected));
        out.family(
            "sitegate_mqtt_connections_total",
            Kind::Counter,
            "Connection attempts by result, and established connections lost.",
        )
        .sample(&[("event", "connected")], get(&l.connects))
        .sample(&[("event", "failed")], get(&l.connect_failures))
        .sample(&[("event", "lost")], get(&l.connections_lost));
        out.family(
            "sitegate_mqtt_published_total",
            Kind::Counter,
            "Messages handed to the MQTT client (QoS 1).",
        )
        .sample(&[], get(&l.published));
        out.family(
            "sitegate_mqtt_telemetry_acked_total",
            Kind::Counter,
            "Telemetry messages the broker acknowledged (PUBACK).",
        )
        .sample(&[], get(&l.telemetry_acked));
        out.family(
            "sitegate_mqtt_rpc_requests_total",
            Kind::Counter,
            "RPC requests received.",
        )
        .sample(&[], get(&l.rpc_requests));
    }

    /// The RPC workload and its record, and the outbox's families.
    fn collect_rpc_and_outbox(&self, out: &mut Encoder) {
        let l = &self.link_stats;
        let r = &self.rpc_load;
        out.family(
            "sitegate_mqtt_rpc_workload",
            Kind::Gauge,
            "RPC requests being answered by the workers (at most 4) and waiting for one (at most 128, 1 MiB of payloads).",
        )
        .sample(&[("state", "running")], r.running() as f64)
        .sample(&[("state", "queued")], r.queued() as f64);
        out.family(
            "sitegate_mqtt_rpc_queued_bytes",
            Kind::Gauge,
            "Payload bytes of the RPC requests waiting for a worker.",
        )
        .sample(&[], r.queued_bytes() as f64);
        out.family(
            "sitegate_mqtt_rpc_refused_total",
            Kind::Counter,
            "RPC requests refused past the workers' queue bound: answered 429, or dropped when they had no id or response topic.",
        )
        .sample(&[("outcome", "answered")], get(&r.refused_answered))
        .sample(&[("outcome", "dropped")], get(&r.refused_unanswered));
        out.family(
            "sitegate_mqtt_incoming_too_large_total",
            Kind::Counter,
            "Incoming messages too large: RPC requests answered 413, and connections a message over mqtt.max_incoming_kb broke.",
        )
        .sample(&[("outcome", "answered")], get(&l.rpc_too_large))
        .sample(&[("outcome", "disconnected")], get(&l.oversized_breaks));
        out.family(
            "sitegate_mqtt_answers_too_large_total",
            Kind::Counter,
            "RPC answers larger than mqtt.max_outgoing_kb, answered with a 413 problem that says so instead.",
        )
        .sample(&[], get(&l.answers_too_large));
        let d = self.dedup.stats();
        out.family(
            "sitegate_mqtt_rpc_record_rows",
            Kind::Gauge,
            "Answers to state-changing RPC requests kept for duplicates (24 h, bounded).",
        )
        .sample(&[], get(&d.rows));
        out.family(
            "sitegate_mqtt_rpc_record_bytes",
            Kind::Gauge,
            "What those answers count against their byte bound.",
        )
        .sample(&[], get(&d.bytes));
        out.family(
            "sitegate_mqtt_rpc_record_dropped_total",
            Kind::Counter,
            "Answers forgotten before their 24 h to stay within the record's bounds.",
        )
        .sample(&[], get(&d.dropped));
        let o = self.stats();
        out.family(
            "sitegate_outbox_rows",
            Kind::Gauge,
            "Telemetry messages in the outbox (not yet acknowledged by the broker).",
        )
        .sample(&[], o.rows as f64);
        out.family(
            "sitegate_outbox_bytes",
            Kind::Gauge,
            "What the outbox counts against its size cap.",
        )
        .sample(&[], o.bytes as f64);
        out.family(
            "sitegate_outbox_evicted_total",
            Kind::Counter,
            "Outbox messages evicted by the age or size cap, never sent.",
        )
        .sample(&[], o.evicted as f64);
        out.family(
            "sitegate_outbox_last_seq",
            Kind::Gauge,
            "The highest telemetry sequence number assigned.",
        )
        .sample(&[], o.last_seq as f64);
    }
}
