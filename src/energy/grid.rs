//! The buckets of an energy answer, and how a stretch of energy is shared
//! among them: in proportion to the time it overlaps each.
//!
//! Pure: no store, no clock. It must not know where a stretch came from.

/// Energy that accrued evenly over `[from_ms, to_ms)`, Wh. A stretch of no
/// length (`from_ms == to_ms`) accrued at that instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stretch {
    pub from_ms: i64,
    pub to_ms: i64,
    pub wh: f64,
}

impl Stretch {
    pub fn new(from_ms: i64, to_ms: i64, wh: f64) -> Self {
        Self { from_ms, to_ms, wh }
    }
}

/// The buckets of `[from, to)`: whole multiples of the width since the epoch
/// (UTC), the first and last cut to the range.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    from: i64,
    to: i64,
    width: i64,
    /// The aligned start of the first bucket.
    first: i64,
    count: usize,
}

impl Grid {
    /// `width > 0`; an empty or reversed range has no bucket.
    pub fn new(from: i64, to: i64, width: i64) -> Self {
        let width = width.max(1);
        let first = from.div_euclid(width) * width;
        let count = if to > from {
            ((to - 1).div_euclid(width) - from.div_euclid(width) + 1) as usize
        } else {
            0
        };
        Self {
            from,
            to,
            width,
            first,
            count,
        }
    }

    /// How many buckets the range has.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bucket `i`: `[start, end)` within the range.
    pub fn bucket(&self, i: usize) -> (i64, i64) {
        let start = self.first + i as i64 * self.width;
        (start.max(self.from), (start + self.width).min(self.to))
    }

    /// The range: `(from, to)`.
    pub fn range(&self) -> (i64, i64) {
        (self.from, self.to)
    }

    /// The bucket holding `ts`, if it is in the range.
    pub fn index_of(&self, ts: i64) -> Option<usize> {
        (ts >= self.from && ts < self.to).then(|| ((ts - self.first) / self.width) as usize)
    }

    /// Calls `f(bucket, wh)` with the share of `s` each bucket gets, for every
    /// bucket it touches (a share may be 0: the stretch still covers it). The
    /// parts outside the range are dropped.
    pub fn spread(&self, s: Stretch, mut f: impl FnMut(usize, f64)) {
        if s.to_ms <= s.from_ms {
            if let Some(i) = self.index_of(s.from_ms) {
                f(i, s.wh);
            }
            return;
        }
        let (lo, hi) = (s.from_ms.max(self.from), s.to_ms.min(self.to));
        if lo >= hi {
            return;
        }
        let length = (s.to_ms - s.from_ms) as f64;
        let (Some(first), Some(last)) = (self.index_of(lo), self.index_of(hi - 1)) else {
            return;
        };
        for i in first..=last {
            let (start, end) = self.bucket(i);
            let overlap = (end.min(hi) - start.max(lo)).max(0) as f64;
            f(i, s.wh * overlap / length);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn shares(grid: &Grid, s: Stretch) -> Vec<(usize, f64)> {
        let mut out = Vec::new();
        grid.spread(s, |i, wh| out.push((i, wh)));
        out
    }

    #[test]
    fn buckets_are_aligned_and_cut_to_the_range() {
        let g = Grid::new(H / 2, 3 * H, H);
        assert_eq!(g.count(), 3);
        assert_eq!(g.bucket(0), (H / 2, H));
        assert_eq!(g.bucket(2), (2 * H, 3 * H));
        assert_eq!(Grid::new(0, 0, H).count(), 0);
        assert_eq!(Grid::new(5, 1, H).count(), 0);
        assert_eq!(g.index_of(H), Some(1));
        assert_eq!(g.index_of(3 * H), None);
    }

    #[test]
    fn a_stretch_is_shared_by_time_and_cut_at_the_range() {
        let g = Grid::new(0, 2 * H, H);
        assert_eq!(
            shares(&g, Stretch::new(H / 2, 3 * H / 2, 10.0)),
            [(0, 5.0), (1, 5.0)]
        );
        // Half of it lies before the range: that half is dropped.
        assert_eq!(shares(&g, Stretch::new(-H, H, 8.0)), [(0, 4.0)]);
        assert_eq!(shares(&g, Stretch::new(2 * H, 3 * H, 8.0)), []);
        // An instant goes to its bucket whole.
        assert_eq!(shares(&g, Stretch::new(H, H, 3.0)), [(1, 3.0)]);
        assert_eq!(shares(&g, Stretch::new(2 * H, 2 * H, 3.0)), []);
    }
}
