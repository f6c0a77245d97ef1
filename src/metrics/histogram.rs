//! A histogram with fixed bucket bounds on atomics: `observe` is a few relaxed
//! atomic adds, safe to call from any thread on a hot path.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bounds (seconds) for request and poll latencies: 1 ms to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The sum is kept in millionths, so it stays an integer atomic.
const SUM_SCALE: f64 = 1e6;

/// Counts of observations per bucket (not cumulative) plus their sum.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One per bound, then one for everything above the last bound.
    counts: Box<[AtomicU64]>,
    sum_micros: AtomicU64,
}

/// A copy of a histogram's state.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    pub bounds: &'static [f64],
    /// Per bound, not cumulative (observations above the last bound are only in
    /// `count`).
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

impl Histogram {
    /// `bounds` must be ascending.
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Counts `v` in the first bucket whose bound is at least `v`. Negative and
    /// non-finite values count as 0 in the sum.
    pub fn observe(&self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let micros = if v.is_finite() && v > 0.0 {
            (v * SUM_SCALE).round() as u64
        } else {
            0
        };
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub fn observe_duration(&self, d: std::time::Duration) {
        self.observe(d.as_secs_f64());
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let all: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        HistogramSnapshot {
            bounds: self.bounds,
            counts: all[..self.bounds.len()].to_vec(),
            count: all.iter().sum(),
            sum: self.sum_micros.load(Ordering::Relaxed) as f64 / SUM_SCALE,
        }
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new(LATENCY_BUCKETS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_on_a_bound_counts_in_that_bucket() {
        let h = Histogram::new(&[1.0, 2.0]);
        for v in [0.0, 1.0, 1.5, 2.0, 3.0, f64::NAN, -1.0] {
            h.observe(v);
        }
        let s = h.snapshot();
        // NaN compares false with every bound, so it lands in the first bucket.
        assert_eq!(s.counts, vec![4, 2]);
        assert_eq!(s.count, 7);
        assert!((s.sum - 7.5).abs() < 1e-9, "{}", s.sum);
    }
}
