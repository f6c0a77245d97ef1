//! Setpoint write counters per steered device, and the steering collector for
//! `/metrics` (those counters plus each device's current state). Actuators
//! count; `/metrics` reads.

use std::sync::atomic::{AtomicU64, Ordering};

use super::hold::LoopMode;
use super::report::State;
use super::SteeringService;
use crate::metrics::{Collect, Encoder, Kind};

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
}

const STATES: [State; 4] = [
    State::Applied,
    State::Pending,
    State::Failed,
    State::Fallback,
];

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
        for site in self.sites() {
            let site_ref = site.config.reference.as_str();
            let reports = site.reports();
            let mut writes = out.family(
                "sitegate_steering_writes_total",
                Kind::Counter,
                "Setpoint writes to a device: changes and revert-timer refreshes, confirmed by read-back or failed.",
            );
            for (report, counters) in reports.iter().zip(site.writes.iter()) {
                for (kind, change) in [("change", true), ("refresh", false)] {
                    for (result, confirmed) in [("confirmed", true), ("failed", false)] {
                        writes.sample(
                            &[
                                ("site", site_ref),
                                ("device", report.device.as_str()),
                                ("kind", kind),
                                ("result", result),
                            ],
                            counters.get(change, confirmed) as f64,
                        );
                    }
                }
            }
            let mut states = out.family(
                "sitegate_steering_device_state",
                Kind::Gauge,
                "1 for the state each steered device is in (applied, pending, failed, fallback).",
            );
            for report in &reports {
                for s in STATES {
                    states.sample(
                        &[
                            ("site", site_ref),
                            ("device", report.device.as_str()),
                            ("state", s.as_str()),
                        ],
                        if report.state == s { 1.0 } else { 0.0 },
                    );
                }
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
    }
}
