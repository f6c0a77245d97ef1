//! Mergeable aggregates over samples: count, sum, min, max, first and last by
//! time. Rollup rows, raw folds and the naive reference all use this one type, so
//! combining minute rows into wider buckets is the same merge as adding samples.
//!
//! Pure: no SQLite, no clock.

use crate::model::Kind;

/// How a bucket's samples become one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Aggregation {
    Mean,
    Min,
    Max,
    First,
    Last,
}

impl Aggregation {
    /// Every aggregation, as named on the wire.
    pub const ALL: [Aggregation; 5] = [
        Aggregation::Mean,
        Aggregation::Min,
        Aggregation::Max,
        Aggregation::First,
        Aggregation::Last,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Aggregation::Mean => "mean",
            Aggregation::Min => "min",
            Aggregation::Max => "max",
            Aggregation::First => "first",
            Aggregation::Last => "last",
        }
    }

    pub fn parse(s: &str) -> Option<Aggregation> {
        Aggregation::ALL.into_iter().find(|a| a.name() == s)
    }

    /// `mean` for gauges, `last` for counters (energy totals).
    pub const fn default_for(kind: Kind) -> Aggregation {
        match kind {
            Kind::Gauge => Aggregation::Mean,
            Kind::Counter => Aggregation::Last,
        }
    }
}

/// Summary of a non-empty set of samples with distinct timestamps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Agg {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    pub first_ts: i64,
    pub first: f64,
    pub last_ts: i64,
    pub last: f64,
}

impl Agg {
    pub fn one(ts: i64, value: f64) -> Agg {
        Agg {
            count: 1,
            sum: value,
            min: value,
            max: value,
            first_ts: ts,
            first: value,
            last_ts: ts,
            last: value,
        }
    }

    pub fn add(&mut self, ts: i64, value: f64) {
        self.merge(&Agg::one(ts, value));
    }

    /// Combines two summaries of disjoint sample sets.
    pub fn merge(&mut self, other: &Agg) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        if other.first_ts < self.first_ts {
            self.first_ts = other.first_ts;
            self.first = other.first;
        }
        if other.last_ts > self.last_ts {
            self.last_ts = other.last_ts;
            self.last = other.last;
        }
    }

    pub fn value(&self, aggregation: Aggregation) -> f64 {
        match aggregation {
            // count >= 1 by construction: an Agg is never empty.
            Aggregation::Mean => self.sum / self.count as f64,
            Aggregation::Min => self.min,
            Aggregation::Max => self.max,
            Aggregation::First => self.first,
            Aggregation::Last => self.last,
        }
    }
}

/// Start of the epoch-aligned period of `width` ms holding `ts`.
pub fn align(ts: i64, width: i64) -> i64 {
    ts - ts.rem_euclid(width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_first_and_last_by_time_whatever_the_order() {
        let mut a = Agg::one(20, 2.0);
        a.merge(&Agg::one(10, 1.0));
        a.merge(&Agg::one(30, 3.0));
        assert_eq!((a.first, a.last, a.count), (1.0, 3.0, 3));
        assert_eq!(a.value(Aggregation::Mean), 2.0);
        assert_eq!(a.value(Aggregation::Min), 1.0);
        assert_eq!(a.value(Aggregation::Max), 3.0);
    }

    #[test]
    fn align_is_epoch_based_also_before_1970() {
        assert_eq!(align(3_599_999, 3_600_000), 0);
        assert_eq!(align(3_600_000, 3_600_000), 3_600_000);
        assert_eq!(align(-1, 60_000), -60_000);
    }

    #[test]
    fn aggregation_names_round_trip_and_defaults_follow_kind() {
        for a in Aggregation::ALL {
            assert_eq!(Aggregation::parse(a.name()), Some(a));
        }
        assert_eq!(Aggregation::parse("avg"), None);
        assert_eq!(Aggregation::default_for(Kind::Gauge), Aggregation::Mean);
        assert_eq!(Aggregation::default_for(Kind::Counter), Aggregation::Last);
    }
}
