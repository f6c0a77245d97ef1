//! The Modbus server's counters for `/metrics`: requests by result,
//! connections open, accepted and refused, why connections closed, and the
//! frames the RTU slave heard.
//!
//! Atomics only: counting never waits, and a scrape reads them as they are.

use std::sync::atomic::{AtomicU64, Ordering};

use super::frame::Exception;
use crate::metrics::{Collect, Encoder, Kind};

/// Why a connection was refused at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The client's address is outside `allow`.
    Address,
    /// `max_connections` are open.
    Full,
    /// The client has `max_connections_per_client` open.
    PerClient,
}

/// Why an open connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The client closed it (or it failed).
    Client,
    /// Silent for `idle_timeout_s`, or a frame that trickled for as long.
    Idle,
    /// A header that is not Modbus TCP.
    Malformed,
    /// The server stopped.
    Stopped,
}

/// What became of a frame heard on the serial line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtuFrame {
    /// For a unit id the server answers: answered.
    Answered,
    /// Its CRC does not check (or it is too short to have one): dropped.
    BadCrc,
    /// For a unit id the server does not answer: left to that slave.
    OtherUnit,
    /// For unit 0 (broadcast): neither done nor answered.
    Broadcast,
}

impl RtuFrame {
    const LABELS: [&'static str; 4] = ["answered", "bad_crc", "other_unit", "broadcast"];
}

#[derive(Debug, Default)]
pub struct ServerStats {
    ok: AtomicU64,
    exceptions: [AtomicU64; Exception::ALL.len()],
    /// Writes taken as a SCADA's limit.
    limits_taken: AtomicU64,
    open: AtomicU64,
    accepted: AtomicU64,
    refused: [AtomicU64; 3],
    closed: [AtomicU64; 4],
    rtu: [AtomicU64; 4],
}

impl ServerStats {
    pub fn answered(&self, result: Result<(), Exception>) {
        let counter = match result {
            Ok(()) => &self.ok,
            Err(e) => &self.exceptions[Exception::ALL.iter().position(|x| *x == e).unwrap_or(0)],
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn limit_taken(&self) {
        self.limits_taken.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refused(&self, why: Refusal) {
        self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed(&self, why: Closed) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.closed[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn rtu_frame(&self, what: RtuFrame) {
        self.rtu[what as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests answered with `result` (`"ok"` or an exception's label).
    pub fn requests(&self, result: &str) -> u64 {
        if result == "ok" {
            return self.ok.load(Ordering::Relaxed);
        }
        Exception::ALL
            .iter()
            .position(|e| e.label() == result)
            .map_or(0, |i| self.exceptions[i].load(Ordering::Relaxed))
    }
}

impl Collect for ServerStats {
    fn collect(&self, out: &mut Encoder) {
        let mut requests = out.family(
            "sitegate_modbus_server_requests_total",
            Kind::Counter,
            "Requests the Modbus server answered, by result (ok, or the exception it answered).",
        );
        requests.sample(&[("result", "ok")], self.ok.load(Ordering::Relaxed) as f64);
        for (e, n) in Exception::ALL.iter().zip(&self.exceptions) {
            requests.sample(&[("result", e.label())], n.load(Ordering::Relaxed) as f64);
        }
        out.family(
            "sitegate_modbus_server_limit_writes_total",
            Kind::Counter,
            "Writes of a site's limit taken from a SCADA over the Modbus server.",
        )
        .sample(&[], self.limits_taken.load(Ordering::Relaxed) as f64);
        out.family(
            "sitegate_modbus_server_connections",
            Kind::Gauge,
            "Connections open to the Modbus server.",
        )
        .sample(&[], self.open.load(Ordering::Relaxed) as f64);
        let mut conns = out.family(
            "sitegate_modbus_server_connections_total",
            Kind::Counter,
            "Connections to the Modbus server, by result at accept.",
        );
        conns.sample(
            &[("result", "accepted")],
            self.accepted.load(Ordering::Relaxed) as f64,
        );
        for (label, n) in ["refused_address", "refused_full", "refused_per_client"]
            .iter()
            .zip(&self.refused)
        {
            conns.sample(&[("result", label)], n.load(Ordering::Relaxed) as f64);
        }
        let mut closed = out.family(
            "sitegate_modbus_server_closed_total",
            Kind::Counter,
            "Modbus server connections closed, by reason.",
        );
        for (label, n) in ["client", "idle", "malformed", "stopped"]
            .iter()
            .zip(&self.closed)
        {
            closed.sample(&[("reason", label)], n.load(Ordering::Relaxed) as f64);
        }
        let mut rtu = out.family(
            "sitegate_modbus_server_rtu_frames_total",
            Kind::Counter,
            "Frames the Modbus server's RTU slave heard on its serial line, by what became of them.",
        );
        for (label, n) in RtuFrame::LABELS.iter().zip(&self.rtu) {
            rtu.sample(&[("result", label)], n.load(Ordering::Relaxed) as f64);
        }
    }
}
