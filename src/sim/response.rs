//! How simulated devices respond like real ones (`docs/devices.md`, "The
//! simulator"): an inverter or a battery follows a new target with a first-order
//! lag and a ramp limit; a meter refreshes its registers every period and shows
//! the power of a set lag before; the sun can follow a cloud pattern.
//!
//! Pure: the time is passed in (real seconds since the site started), no
//! registers, no I/O. The devices and the site task call these.

use std::collections::VecDeque;

use super::SimResponse;

/// Moves `current` toward `target` over `dt_s`: a first-order lag with time
/// constant `lag_s` (0: at once), and at most `ramp_w_per_s × dt_s` (an infinite
/// ramp: no limit).
pub fn follow(current: f64, target: f64, dt_s: f64, lag_s: f64, ramp_w_per_s: f64) -> f64 {
    let dt_s = dt_s.max(0.0);
    let mut step = target - current;
    if lag_s > 0.0 {
        step *= 1.0 - (-dt_s / lag_s).exp();
    }
    let max = ramp_w_per_s * dt_s;
    if max.is_finite() {
        step = step.clamp(-max, max);
    }
    current + step
}

impl SimResponse {
    /// Devices that follow at once and meters that show the power of the moment.
    pub const IDEAL: SimResponse = SimResponse {
        lag_s: 0.0,
        ramp_percent_per_s: None,
        refresh_ms: 0,
        report_lag_ms: 0,
    };

    /// The ramp limit of a device rated `rated_w`, W/s (infinite: none).
    pub fn ramp_w_per_s(&self, rated_w: f64) -> f64 {
        self.ramp_percent_per_s
            .map_or(f64::INFINITY, |p| p / 100.0 * rated_w.abs())
    }

    /// `current` moved toward `target` over `dt_s` as this device follows.
    pub fn follow(&self, current: f64, target: f64, dt_s: f64, rated_w: f64) -> f64 {
        follow(
            current,
            target,
            dt_s,
            self.lag_s,
            self.ramp_w_per_s(rated_w),
        )
    }
}

/// A meter's registers: refreshed every `refresh_ms`, each time with the value
/// of `report_lag_ms` before (the newest value at or before then).
#[derive(Clone, Debug, Default)]
pub struct Reporter {
    /// (real s, value), oldest first; only what a later refresh may still show.
    history: VecDeque<(f64, f64)>,
    next_refresh_s: f64,
}

impl Reporter {
    /// Records the true value at `t_s`; at a refresh returns the value to show.
    pub fn observe(&mut self, t_s: f64, value: f64, r: &SimResponse) -> Option<f64> {
        let lag_s = r.report_lag_ms as f64 / 1000.0;
        self.history.push_back((t_s, value));
        if t_s < self.next_refresh_s {
            return None;
        }
        let at = t_s - lag_s;
        // Keep the newest value at or before `at`: later refreshes look later.
        while self.history.len() > 1 && self.history[1].0 <= at {
            self.history.pop_front();
        }
        let shown = self.history.front().map_or(value, |&(_, v)| v);
        let period_s = r.refresh_ms as f64 / 1000.0;
        self.next_refresh_s = if period_s > 0.0 {
            // On the period's grid, so the refreshes do not drift.
            (t_s / period_s).floor() * period_s + period_s
        } else {
            t_s
        };
        Some(shown)
    }
}

/// A deterministic cloud pattern: the sun alternates between `high` and `low`
/// (fractions of the rating), each spell lasting `min_s..=max_s` seconds of real
/// time, drawn from `seed`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clouds {
    pub low: f64,
    pub high: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub seed: u64,
}

impl Clouds {
    /// The sun `t_s` seconds after the pattern started (it starts with `high`).
    pub fn sun_at(&self, t_s: f64) -> f64 {
        let span = (self.max_s - self.min_s).max(0.0);
        let mut state = self.seed | 1;
        let mut end = 0.0;
        let mut high = true;
        // Spells are at least `min_s` long (at least 0.1 s): a bounded walk.
        loop {
            // xorshift64: a fixed sequence per seed.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            end += (self.min_s + unit * span).max(0.1);
            if t_s < end {
                return if high { self.high } else { self.low };
            }
            high = !high;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(refresh_ms: u64, report_lag_ms: u64) -> SimResponse {
        SimResponse {
            refresh_ms,
            report_lag_ms,
            ..SimResponse::IDEAL
        }
    }

    #[test]
    fn a_lag_approaches_and_a_ramp_caps() {
        // Ideal: at once.
        assert_eq!(follow(0.0, 100.0, 0.1, 0.0, f64::INFINITY), 100.0);
        // One time constant: 63 %.
        let x = follow(0.0, 100.0, 3.0, 3.0, f64::INFINITY);
        assert!((x - 63.2).abs() < 0.1, "{x}");
        // A ramp of 10 W/s over 0.5 s: 5 W, either way.
        assert_eq!(follow(0.0, 100.0, 0.5, 0.0, 10.0), 5.0);
        assert_eq!(follow(100.0, 0.0, 0.5, 0.0, 10.0), 95.0);
        // Never past the target.
        let mut x = 0.0;
        for _ in 0..1000 {
            x = follow(x, 50.0, 0.1, 0.5, 1000.0);
            assert!(x <= 50.0);
        }
        assert!((x - 50.0).abs() < 1e-6);
        let r = SimResponse {
            ramp_percent_per_s: Some(10.0),
            ..SimResponse::IDEAL
        };
        assert_eq!(r.ramp_w_per_s(60_000.0), 6_000.0);
        assert_eq!(r.follow(0.0, 60_000.0, 1.0, 60_000.0), 6_000.0);
    }

    #[test]
    fn a_meter_refreshes_on_its_period_with_the_value_of_its_lag_before() {
        let r = meter(1000, 500);
        let mut m = Reporter::default();
        let mut shown = Vec::new();
        // The true value is the time in tenths of a second, every 100 ms.
        for i in 0..=30 {
            let t = f64::from(i) / 10.0;
            if let Some(v) = m.observe(t, f64::from(i), &r) {
                shown.push((i, v));
            }
        }
        // Refreshes at 0, 1, 2, 3 s, each with the value of 0.5 s before
        // (nothing older than the first value exists).
        assert_eq!(shown, [(0, 0.0), (10, 5.0), (20, 15.0), (30, 25.0)]);
        // Ideal: every step, the value of the moment.
        let mut m = Reporter::default();
        assert_eq!(m.observe(0.0, 1.0, &SimResponse::IDEAL), Some(1.0));
        assert_eq!(m.observe(0.1, 2.0, &SimResponse::IDEAL), Some(2.0));
    }

    #[test]
    fn clouds_alternate_within_their_spells() {
        let c = Clouds {
            low: 0.3,
            high: 1.0,
            min_s: 5.0,
            max_s: 10.0,
            seed: 7,
        };
        let mut last = c.sun_at(0.0);
        assert_eq!(last, 1.0);
        let mut since = 0.0;
        let mut spells = Vec::new();
        for i in 1..=1200 {
            let t = f64::from(i) / 10.0;
            let s = c.sun_at(t);
            assert!(s == 0.3 || s == 1.0);
            if s != last {
                spells.push(t - since);
                since = t;
                last = s;
            }
        }
        assert!(spells.len() >= 10, "{spells:?}");
        assert!(
            spells.iter().all(|d| (4.9..=10.1).contains(d)),
            "{spells:?}"
        );
        // The same seed, the same pattern.
        assert_eq!(c.sun_at(55.5), c.sun_at(55.5));
    }
}
