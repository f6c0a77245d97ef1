//! The uplink's counters (connections, publishes, acknowledged telemetry, RPC
//! requests) and its `/metrics` collector, which adds the connection state and
//! the outbox backlog. The link task counts; `/metrics` reads.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Uplink;
use crate::metrics::{Collect, Encoder, Kind};

#[derive(Debug, Default)]
pub(super) struct LinkStats {
    pub(super) connects: AtomicU64,
    pub(super) connect_failures: AtomicU64,
    pub(super) connections_lost: AtomicU64,
    pub(super) published: AtomicU64,
    pub(super) telemetry_acked: AtomicU64,
    pub(super) rpc_requests: AtomicU64,
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> f64 {
    c.load(Ordering::Relaxed) as f64
}

impl Collect for Uplink {
    fn collect(&self, out: &mut Encoder) {
        let l = &self.link_stats;
        out.family(
            "sitegate_mqtt_connected",
            Kind::Gauge,
            "1 while a broker session is up and the RPC subscription is acknowledged.",
        )
        .sample(&[], if self.is_connected() { 1.0 } else { 0.0 });
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
