//! The load at the connection point, estimated from a meter reading and the
//! commanded devices' measured powers (`grid = load − supply`, supply =
//! production + storage, + discharge).
//!
//! A meter reading shows the power of some moment between the read and its
//! reporting lag before it, and the devices may have moved in between. The
//! supply is kept by the time its readings were taken, so a reading is paired
//! with the supply over exactly the span it may show: the load is then known
//! to a range, the lowest (the supply at its lowest over the span), which the
//! export limit is held against, and the highest, which the import limit is
//! held against. Pure: times are passed in.

use std::collections::VecDeque;

/// How long the supply is remembered, ms (far more than any meter's lag).
const KEEP_MS: i64 = 30_000;
/// The most entries kept, whatever the tick rate.
const MAX_ENTRIES: usize = 512;

/// The load the loop holds each limit against, W.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// For the export limit: the least the reading allows.
    pub low_w: f64,
    /// For the import limit: the most the reading allows.
    pub high_w: f64,
}

impl Load {
    /// The middle of the range: the best single guess.
    pub fn mid_w(&self) -> f64 {
        0.5 * (self.low_w + self.high_w)
    }
}

/// The site's supply (the commanded devices' measured powers, + discharge
/// and production) by the time its readings were taken, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History(VecDeque<(i64, f64)>);

impl History {
    /// Records the supply of readings taken at `at_ms` (a time already
    /// recorded, or an older one, replaces nothing: readings do not go back)
    /// and forgets what no meter reading can need.
    pub fn record(&mut self, at_ms: i64, supply_w: f64) {
        if self.0.back().is_some_and(|(t, _)| *t >= at_ms) {
            return;
        }
        self.0.push_back((at_ms, supply_w));
        while self.0.len() > MAX_ENTRIES || (self.0.len() > 1 && self.0[1].0 < at_ms - KEEP_MS) {
            self.0.pop_front();
        }
    }

    /// The supply at `t_ms`, between the readings around it (the first or
    /// last reading outside them).
    fn at(&self, t_ms: i64) -> Option<f64> {
        let after = self.0.iter().position(|(t, _)| *t >= t_ms);
        match after {
            None => self.0.back().map(|(_, w)| *w),
            Some(0) => self.0.front().map(|(_, w)| *w),
            Some(k) => {
                let (t0, w0) = self.0[k - 1];
                let (t1, w1) = self.0[k];
                let f = (t_ms - t0) as f64 / (t1 - t0).max(1) as f64;
                Some(w0 + f * (w1 - w0))
            }
        }
    }

    /// The lowest and highest supply over `from_ms..=to_ms`; `None` with
    /// nothing recorded.
    pub fn extremes(&self, from_ms: i64, to_ms: i64) -> Option<(f64, f64)> {
        let ends = [self.at(from_ms)?, self.at(to_ms)?];
        let inside = self
            .0
            .iter()
            .filter(|(t, _)| (from_ms..=to_ms).contains(t))
            .map(|(_, w)| *w);
        Some(
            ends.into_iter()
                .chain(inside)
                .fold((f64::MAX, f64::MIN), |(lo, hi), w| (lo.min(w), hi.max(w))),
        )
    }
}

/// The load a meter reading of `grid_w` (+ import) allows when it shows the
/// power of some moment in `from_ms..=to_ms`; `supply_now_w` stands in for a
/// history that holds nothing yet.
pub fn from_reading(
    grid_w: f64,
    history: &History,
    from_ms: i64,
    to_ms: i64,
    supply_now_w: f64,
) -> Load {
    let (lo, hi) = history
        .extremes(from_ms, to_ms)
        .unwrap_or((supply_now_w, supply_now_w));
    Load {
        low_w: grid_w + lo,
        high_w: grid_w + hi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_paired_with_the_supply_of_its_span() {
        let mut h = History::default();
        for (t, w) in [(0, 10.0), (1000, 20.0), (2000, 30.0), (3000, 25.0)] {
            h.record(t, w);
        }
        // Readings never go back in time.
        h.record(2500, 99.0);
        assert_eq!(h.at(1500), Some(25.0));
        assert_eq!(h.at(-10), Some(10.0));
        assert_eq!(h.at(9000), Some(25.0));
        // 1500..2500: 25 at the start, 30 inside, 27.5 at the end.
        assert_eq!(h.extremes(1500, 2500), Some((25.0, 30.0)));
        assert_eq!(h.extremes(0, 500), Some((10.0, 15.0)));
        let l = from_reading(-5.0, &h, 1500, 2500, 0.0);
        assert_eq!((l.low_w, l.high_w), (20.0, 25.0));
        assert_eq!(l.mid_w(), 22.5);
        assert_eq!(
            from_reading(-5.0, &History::default(), 0, 10, 7.0),
            Load {
                low_w: 2.0,
                high_w: 2.0
            }
        );
    }

    #[test]
    fn old_entries_are_forgotten() {
        let mut h = History::default();
        for t in 0..100 {
            h.record(t * 1000, t as f64);
        }
        // 30 s kept, and one before them.
        assert_eq!(h.0.len(), 32);
        assert_eq!(h.extremes(0, 99_000), Some((68.0, 99.0)));
        let mut h = History::default();
        for t in 0..2000 {
            h.record(t, 1.0);
        }
        assert_eq!(h.0.len(), MAX_ENTRIES);
    }
}
