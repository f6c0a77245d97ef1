//! Energy from integrated `activePower`, for a device without the counter of
//! a flow (or when integration is asked for), from stored summaries (minute
//! buckets in practice).
//!
//! Each reading holds until the next one, but at most one sample interval
//! (the larger of the configured poll interval and the interval the bucket
//! shows): a device that was not read for longer adds nothing for the gap.
//! A bucket's energy is its mean power over the time its readings hold, and
//! goes to the flow of its sign. A bucket whose readings change sign is
//! split as if each reading were at its lowest or its highest value, in the
//! shares that give its mean: the net is exact, and a step from export to
//! import inside a minute is split exactly; a power that swings around zero
//! is counted somewhat high on both sides.
//!
//! Pure: plain summaries in, stretches out. It must not read the store.

use super::grid::Stretch;
use crate::store::Agg;

/// Milliseconds in an hour: W·ms to Wh.
const MS_PER_H: f64 = 3_600_000.0;

/// The energy of a power series, split by its sign.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PowerEnergy {
    /// Where the power was positive (Wh, ≥ 0); a stretch of 0 where it
    /// was negative or 0, since the flow is known to be 0 there.
    pub positive: Vec<Stretch>,
    /// Where it was negative (Wh, ≥ 0, as a magnitude); 0 elsewhere.
    pub negative: Vec<Stretch>,
}

/// The energy of `aggs` (ascending, power in W) for a device read every
/// `poll_interval_ms`.
pub fn power_energy(aggs: &[Agg], poll_interval_ms: i64) -> PowerEnergy {
    let mut out = PowerEnergy::default();
    for (i, a) in aggs.iter().enumerate() {
        let n = a.count.max(1) as i64;
        let inside = (a.last_ts - a.first_ts).max(0);
        let step = if n >= 2 { inside / (n - 1) } else { 0 };
        let hold_max = step.max(poll_interval_ms).max(1);
        let hold = match aggs.get(i + 1) {
            Some(next) => hold_max.min(next.first_ts - a.last_ts).max(0),
            None => hold_max,
        };
        let span = inside + hold;
        let (pos_w, neg_w) = split(a.sum / n as f64, a.min, a.max);
        let to = a.first_ts + span;
        let (pos, neg) = (
            pos_w * span as f64 / MS_PER_H,
            neg_w * span as f64 / MS_PER_H,
        );
        out.positive.push(Stretch::new(a.first_ts, to, pos));
        out.negative.push(Stretch::new(a.first_ts, to, neg));
    }
    out
}

/// The mean power's positive and negative parts (W, both ≥ 0): for readings
/// between `min` and `max`, as if each were at one of the two.
fn split(mean: f64, min: f64, max: f64) -> (f64, f64) {
    if min >= 0.0 || max <= 0.0 || max <= min {
        return (mean.max(0.0), (-mean).max(0.0));
    }
    let high = ((mean - min) / (max - min)).clamp(0.0, 1.0);
    (high * max, (1.0 - high) * -min)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000;

    fn minute(start: i64, every: i64, values: &[f64]) -> Agg {
        let mut a = Agg::one(start, values[0]);
        for (k, v) in values.iter().enumerate().skip(1) {
            a.add(start + k as i64 * every, *v);
        }
        a
    }

    fn sum(s: &[Stretch]) -> f64 {
        s.iter().map(|s| s.wh).sum()
    }

    #[test]
    fn steady_power_over_whole_minutes_is_power_times_time() {
        // 3600 W read every second for two minutes: 120 Wh... of 3600 W · 120 s.
        let aggs = [
            minute(0, S, &[3600.0; 60]),
            minute(60 * S, S, &[3600.0; 60]),
        ];
        let e = power_energy(&aggs, S);
        assert_eq!(sum(&e.positive), 120.0);
        assert_eq!(sum(&e.negative), 0.0);
        assert_eq!(e.positive[0], Stretch::new(0, 60 * S, 60.0));
    }

    #[test]
    fn the_sign_picks_the_flow() {
        let e = power_energy(&[minute(0, S, &[-7200.0; 60])], S);
        assert_eq!((sum(&e.positive), sum(&e.negative)), (0.0, 120.0));
    }

    #[test]
    fn a_step_from_export_to_import_inside_a_minute_is_split() {
        // 30 s at −20 kW, then 30 s at +40 kW.
        let mut values = vec![-20_000.0; 30];
        values.extend([40_000.0; 30]);
        let e = power_energy(&[minute(0, S, &values)], S);
        assert!(
            (sum(&e.positive) - 40_000.0 * 30.0 / 3600.0).abs() < 1e-9,
            "{e:?}"
        );
        assert!(
            (sum(&e.negative) - 20_000.0 * 30.0 / 3600.0).abs() < 1e-9,
            "{e:?}"
        );
    }

    #[test]
    fn a_gap_adds_nothing_and_slow_polls_hold_their_interval() {
        // Two readings an hour apart, polled every 10 s: each holds 10 s.
        let aggs = [Agg::one(0, 3600.0), Agg::one(3_600 * S, 3600.0)];
        let e = power_energy(&aggs, 10 * S);
        assert_eq!(sum(&e.positive), 20.0);
        // One reading a minute, polled every minute: each holds the minute.
        let aggs = [Agg::one(0, 3600.0), Agg::one(60 * S, 3600.0)];
        assert_eq!(sum(&power_energy(&aggs, 60 * S).positive), 120.0);
        // Polled every second, but the bucket shows readings 2 s apart.
        let aggs = [
            minute(0, 2 * S, &[3600.0; 30]),
            minute(60 * S, 2 * S, &[3600.0; 30]),
        ];
        assert_eq!(sum(&power_energy(&aggs, S).positive), 120.0);
    }
}
