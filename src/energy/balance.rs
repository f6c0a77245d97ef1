//! The site's energy per bucket: every device's share of each flow summed,
//! which source each flow came from, the load, self-consumption and autarky.
//!
//! Pure: stretches in, buckets out. It must not read the store or know
//! where a stretch came from beyond its [`Source`].

use super::flow::{Flow, Source};
use super::grid::{Grid, Stretch};

/// One device's share of one flow over the range.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSeries {
    pub flow: Flow,
    pub source: Source,
    pub stretches: Vec<Stretch>,
    /// Counter resets (times), for [`Source::Counter`].
    pub resets: Vec<i64>,
}

/// Which sources a flow's value in a bucket came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    pub counter: bool,
    pub integrated: bool,
}

impl Sources {
    /// `counter`, `integratedPower`, `mixed`, or `none` (no device had data).
    pub const fn name(self) -> &'static str {
        match (self.counter, self.integrated) {
            (true, false) => "counter",
            (false, true) => "integratedPower",
            (true, true) => "mixed",
            (false, false) => "none",
        }
    }

    fn add(&mut self, source: Source) {
        match source {
            Source::Counter => self.counter = true,
            Source::IntegratedPower => self.integrated = true,
        }
    }

    fn merge(&mut self, other: Sources) {
        self.counter |= other.counter;
        self.integrated |= other.integrated;
    }

    fn any(self) -> bool {
        self.counter || self.integrated
    }
}

/// One bucket (or the whole range): Wh per flow, in [`Flow::ALL`] order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bucket {
    pub start_ms: i64,
    pub end_ms: i64,
    pub wh: [f64; 5],
    pub sources: [Sources; 5],
    pub counter_resets: usize,
}

impl Bucket {
    pub fn flow(&self, f: Flow) -> f64 {
        self.wh[f.index()]
    }

    /// The load: produced + imported − exported + discharged − charged.
    pub fn consumption(&self) -> f64 {
        self.flow(Flow::Produced) + self.flow(Flow::Imported) - self.flow(Flow::Exported)
            + self.flow(Flow::Discharged)
            - self.flow(Flow::Charged)
    }

    /// (produced − exported) / produced, within 0 to 1; `None` without
    /// production.
    pub fn self_consumption(&self) -> Option<f64> {
        let produced = self.flow(Flow::Produced);
        ratio(produced - self.flow(Flow::Exported), produced)
    }

    /// (consumption − imported) / consumption, within 0 to 1; `None` without
    /// a load.
    pub fn autarky(&self) -> Option<f64> {
        let load = self.consumption();
        ratio(load - self.flow(Flow::Imported), load)
    }

    fn has_data(&self) -> bool {
        self.sources.iter().any(|s| s.any())
    }

    fn absorb(&mut self, other: &Bucket) {
        for i in 0..5 {
            self.wh[i] += other.wh[i];
            self.sources[i].merge(other.sources[i]);
        }
        self.counter_resets += other.counter_resets;
    }
}

/// A share, clamped to 0..=1 (a battery discharging into the grid can export
/// more than PV produced); `None` when the denominator is not positive.
fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| (part / whole).clamp(0.0, 1.0))
}

/// The buckets that hold data of at least one flow, ascending, and the whole
/// range as one (its start and end those of the range; `None` when no
/// bucket holds data).
pub fn balance(grid: &Grid, series: &[FlowSeries]) -> (Vec<Bucket>, Option<Bucket>) {
    let mut buckets: Vec<Bucket> = (0..grid.count())
        .map(|i| {
            let (start_ms, end_ms) = grid.bucket(i);
            Bucket {
                start_ms,
                end_ms,
                ..Bucket::default()
            }
        })
        .collect();
    for s in series {
        let k = s.flow.index();
        for stretch in &s.stretches {
            grid.spread(*stretch, |i, wh| {
                buckets[i].wh[k] += wh;
                buckets[i].sources[k].add(s.source);
            });
        }
        for ts in &s.resets {
            if let Some(i) = grid.index_of(*ts) {
                buckets[i].counter_resets += 1;
            }
        }
    }
    buckets.retain(Bucket::has_data);
    let total = (!buckets.is_empty()).then(|| {
        let (start_ms, end_ms) = grid.range();
        let mut t = Bucket {
            start_ms,
            end_ms,
            ..Bucket::default()
        };
        buckets.iter().for_each(|b| t.absorb(b));
        t
    });
    (buckets, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn series(flow: Flow, source: Source, stretches: &[(i64, i64, f64)]) -> FlowSeries {
        FlowSeries {
            flow,
            source,
            stretches: stretches
                .iter()
                .map(|&(a, b, wh)| Stretch::new(a, b, wh))
                .collect(),
            resets: Vec::new(),
        }
    }

    #[test]
    fn flows_sum_per_bucket_with_their_sources_and_ratios() {
        let grid = Grid::new(0, 3 * H, H);
        let all = [
            series(Flow::Produced, Source::Counter, &[(0, H, 4000.0)]),
            series(
                Flow::Produced,
                Source::IntegratedPower,
                &[(0, 2 * H, 2000.0)],
            ),
            series(Flow::Exported, Source::Counter, &[(0, H, 1000.0)]),
            series(Flow::Imported, Source::Counter, &[(H, 2 * H, 500.0)]),
            series(Flow::Charged, Source::Counter, &[(0, H, 2000.0)]),
            series(Flow::Discharged, Source::Counter, &[(H, 2 * H, 500.0)]),
        ];
        let (buckets, total) = balance(&grid, &all);
        assert_eq!(buckets.len(), 2, "the third hour holds nothing");
        let (a, b) = (&buckets[0], &buckets[1]);
        assert_eq!(a.wh, [5000.0, 0.0, 1000.0, 2000.0, 0.0]);
        assert_eq!(a.sources[0].name(), "mixed");
        assert_eq!(a.sources[1].name(), "none");
        assert_eq!(a.consumption(), 2000.0);
        assert_eq!(a.self_consumption(), Some(0.8));
        assert_eq!(a.autarky(), Some(1.0));
        assert_eq!(b.wh, [1000.0, 500.0, 0.0, 0.0, 500.0]);
        assert_eq!(b.sources[0].name(), "integratedPower");
        assert_eq!(b.consumption(), 2000.0);
        assert_eq!(b.autarky(), Some(0.75));
        let t = total.expect("a total");
        assert_eq!((t.start_ms, t.end_ms), (0, 3 * H));
        assert_eq!(t.wh, [6000.0, 500.0, 1000.0, 2000.0, 500.0]);
        assert_eq!(t.sources[1].name(), "counter");
    }

    #[test]
    fn ratios_are_none_without_a_denominator_and_clamped() {
        let b = Bucket {
            wh: [0.0, 1000.0, 0.0, 1000.0, 0.0],
            ..Bucket::default()
        };
        assert_eq!(b.self_consumption(), None);
        assert_eq!(b.autarky(), None, "no load: all imported went to charging");
        let b = Bucket {
            wh: [1000.0, 0.0, 3000.0, 0.0, 2500.0],
            ..Bucket::default()
        };
        assert_eq!(b.self_consumption(), Some(0.0));
        assert_eq!(b.autarky(), Some(1.0));
    }

    #[test]
    fn nothing_stored_is_no_bucket_and_no_total() {
        let (buckets, total) = balance(&Grid::new(0, H, H), &[]);
        assert!(buckets.is_empty() && total.is_none());
    }
}
