//! Counters of one bus: polls with their duration and Modbus requests by
//! function and outcome, per bus; polls and failed polls per device. The bus
//! task and its `Port` count; `/metrics` reads (`Collect`). Plain atomics:
//! counting never waits.
//!
//! Histograms are per bus, never per device: a scrape of a site of 1,000
//! devices stays small (`docs/operations.md`, "`GET /metrics`"). A device's
//! failed polls are shown once it has one, as a client library shows a
//! labelled counter once it is counted.

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
}

/// Everything counted on one bus.
#[derive(Debug)]
pub struct BusStats {
    bus: String,
    pub requests: Arc<RequestStats>,
    /// In the order of the bus task's devices.
    pub polls: Vec<PollStats>,
    /// Every poll of the bus (devices added at run time included):
    /// `[ok, failed]`, and how long each took.
    bus_polls: [AtomicU64; 2],
    poll_duration: Histogram,
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
                })
                .collect(),
            bus_polls: Default::default(),
            poll_duration: Histogram::default(),
            waiting_for_store: AtomicBool::new(false),
            store_waits: AtomicU64::new(0),
            overruns: AtomicU64::new(0),
        }
    }

    /// A poll of the bus's device `i` (in the order given to [`BusStats::new`];
    /// a device added at run time has no counters of its own).
    pub fn record_poll(&self, i: usize, ok: bool, took: Duration) {
        self.bus_polls[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
        self.poll_duration.observe_duration(took);
        if let Some(p) = self.polls.get(i) {
            let c = if ok { &p.ok } else { &p.failed };
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `(ok, failed)` polls of the device `reference`, if it is one of the
    /// bus's devices from the start.
    pub fn device_polls(&self, reference: &str) -> Option<(u64, u64)> {
        let p = self.polls.iter().find(|p| p.reference == reference)?;
        Some((
            p.ok.load(Ordering::Relaxed),
            p.failed.load(Ordering::Relaxed),
        ))
    }
}

/// Every bus of an agent, as one collector (so each family is declared once).
pub struct BusCollector(pub Vec<Arc<BusStats>>);

impl Collect for BusCollector {
    fn collect(&self, out: &mut Encoder) {
        for b in &self.0 {
            let bus = b.bus.as_str();
            let mut polls = out.family(
                "sitegate_bus_polls_total",
                Kind::Counter,
                "Polls of the bus's devices, by result (ok: every planned read answered).",
            );
            for (result, i) in [("ok", 0), ("failed", 1)] {
                polls.sample(
                    &[("bus", bus), ("result", result)],
                    b.bus_polls[i].load(Ordering::Relaxed) as f64,
                );
            }
            out.family(
                "sitegate_bus_poll_duration_seconds",
                Kind::Histogram,
                "Time one poll of one of the bus's devices took, failed ones included.",
            )
            .histogram(&[("bus", bus)], &b.poll_duration.snapshot());
            let mut failures = out.family(
                "sitegate_device_poll_failures_total",
                Kind::Counter,
                "Failed polls of a device (shown once it has one).",
            );
            for p in &b.polls {
                let failed = p.failed.load(Ordering::Relaxed);
                if failed > 0 {
                    failures.sample(&[("device", p.reference.as_str())], failed as f64);
                }
            }
            let mut requests = out.family(
                "sitegate_modbus_requests_total",
                Kind::Counter,
                "Modbus requests sent, by function and outcome (each pair shown once it is counted).",
            );
            for (fname, f) in FUNCTIONS {
                for (oname, o) in OUTCOMES {
                    let n = b.requests.count(f, o);
                    if n > 0 {
                        requests.sample(
                            &[("bus", bus), ("function", fname), ("outcome", oname)],
                            n as f64,
                        );
                    }
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
    fn renders_every_bus_and_each_failing_device() {
        let stats = Arc::new(BusStats::new(
            "lan",
            ["dvc_a".to_string(), "dvc_b".to_string()],
        ));
        stats.record_poll(0, true, Duration::from_millis(20));
        stats.record_poll(0, false, Duration::from_millis(1000));
        stats.record_poll(1, true, Duration::from_millis(20));
        // A device added at run time counts for its bus.
        stats.record_poll(7, true, Duration::from_millis(20));
        stats.requests.record(
            Function::Read,
            Outcome::Timeout,
            Duration::from_millis(1000),
        );
        let mut e = Encoder::new();
        BusCollector(vec![stats.clone()]).collect(&mut e);
        let text = e.finish();
        for want in [
            "sitegate_bus_polls_total{bus=\"lan\",result=\"ok\"} 3\n",
            "sitegate_bus_polls_total{bus=\"lan\",result=\"failed\"} 1\n",
            "sitegate_bus_poll_duration_seconds_count{bus=\"lan\"} 4\n",
            "sitegate_device_poll_failures_total{device=\"dvc_a\"} 1\n",
            "sitegate_modbus_requests_total{bus=\"lan\",function=\"read\",outcome=\"timeout\"} 1\n",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        // No histogram per device, no zero counters per device or outcome.
        for absent in ["dvc_b", "outcome=\"ok\"", "device=\"dvc_a\",bus"] {
            assert!(!text.contains(absent), "{absent:?} in\n{text}");
        }
        assert_eq!(stats.device_polls("dvc_a"), Some((1, 1)));
        assert_eq!(stats.device_polls("dvc_c"), None);
    }
}
