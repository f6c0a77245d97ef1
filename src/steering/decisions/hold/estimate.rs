//! The load at the connection point, estimated from a meter reading and the
//! commanded devices' measured powers (`grid = load − supply`, supply =
//! production + storage, + discharge).
//!
//! A meter reading shows the power of some moment between the read and its
//! reporting lag before it, and the devices may have moved in between. Each
//! device's readings are kept by the time they were taken, so a reading is
//! paired with the supply over exactly the span it may show: the load is then known
//! to a range, the lowest (the supply at its lowest over the span), which the
//! export limit is held against, and the highest, which the import limit is
//! held against. Pure: times are passed in.

use std::collections::VecDeque;
use std::sync::Arc;

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

/// The load the loop works from after a new reading (`read`), given the last
/// estimate and the loop's deadband `db`, W:
/// - a reading whose range is no wider than `db` shows the noise of the
///   meter and the devices, not a doubt about timing: it stands for its
///   middle;
/// - each end of the last estimate stays while the new reading's range,
///   widened by a quarter of a deadband, holds it (the reading shows no change of
///   the load: only noise, or the doubt of a span over the loop's own last
///   change), and moves to the new reading once it leaves that.
///
/// So the loop neither chases the noise of a steady load nor moves the cap
/// again on a reading over its own last change, and a load that moves is
/// followed as soon as a reading shows it. The export is held against at
/// most three quarters of a deadband more load than the reading's lowest,
/// which the aim, half a tolerance (a deadband) inside the limit, covers.
pub fn held(prev: Option<Load>, read: Load, db: f64) -> Load {
    let to = if read.high_w - read.low_w <= db {
        let mid = read.mid_w();
        Load {
            low_w: mid,
            high_w: mid,
        }
    } else {
        read
    };
    let Some(p) = prev else { return to };
    let within = |w: f64| w >= read.low_w - 0.25 * db && w <= read.high_w + 0.25 * db;
    let low_w = if within(p.low_w) { p.low_w } else { to.low_w };
    let high_w = if within(p.high_w) {
        p.high_w
    } else {
        to.high_w
    };
    Load {
        low_w: low_w.min(high_w),
        high_w: high_w.max(low_w),
    }
}

/// Each commanded device's power readings by the time they were taken,
/// oldest first, in the order of the site's steered devices.
///
/// Shared until changed: a tick's state is copied (the loop's memory, the
/// decision, the dry runs), but only [`History::record`] copies the readings,
/// once per tick, not every copy of the state (a site of 200 devices holds
/// thousands of readings).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History(Arc<Vec<VecDeque<(i64, f64)>>>);

/// The latest reading of each steered device: (taken at, W, + discharge and
/// production); `None` while it is offline.
pub type Readings = [Option<(i64, f64)>];

impl History {
    /// Records the readings (one already recorded, or an older one, adds
    /// nothing: readings do not go back) and forgets what no meter reading
    /// can need.
    pub fn record(&mut self, readings: &Readings) {
        if self.0.len() != readings.len() {
            self.0 = Arc::new(vec![VecDeque::new(); readings.len()]);
        }
        for (series, r) in Arc::make_mut(&mut self.0).iter_mut().zip(readings) {
            let Some((at_ms, w)) = *r else { continue };
            if series.back().is_some_and(|(t, _)| *t >= at_ms) {
                continue;
            }
            series.push_back((at_ms, w));
            while series.len() > MAX_ENTRIES || (series.len() > 1 && series[1].0 < at_ms - KEEP_MS)
            {
                series.pop_front();
            }
        }
    }

    /// The lowest and highest supply of the devices online now (`readings`)
    /// over `from_ms..=to_ms`, each device between its readings; `None`
    /// with nothing recorded.
    pub fn extremes(&self, readings: &Readings, from_ms: i64, to_ms: i64) -> Option<(f64, f64)> {
        let online: Vec<&VecDeque<(i64, f64)>> = self
            .0
            .iter()
            .zip(readings)
            .filter(|(s, r)| r.is_some() && !s.is_empty())
            .map(|(s, _)| s)
            .collect();
        if online.is_empty() {
            return None;
        }
        // Each device is linear between its readings: the sum's extremes lie
        // at the span's ends or at a reading. The times are visited in order,
        // each device's place in its readings only moving forward: one pass
        // over the readings, not a search per device per time (a site of 200
        // devices has thousands of such times in a span).
        let mut times: Vec<i64> = online
            .iter()
            .flat_map(|s| s.iter().map(|(t, _)| *t))
            .filter(|t| (from_ms..=to_ms).contains(t))
            .chain([from_ms, to_ms])
            .collect();
        times.sort_unstable();
        times.dedup();
        let mut next = vec![0usize; online.len()];
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for t in times {
            let mut sum = 0.0;
            for (series, k) in online.iter().zip(next.iter_mut()) {
                while *k < series.len() && series[*k].0 < t {
                    *k += 1;
                }
                sum += at(series, *k, t);
            }
            (lo, hi) = (lo.min(sum), hi.max(sum));
        }
        Some((lo, hi))
    }
}

/// A device's power at `t_ms`, between the readings around it (the first or
/// last reading outside them). `series` is not empty; `k` is the first of its
/// readings at or after `t_ms` (its length when none is).
fn at(series: &VecDeque<(i64, f64)>, k: usize, t_ms: i64) -> f64 {
    match k {
        0 => series[0].1,
        k if k >= series.len() => series.back().map_or(0.0, |(_, w)| *w),
        k => {
            let (t0, w0) = series[k - 1];
            let (t1, w1) = series[k];
            w0 + (t_ms - t0) as f64 / (t1 - t0).max(1) as f64 * (w1 - w0)
        }
    }
}

/// The load a meter reading of `grid_w` (+ import) allows when it shows the
/// power of some moment in `from_ms..=to_ms`; `supply_now_w` stands in for a
/// history that holds nothing yet.
pub fn from_reading(
    grid_w: f64,
    history: &History,
    readings: &Readings,
    (from_ms, to_ms): (i64, i64),
    supply_now_w: f64,
) -> Load {
    let (lo, hi) = history
        .extremes(readings, from_ms, to_ms)
        .unwrap_or((supply_now_w, supply_now_w));
    Load {
        low_w: grid_w + lo,
        high_w: grid_w + hi,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(low_w: f64, high_w: f64) -> Load {
        Load { low_w, high_w }
    }

    #[test]
    fn a_steady_load_is_held_through_noise_and_doubt_and_a_move_is_followed() {
        // A narrow reading stands for its middle.
        assert_eq!(
            held(None, load(900.0, 1_100.0), 1_000.0),
            load(1_000.0, 1_000.0)
        );
        let steady = load(1_000.0, 1_000.0);
        let prev = Some(steady);
        // Noise: the reading moves a little, the estimate stays.
        assert_eq!(held(prev, load(1_200.0, 1_400.0), 1_000.0), steady);
        // Doubt: a reading over the loop's own change spans 20 kW; it still
        // holds the estimate, which stays.
        assert_eq!(held(prev, load(-19_000.0, 1_200.0), 1_000.0), steady);
        // The load rose 2 kW: followed at once.
        assert_eq!(
            held(prev, load(2_900.0, 3_100.0), 1_000.0),
            load(3_000.0, 3_000.0)
        );
        // It fell, with doubt: the low end goes to the reading's lowest.
        let fell = held(prev, load(-4_000.0, -1_000.0), 1_000.0);
        assert_eq!(fell, load(-4_000.0, -1_000.0));
    }

    #[test]
    fn a_reading_is_paired_with_the_supply_of_its_span() {
        let mut h = History::default();
        // A battery read at whole seconds, an inverter at half seconds.
        for (t, bat, pv) in [
            (0, 10.0, 0.0),
            (1000, 20.0, 0.0),
            (2000, 30.0, 10.0),
            (3000, 25.0, 10.0),
        ] {
            h.record(&[Some((t, bat)), Some((t + 500, pv))]);
        }
        let now = [Some((3000, 25.0)), Some((3500, 10.0))];
        // Readings never go back in time.
        h.record(&[Some((2500, 99.0)), Some((3500, 10.0))]);
        // 1500..2500: the battery 25 → 30 → 27.5, the inverter 0 → 5 → 10.
        assert_eq!(h.extremes(&now, 1500, 2500), Some((25.0, 37.5)));
        // An offline device counts for nothing.
        assert_eq!(
            h.extremes(&[Some((3000, 25.0)), None], 1500, 2500),
            Some((25.0, 30.0))
        );
        // Before and after the readings: the first and the last.
        assert_eq!(h.extremes(&now, -500, -100), Some((10.0, 10.0)));
        assert_eq!(h.extremes(&now, 8000, 9000), Some((35.0, 35.0)));
        let l = from_reading(-5.0, &h, &now, (1500, 2500), 0.0);
        assert_eq!((l.low_w, l.high_w), (20.0, 32.5));
        assert_eq!(l.mid_w(), 26.25);
        assert_eq!(
            from_reading(-5.0, &History::default(), &[None], (0, 10), 7.0),
            Load {
                low_w: 2.0,
                high_w: 2.0
            }
        );
    }

    /// The sweep gives what summing every device at every time gives.
    #[test]
    fn the_sweep_matches_a_sum_at_every_time() {
        let naive = |h: &History, from: i64, to: i64| {
            let power = |s: &VecDeque<(i64, f64)>, t: i64| {
                let k = s.iter().position(|(x, _)| *x >= t).unwrap_or(s.len());
                at(s, k, t)
            };
            let mut times: Vec<i64> = h.0.iter().flatten().map(|(t, _)| *t).collect();
            times.retain(|t| (from..=to).contains(t));
            times.extend([from, to]);
            let sums: Vec<f64> = times
                .iter()
                .map(|&t| h.0.iter().map(|s| power(s, t)).sum::<f64>())
                .collect();
            (
                sums.iter().copied().fold(f64::MAX, f64::min),
                sums.iter().copied().fold(f64::MIN, f64::max),
            )
        };
        let mut h = History::default();
        let devices = 40;
        for tick in 0..120i64 {
            let readings: Vec<_> = (0..devices)
                .map(|d: i64| {
                    let t = tick * 250 + (d * 37) % 250;
                    Some((t, ((tick * 13 + d * 7) % 50) as f64 * 100.0))
                })
                .collect();
            h.record(&readings);
        }
        let now: Vec<_> = (0..devices).map(|_| Some((0, 0.0))).collect();
        for (from, to) in [(0, 30_000), (10_000, 12_000), (-5, 3), (29_000, 40_000)] {
            assert_eq!(h.extremes(&now, from, to), Some(naive(&h, from, to)));
        }
    }

    #[test]
    fn old_readings_are_forgotten() {
        let mut h = History::default();
        for t in 0..100 {
            h.record(&[Some((t * 1000, t as f64))]);
        }
        // 30 s kept, and one before them.
        assert_eq!(h.0[0].len(), 32);
        assert_eq!(
            h.extremes(&[Some((99_000, 99.0))], 0, 99_000),
            Some((68.0, 99.0))
        );
        let mut h = History::default();
        for t in 0..2000 {
            h.record(&[Some((t, 1.0))]);
        }
        assert_eq!(h.0[0].len(), MAX_ENTRIES);
    }
}
