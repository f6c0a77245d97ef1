//! Energy from an energy counter (`totalEnergyProduced`, `totalEnergyConsumed`):
//! its rises between the stored summaries, as stretches of time.
//!
//! A counter only grows. When it falls, either it was reset (the device was
//! replaced, or its counter restarted) or one reading was wrong. The fall
//! itself is never energy. What follows it is held back until the counter
//! shows which: when it climbs back to the level before the fall, the fall
//! was a misread and only the rise above that level counts; when it does not
//! within the range, it was a reset, counted in `resets`, and its rises from
//! the new level count. A gap between two readings is no fall: the rise
//! across it accrued evenly over the gap.
//!
//! Pure: plain summaries in, stretches out. It must not read the store.

use super::grid::Stretch;
use crate::store::Agg;

/// A counter's energy over a range.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterEnergy {
    pub stretches: Vec<Stretch>,
    /// When each reset happened (the first reading after the fall).
    pub resets: Vec<i64>,
}

/// The energy of a counter from its bucket summaries `aggs` (ascending; a
/// summary whose readings fell inside it is read as a rise to its highest
/// value, a fall to its lowest and a rise to its last: `refine.rs` reads
/// such hours again sample by sample, where it can), after
/// `before` (the last reading before the range, as (ts, value), when there is
/// one: the rise from it to the first reading counts).
pub fn counter_energy(before: Option<(i64, f64)>, aggs: &[Agg]) -> CounterEnergy {
    let mut f = Follower::default();
    if let Some((ts, v)) = before {
        f.push(ts, v);
    }
    for a in aggs {
        f.push(a.first_ts, a.first);
        if a.count < 2 {
            continue;
        }
        if rises_only(a) {
            f.push(a.last_ts, a.last);
        } else {
            // It fell inside the bucket: read it as a rise to the highest
            // value, a fall to the lowest, a rise to the last.
            let mid = a.first_ts + (a.last_ts - a.first_ts) / 2;
            f.push(mid, a.max);
            f.push(mid, a.min);
            f.push(a.last_ts, a.last);
        }
    }
    f.finish()
}

/// Whether a summary's readings only rose (none fell inside it).
pub fn rises_only(a: &Agg) -> bool {
    a.min >= a.first && a.max <= a.last
}

/// After a fall: the level before it, and the rises since, held back.
#[derive(Debug)]
struct Fall {
    at: i64,
    level: f64,
    level_ts: i64,
    held: Vec<Stretch>,
}

#[derive(Debug, Default)]
struct Follower {
    last: Option<(i64, f64)>,
    fall: Option<Fall>,
    out: CounterEnergy,
}

impl Follower {
    fn push(&mut self, ts: i64, v: f64) {
        let Some((last_ts, last_v)) = self.last.replace((ts, v)) else {
            return;
        };
        if let Some(fall) = &mut self.fall {
            if v >= fall.level {
                // Back at the old level: the fall was a misread.
                self.out
                    .stretches
                    .push(Stretch::new(fall.level_ts, ts, v - fall.level));
                self.fall = None;
            } else if v >= last_v {
                fall.held.push(Stretch::new(last_ts, ts, v - last_v));
            }
            return;
        }
        if v >= last_v {
            self.out
                .stretches
                .push(Stretch::new(last_ts, ts, v - last_v));
        } else {
            self.fall = Some(Fall {
                at: ts,
                level: last_v,
                level_ts: last_ts,
                held: Vec::new(),
            });
        }
    }

    fn finish(mut self) -> CounterEnergy {
        if let Some(fall) = self.fall.take() {
            self.out.stretches.extend(fall.held);
            self.out.resets.push(fall.at);
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One summary per reading: (ts, value).
    fn aggs(readings: &[(i64, f64)]) -> Vec<Agg> {
        readings.iter().map(|&(ts, v)| Agg::one(ts, v)).collect()
    }

    fn total(e: &CounterEnergy) -> f64 {
        e.stretches.iter().map(|s| s.wh).sum()
    }

    fn check(before: Option<(i64, f64)>, readings: &[(i64, f64)], wh: f64, resets: &[i64]) {
        let e = counter_energy(before, &aggs(readings));
        assert_eq!(total(&e), wh, "{readings:?}: {e:?}");
        assert_eq!(e.resets, resets, "{readings:?}");
    }

    #[test]
    fn rises_count_from_the_reading_before_the_range() {
        check(None, &[(0, 100.0), (10, 105.0), (20, 112.0)], 12.0, &[]);
        check(Some((-5, 90.0)), &[(0, 100.0), (10, 105.0)], 15.0, &[]);
        check(None, &[(0, 100.0)], 0.0, &[]);
        let e = counter_energy(Some((-5, 90.0)), &aggs(&[(0, 100.0)]));
        assert_eq!(e.stretches, [Stretch::new(-5, 0, 10.0)]);
    }

    #[test]
    fn a_gap_spreads_its_rise_over_the_gap() {
        let e = counter_energy(None, &aggs(&[(0, 100.0), (7_200_000, 160.0)]));
        assert_eq!(e.stretches, [Stretch::new(0, 7_200_000, 60.0)]);
    }

    #[test]
    fn a_reset_counts_from_the_new_level_and_the_fall_counts_nothing() {
        check(
            None,
            &[(0, 1000.0), (10, 1050.0), (20, 0.0), (30, 30.0)],
            80.0,
            &[20],
        );
    }

    #[test]
    fn a_misread_counts_only_what_passes_the_old_level() {
        check(
            None,
            &[(0, 1000.0), (10, 5.0), (20, 6.0), (30, 1003.0)],
            3.0,
            &[],
        );
        let e = counter_energy(None, &aggs(&[(0, 1000.0), (10, 5.0), (30, 1003.0)]));
        assert_eq!(
            e.stretches,
            [Stretch::new(0, 30, 3.0)],
            "the rise spreads from the last good reading"
        );
    }

    #[test]
    fn a_fall_inside_one_summary_is_read_as_rise_fall_rise() {
        // 1000 .. 1050, reset to 0 .. 30, in one bucket.
        let mut reset = Agg::one(0, 1000.0);
        for (ts, v) in [(10, 1050.0), (20, 0.0), (30, 30.0)] {
            reset.add(ts, v);
        }
        let e = counter_energy(None, &[reset]);
        assert_eq!((total(&e), e.resets.as_slice()), (80.0, &[15][..]));
        // 1000, 5 (a misread), 1002 in one bucket.
        let mut misread = Agg::one(0, 1000.0);
        misread.add(10, 5.0);
        misread.add(20, 1002.0);
        let e = counter_energy(None, &[misread]);
        assert_eq!((total(&e), e.resets.len()), (2.0, 0));
    }
}
