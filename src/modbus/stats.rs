//! Counters of one bus: polls and poll failures per device with their duration,
//! and Modbus requests by function and outcome. The bus task and its `Port`
//! count; `/metrics` reads (`Collect`). Plain atomics: counting never waits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::error::ModbusError;
use crate::metrics::{Collect, Encoder, Histogram, Kind};

/// What a request was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    Read = 0,
    Write = 1,
}

const FUNCTIONS: [(&str, Function); 2] = [("read", Function::Read), ("write", Function::Write)];

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok = 0,
    /// The device answered with a Modbus exception.
    Exception = 1,
    Timeout = 2,
    /// Transport or malformed answer.
    Error = 3,
}

const OUTCOMES: [(&str, Outcome); 4] = [
    ("ok", Outcome::Ok),
    ("exception", Outcome::Exception),
    ("timeout", Outcome::Timeout),
    ("error", Outcome::Error),
];

impl Outcome {
    pub fn of<T>(result: &Result<T, ModbusError>) -> Self {
        match result {
            Ok(_) => Outcome::Ok,
            Err(ModbusError::Exception(_)) => Outcome::Exception,
            Err(ModbusError::Timeout(_)) => Outcome::Timeout,
            Err(ModbusError::Io { .. } | ModbusError::Protocol(_) | ModbusError::Stopped(_)) => {
                Outcome::Error
            }
        }
    }
}

/// Requests on one bus.
#[derive(Debug, Default)]
pub struct RequestStats {
    counts: [[AtomicU64; 4]; 2],
    duration: Histogram,
}

impl RequestStats {
    pub fn record(&self, function: Function, outcome: Outcome, took: Duration) {
        self.counts[function as usize][outcome as usize].fetch_add(1, Ordering::Relaxed);
        self.duration.observe_duration(took);
    }

    pub fn count(&self, function: Function, outcome: Outcome) -> u64 {
        self.counts[function as usize][outcome as usize].load(Ordering::Relaxed)
    }
}

/// Polls of one device.
#[derive(Debug)]
pub struct PollStats {
    reference: String,
    ok: AtomicU64,
    failed: AtomicU64,
    duration: Histogram,
}

impl PollStats {
    pub fn record(&self, ok: bool, took: Duration) {
        let c = if ok { &self.ok } else { &self.failed };
        c.fetch_add(1, Ordering::Relaxed);
        self.duration.observe_duration(took);
    }
}

/// Everything counted on one bus.
#[derive(Debug)]
pub struct BusStats {
    bus: String,
    pub requests: Arc<RequestStats>,
    /// In the order of the bus task's devices.
    pub polls: Vec<PollStats>,
    /// The bus task waits for room in the store's sample queue (serving
    /// commands meanwhile, polling nothing).
    pub waiting_for_store: AtomicBool,
    /// Times it had to wait.
    pub store_waits: AtomicU64,
    /// Polls after which the device's next poll was already late: the bus
    /// cannot keep its devices' intervals (the link carries less).
    pub overruns: AtomicU64,
}

impl BusStats {
    pub fn new(bus: &str, devices: impl IntoIterator<Item = String>) -> Self {
        Self {
            bus: bus.to_string(),
            requests: Arc::default(),
            polls: devices
                .into_iter()
                .map(|reference| PollStats {
                    reference,
                    ok: AtomicU64::new(0),
                    failed: AtomicU64::new(0),
                    duration: Histogram::default(),
                })
                .collect(),
            waiting_for_store: AtomicBool::new(false),
            store_waits: AtomicU64::new(0),
            overruns: AtomicU64::new(0),
        }
    }
}

/// Every bus of an agent, as one collector (so each family is declared once).
pub struct BusCollector(pub Vec<Arc<BusStats>>);

impl Collect for BusCollector {
    fn collect(&self, out: &mut Encoder) {
        for b in &self.0 {
            let bus = b.bus.as_str();
            let mut polls = out.family(
                "sitegate_device_polls_total",
                Kind::Counter,
                "Polls of a device, by result (ok: every planned read answered).",
            );
            for p in &b.polls {
                let device = p.reference.as_str();
                polls
                    .sample(
                        &[("device", device), ("bus", bus), ("result", "ok")],
                        p.ok.load(Ordering::Relaxed) as f64,
                    )
                    .sample(
                        &[("device", device), ("bus", bus), ("result", "failed")],
                        p.failed.load(Ordering::Relaxed) as f64,
                    );
            }
            let mut durations = out.family(
                "sitegate_device_poll_duration_seconds",
                Kind::Histogram,
                "Time one poll of a device took, failed ones included.",
            );
            for p in &b.polls {
                durations.histogram(
                    &[("device", p.reference.as_str()), ("bus", bus)],
                    &p.duration.snapshot(),
                );
            }
            let mut requests = out.family(
                "sitegate_modbus_requests_total",
                Kind::Counter,
                "Modbus requests sent, by function and outcome.",
            );
            for (fname, f) in FUNCTIONS {
                for (oname, o) in OUTCOMES {
                    requests.sample(
                        &[("bus", bus), ("function", fname), ("outcome", oname)],
                        b.requests.count(f, o) as f64,
                    );
                }
            }
            let waiting = b.waiting_for_store.load(Ordering::Relaxed);
            out.family(
                "sitegate_bus_waiting_for_store",
                Kind::Gauge,
                "1 while the bus task waits for room in the store's sample queue: it serves steering commands meanwhile and polls nothing.",
            )
            .sample(&[("bus", bus)], if waiting { 1.0 } else { 0.0 });
            out.family(
                "sitegate_bus_store_waits_total",
                Kind::Counter,
                "Times the bus task found the store's sample queue full after a poll.",
            )
            .sample(
                &[("bus", bus)],
                b.store_waits.load(Ordering::Relaxed) as f64,
            );
            out.family(
                "sitegate_modbus_poll_overruns_total",
                Kind::Counter,
                "Polls after which the device's next poll was already due: the bus cannot keep its devices' poll intervals (the link carries less than they ask); each device is then polled in turn, as often as the link allows.",
            )
            .sample(&[("bus", bus)], b.overruns.load(Ordering::Relaxed) as f64);
            out.family(
                "sitegate_modbus_request_duration_seconds",
                Kind::Histogram,
                "Time from sending a Modbus request to its answer or timeout.",
            )
            .histogram(&[("bus", bus)], &b.requests.duration.snapshot());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_device_and_outcome() {
        let stats = Arc::new(BusStats::new("lan", ["dvc_a".to_string()]));
        stats.polls[0].record(true, Duration::from_millis(20));
        stats.polls[0].record(false, Duration::from_millis(1000));
        stats.requests.record(
            Function::Read,
            Outcome::Timeout,
            Duration::from_millis(1000),
        );
        let mut e = Encoder::new();
        BusCollector(vec![stats]).collect(&mut e);
        let text = e.finish();
        for want in [
            "sitegate_device_polls_total{device=\"dvc_a\",bus=\"lan\",result=\"ok\"} 1\n",
            "sitegate_device_polls_total{device=\"dvc_a\",bus=\"lan\",result=\"failed\"} 1\n",
            "sitegate_device_poll_duration_seconds_count{device=\"dvc_a\",bus=\"lan\"} 2\n",
            "sitegate_modbus_requests_total{bus=\"lan\",function=\"read\",outcome=\"timeout\"} 1\n",
            "sitegate_modbus_requests_total{bus=\"lan\",function=\"write\",outcome=\"ok\"} 0\n",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
    }
}
