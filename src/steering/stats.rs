//! Setpoint write counters per steered device, the control loop's tick times,
//! and the steering collector for `/metrics` (those counters plus each
//! device's current state). Actuators and the loop count; `/metrics` reads.
//!
//! Per-device series carry the `device` label only and one sample each (its
//! writes, its state), so a scrape of a site of 1,000 devices stays small;
//! the writes by kind and result are summed per site.

use std::sync::atomic::{AtomicU64, Ordering};

use super::hold::LoopMode;
use super::SteeringService;
use crate::metrics::{Collect, Encoder, Histogram, Kind};

/// Bounds (seconds) for a control tick: 50 µs to 1 s (a tick is a decision
/// in memory, well below the request latencies' 1 ms).
pub const TICK_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
];

/// A site's control ticks: how long each took (from its wake to its decision
/// handed to the actuators), and how late a timed one woke after its planned
/// time (the runtime's scheduling: what other tasks on it cost the loop).
#[derive(Debug)]
pub struct TickStats {
    pub took: Histogram,
    pub late: Histogram,
}

impl Default for TickStats {
    fn default() -> Self {
        TickStats {
            took: Histogram::new(TICK_BUCKETS),
            late: Histogram::new(TICK_BUCKETS),
        }
    }
}

/// Writes to one device: setpoint changes and refreshes, confirmed by the
/// read-back or failed.
#[derive(Debug, Default)]
pub struct WriteCounters {
    /// `[change, refresh] × [confirmed, failed]`.
    counts: [[AtomicU64; 2]; 2],
}

impl WriteCounters {
    pub fn record(&self, change: bool, confirmed: bool) {
        let kind = usize::from(!change);
        let result = usize::from(!confirmed);
        self.counts[kind][result].fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self, change: bool, confirmed: bool) -> u64 {
        self.counts[usize::from(!change)][usize::from(!confirmed)].load(Ordering::Relaxed)
    }

    /// Every write, of either kind and result.
    fn total(&self) -> u64 {
        self.counts
            .iter()
            .flatten()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

impl Collect for SteeringService {
    fn collect(&self, out: &mut Encoder) {
        let durable = self.durable();
        out.family(
            "sitegate_steering_changes_waiting",
            Kind::Gauge,
            "Steering changes in effect that wait to be written to the store (the disk refuses them).",
        )
        .sample(&[], durable.len() as f64);
        let (failed, dropped) = durable.counts();
        out.family(
            "sitegate_steering_changes_unwritten_total",
            Kind::Counter,
            "Steering changes whose write failed at first (then retried), and changes merged away past the waiting bound (their audit record lost).",
        )
        .sample(&[("result", "retried")], failed as f64)
        .sample(&[("result", "merged")], dropped as f64);
        ticks_of_all(self, out);
        for site in self.sites() {
            let site_ref = site.config.reference.as_str();
            let reports = site.reports();
            let mut writes = out.family(
                "sitegate_steering_writes_total",
                Kind::Counter,
                "Setpoint writes to the site's devices: changes and revert-timer refreshes, confirmed by read-back or failed.",
            );
            for (kind, change) in [("change", true), ("refresh", false)] {
                for (result, confirmed) in [("confirmed", true), ("failed", false)] {
                    let n: u64 = site.writes.iter().map(|c| c.get(change, confirmed)).sum();
                    writes.sample(
                        &[("site", site_ref), ("kind", kind), ("result", result)],
                        n as f64,
                    );
                }
            }
            let mut device_writes = out.family(
                "sitegate_steering_device_writes_total",
                Kind::Counter,
                "Setpoint writes to a device, changes and refreshes, confirmed or failed.",
            );
            for (report, counters) in reports.iter().zip(site.writes.iter()) {
                device_writes.sample(
                    &[("device", report.device.as_str())],
                    counters.total() as f64,
                );
            }
            let mut states = out.family(
                "sitegate_steering_device_state",
                Kind::Gauge,
                "1 for the state a steered device is in (applied, pending, failed, fallback); the other states are not shown.",
            );
            for report in &reports {
                states.sample(
                    &[
                        ("device", report.device.as_str()),
                        ("state", report.state.as_str()),
                    ],
                    1.0,
                );
            }
            let status = site.status();
            let lost = status.grid.mode == LoopMode::MeterLost;
            out.family(
                "sitegate_steering_grid_meter_lost",
                Kind::Gauge,
                "1 while the site's grid meter is offline or stale and the grid loop is in its safe state.",
            )
            .sample(&[("site", site_ref)], if lost { 1.0 } else { 0.0 });
            out.family(
                "sitegate_steering_grid_meter_lost_total",
                Kind::Counter,
                "Times the site's grid loop entered its meter-lost safe state after the meter had answered (the wait for its first reading at start is not counted).",
            )
            .sample(&[("site", site_ref)], status.meter_lost_total as f64);
            let mut modes = out.family(
                "sitegate_steering_grid_loop_mode",
                Kind::Gauge,
                "1 for what the site's grid loop does now (off, free, holdingExport, holdingImport, meterLost).",
            );
            for m in MODES {
                modes.sample(
                    &[("site", site_ref), ("mode", m.wire_name())],
                    if status.grid.mode == m { 1.0 } else { 0.0 },
                );
            }
        }
    }
}

/// Every site's tick histograms as one: a label per site would cost a
/// scrape of many sites 17 lines a site and histogram.
fn ticks_of_all(service: &SteeringService, out: &mut Encoder) {
    let merged = |pick: fn(&TickStats) -> &Histogram| {
        let mut all = Histogram::new(TICK_BUCKETS).snapshot();
        for site in service.sites() {
            let h = pick(&site.ticks).snapshot();
            for (a, b) in all.counts.iter_mut().zip(&h.counts) {
                *a += b;
            }
            all.count += h.count;
            all.sum += h.sum;
        }
        all
    };
    out.family(
        "sitegate_steering_tick_duration_seconds",
        Kind::Histogram,
        "Time one tick of a site's control loop took, from its wake to its decision handed to the actuators (every site's ticks).",
    )
    .histogram(&[], &merged(|t| &t.took));
    out.family(
        "sitegate_steering_tick_delay_seconds",
        Kind::Histogram,
        "How late a timed tick of a site's control loop woke after its planned time (every site's ticks).",
    )
    .histogram(&[], &merged(|t| &t.late));
}

const MODES: [LoopMode; 5] = [
    LoopMode::Off,
    LoopMode::Free,
    LoopMode::HoldingExport,
    LoopMode::HoldingImport,
    LoopMode::MeterLost,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind_and_result() {
        let c = WriteCounters::default();
        c.record(true, true);
        c.record(false, true);
        c.record(false, true);
        c.record(false, false);
        assert_eq!(c.get(true, true), 1);
        assert_eq!(c.get(true, false), 0);
        assert_eq!(c.get(false, true), 2);
        assert_eq!(c.get(false, false), 1);
        assert_eq!(c.total(), 4);
    }
}
