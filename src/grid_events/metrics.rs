//! `/metrics` for the grid operators' limits: per site, source and kind the
//! value in force and whether it is a failsafe, and a counter of the
//! evidence log's events (`../shared/spec/grid-operators.md`, "What is
//! shown").
//!
//! Reads the sites' runtimes and the counters the tasks move; no I/O.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::metrics::{Collect, Encoder, Kind};
use crate::steering::runtime::SiteRuntime;
use crate::steering::sources::SourceLimit;

/// A gauge family of the limits: its name, its help, its value of a limit.
type Family = (&'static str, &'static str, fn(&SourceLimit) -> f64);

/// The collector, and per site the counter its task moves.
pub struct GridOperatorMetrics {
    pub sites: Vec<(Arc<SiteRuntime>, Arc<AtomicU64>)>,
}

impl Collect for GridOperatorMetrics {
    fn collect(&self, out: &mut Encoder) {
        let limits: Vec<_> = self
            .sites
            .iter()
            .map(|(s, _)| (s.config.reference.clone(), s.grid_operator_limits()))
            .collect();
        let families: [Family; 2] = [
            (
                "sitegate_grid_operator_limit_watts",
                "A grid operator's limit in force, W, by source (gridSignal, modbus, csip, eebus), kind (maxImport, maxExport, maxConsumption, ...) and the operator's reference.",
                |l| l.value,
            ),
            (
                "sitegate_grid_operator_failsafe",
                "1 while a grid operator's source holds its failsafe value (its peer silent, its input unreadable), by source, kind and reference.",
                |l| if l.failsafe { 1.0 } else { 0.0 },
            ),
        ];
        for (name, help, value) in families {
            let mut f = out.family(name, Kind::Gauge, help);
            for (site, ls) in &limits {
                for l in ls {
                    f.sample(
                        &[
                            ("site", site),
                            ("source", l.source.wire_name()),
                            ("kind", l.kind.wire_name()),
                            ("reference", l.reference.as_deref().unwrap_or("")),
                        ],
                        value(l),
                    );
                }
            }
        }
        let mut f = out.family(
            "sitegate_grid_events_total",
            Kind::Counter,
            "Grid operator events the evidence log opened since the agent started.",
        );
        for (s, n) in &self.sites {
            f.sample(
                &[("site", &s.config.reference)],
                n.load(Ordering::Relaxed) as f64,
            );
        }
    }
}
