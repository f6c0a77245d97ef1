//! Which stored series answer an energy question, and how their summaries
//! become the site's balance: per device and flow, its counter when it
//! offers one (unless integration is asked for), else its integrated
//! `activePower`; counters read in hour buckets, powers in minute ones.
//!
//! Pure: devices and summaries in, the answer out. It must not read the
//! store; `read.rs` hands it what the store answered.

use super::balance::{balance, Bucket, FlowSeries};
use super::counter::counter_energy;
use super::flow::{flows_of, Flow, Sign, Source};
use super::grid::Grid;
use super::power::power_energy;
use crate::model::{DeviceType, Property};
use crate::store::{Agg, SummaryQuery, HOUR_MS, MINUTE_MS};

/// The longest range one question may span: 31 days (a month of any length).
pub const MAX_RANGE_MS: i64 = 31 * 24 * HOUR_MS;

/// The width of the answer's buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interval {
    Hour,
    Day,
}

impl Interval {
    pub const ALL: [Interval; 2] = [Interval::Hour, Interval::Day];

    pub const fn name(self) -> &'static str {
        match self {
            Interval::Hour => "hour",
            Interval::Day => "day",
        }
    }

    pub fn parse(s: &str) -> Option<Interval> {
        Interval::ALL.into_iter().find(|i| i.name() == s)
    }

    pub const fn width_ms(self) -> i64 {
        match self {
            Interval::Hour => HOUR_MS,
            Interval::Day => 24 * HOUR_MS,
        }
    }
}

/// Which source a flow is taken from when the device has both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefer {
    /// The device's counter where it offers one (`source=auto`).
    Counters,
    /// Integrated power for every flow (`source=integratedPower`).
    IntegratedPower,
}

/// One device of the site, as the question needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct EnergyDevice {
    pub reference: String,
    pub device_type: DeviceType,
    pub offered: Vec<Property>,
    pub poll_interval_ms: u64,
}

/// The question: `[from_ms, to_ms)` in buckets of `interval`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnergyQuery {
    pub from_ms: i64,
    pub to_ms: i64,
    pub interval: Interval,
    pub prefer: Prefer,
}

/// Where each of one device's flows comes from (flows it can give neither
/// way are left out).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceFlows {
    pub reference: String,
    pub device_type: DeviceType,
    pub flows: Vec<(Flow, Source)>,
}

/// The answer.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteEnergy {
    pub query: EnergyQuery,
    pub devices: Vec<DeviceFlows>,
    /// The buckets holding data, ascending.
    pub buckets: Vec<Bucket>,
    /// The whole range; `None` when nothing is stored in it.
    pub total: Option<Bucket>,
}

/// What one store read is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    /// The hour before the range: the counter's last reading before it.
    CounterBefore(Flow),
    Counter(Flow),
    Power,
}

/// One read: for which device (index), what for, and the store's query.
#[derive(Clone, Debug, PartialEq)]
pub struct Read {
    pub device: usize,
    pub kind: ReadKind,
    pub query: SummaryQuery,
}

/// Each device's flows and their source.
pub fn choose(devices: &[EnergyDevice], prefer: Prefer) -> Vec<DeviceFlows> {
    devices
        .iter()
        .map(|d| DeviceFlows {
            reference: d.reference.clone(),
            device_type: d.device_type,
            flows: flows_of(d.device_type)
                .iter()
                .filter_map(|f| {
                    if prefer == Prefer::Counters && d.offered.contains(&f.counter) {
                        Some((f.flow, Source::Counter))
                    } else {
                        d.offered
                            .contains(&Property::ActivePower)
                            .then_some((f.flow, Source::IntegratedPower))
                    }
                })
                .collect(),
        })
        .collect()
}

/// The store reads `chosen` needs for `q`.
pub fn reads(devices: &[EnergyDevice], chosen: &[DeviceFlows], q: &EnergyQuery) -> Vec<Read> {
    let mut out = Vec::new();
    for (i, (d, c)) in devices.iter().zip(chosen).enumerate() {
        let query = |property, (start_ms, end_ms), width_ms| SummaryQuery {
            device: d.reference.clone(),
            property,
            start_ms,
            end_ms,
            width_ms,
        };
        let before = (q.from_ms - HOUR_MS, q.from_ms);
        let range = (q.from_ms, q.to_ms);
        for (flow, source) in &c.flows {
            let Some(f) = flows_of(d.device_type).iter().find(|f| f.flow == *flow) else {
                continue;
            };
            if *source == Source::Counter {
                out.push(Read {
                    device: i,
                    kind: ReadKind::CounterBefore(*flow),
                    query: query(f.counter, before, HOUR_MS),
                });
                out.push(Read {
                    device: i,
                    kind: ReadKind::Counter(*flow),
                    query: query(f.counter, range, HOUR_MS),
                });
            }
        }
        if c.flows.iter().any(|(_, s)| *s == Source::IntegratedPower) {
            out.push(Read {
                device: i,
                kind: ReadKind::Power,
                query: query(Property::ActivePower, range, MINUTE_MS),
            });
        }
    }
    out
}

/// The answer from the summaries the store gave for `reads` (same order).
pub fn assemble(
    devices: &[EnergyDevice],
    chosen: Vec<DeviceFlows>,
    reads: &[Read],
    results: &[Vec<(i64, Agg)>],
    q: EnergyQuery,
) -> SiteEnergy {
    let aggs = |r: usize| -> Vec<Agg> { results[r].iter().map(|(_, a)| *a).collect() };
    let mut series = Vec::new();
    for (r, read) in reads.iter().enumerate() {
        let device = &devices[read.device];
        match read.kind {
            ReadKind::CounterBefore(_) => {}
            ReadKind::Counter(flow) => {
                // The read before this one is its `CounterBefore`.
                let before = r
                    .checked_sub(1)
                    .filter(|b| reads[*b].kind == ReadKind::CounterBefore(flow))
                    .and_then(|b| results[b].last())
                    .map(|(_, a)| (a.last_ts, a.last));
                let e = counter_energy(before, &aggs(r));
                series.push(FlowSeries {
                    flow,
                    source: Source::Counter,
                    stretches: e.stretches,
                    resets: e.resets,
                });
            }
            ReadKind::Power => {
                let e = power_energy(&aggs(r), device.poll_interval_ms as i64);
                for (flow, source) in &chosen[read.device].flows {
                    let Some(f) = flows_of(device.device_type)
                        .iter()
                        .find(|f| f.flow == *flow)
                    else {
                        continue;
                    };
                    if *source != Source::IntegratedPower {
                        continue;
                    }
                    let stretches = match f.sign {
                        Sign::Positive => e.positive.clone(),
                        Sign::Negative => e.negative.clone(),
                    };
                    series.push(FlowSeries {
                        flow: *flow,
                        source: Source::IntegratedPower,
                        stretches,
                        resets: Vec::new(),
                    });
                }
            }
        }
    }
    let grid = Grid::new(q.from_ms, q.to_ms, q.interval.width_ms());
    let (buckets, total) = balance(&grid, &series);
    SiteEnergy {
        query: q,
        devices: chosen,
        buckets,
        total,
    }
}

#[cfg(test)]
mod tests;
