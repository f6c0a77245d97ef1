//! The simulated site's physics as plain functions: the simulated clock, the sun
//! curve, the household load profile, the battery's power decision and its state
//! of charge. Deterministic, no registers, no I/O; the site task calls these.

use std::f64::consts::PI;
use std::time::Duration;
use tokio::time::Instant;

const MS_PER_DAY: f64 = 86_400_000.0;

/// Simulated time: `start + factor × real elapsed`.
#[derive(Clone, Copy, Debug)]
pub struct SimClock {
    origin: Instant,
    start_ms: i64,
    factor: f64,
}

impl SimClock {
    pub fn new(start_ms: i64, factor: f64) -> SimClock {
        let factor = if factor.is_finite() && factor > 0.0 {
            factor
        } else {
            1.0
        };
        SimClock {
            origin: Instant::now(),
            start_ms,
            factor,
        }
    }

    /// Simulated epoch milliseconds at a real instant.
    pub fn at(&self, real: Instant) -> i64 {
        let elapsed = real.saturating_duration_since(self.origin).as_secs_f64();
        self.start_ms + (elapsed * 1000.0 * self.factor) as i64
    }

    pub fn now_ms(&self) -> i64 {
        self.at(Instant::now())
    }

    /// Real time since the clock started.
    pub fn real_elapsed(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// The time of one physics step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tick {
    /// Simulated epoch ms now.
    pub sim_ms: i64,
    /// Simulated seconds since the last step.
    pub dt_s: f64,
    /// Real seconds since the last step (what responses and revert timers
    /// follow).
    pub real_dt_s: f64,
    /// Real seconds since the site started (what the noise is drawn for).
    pub real_s: f64,
}

/// Hour of the day in UTC, 0.0..24.0.
pub fn hour_of_day(sim_ms: i64) -> f64 {
    (sim_ms as f64).rem_euclid(MS_PER_DAY) / 3_600_000.0
}

/// Fraction of rated PV power the sun allows now: a sine between 06:00 and
/// 18:00 UTC peaking at noon, zero at night, times a gentle deterministic cloud
/// ripple between 0.92 and 1.0.
pub fn sun_fraction(sim_ms: i64) -> f64 {
    let h = hour_of_day(sim_ms);
    if !(6.0..18.0).contains(&h) {
        return 0.0;
    }
    let clear = (PI * (h - 6.0) / 12.0).sin();
    let minutes = sim_ms as f64 / 60_000.0;
    let ripple =
        0.96 + 0.02 * (2.0 * PI * minutes / 17.0).sin() + 0.02 * (2.0 * PI * minutes / 41.0).sin();
    (clear * ripple).max(0.0)
}

/// Household load: the base load plus a morning bump around 07:30 and a larger
/// evening bump around 19:00, with a small ripple.
pub fn load_w(sim_ms: i64, base_w: f64) -> f64 {
    let h = hour_of_day(sim_ms);
    let bump = |centre: f64, width: f64| (-((h - centre) / width).powi(2)).exp();
    let minutes = sim_ms as f64 / 60_000.0;
    let ripple = 0.05 * (2.0 * PI * minutes / 7.0).sin();
    base_w * (1.0 + 0.8 * bump(7.5, 1.0) + 1.5 * bump(19.0, 1.5) + ripple)
}

/// A deterministic wobble of ±`amplitude` around `centre` (grid voltage,
/// frequency), so values look alive without randomness.
pub fn wobble(sim_ms: i64, centre: f64, amplitude: f64, period_s: f64) -> f64 {
    centre + amplitude * (2.0 * PI * (sim_ms as f64 / 1000.0) / period_s).sin()
}

/// A model-124 power window, charge-positive, in W: `lo ≤ P ≤ hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub lo: f64,
    pub hi: f64,
}

impl Window {
    /// The window for `StorCtl_Mod` with `InWRte`/`OutWRte` in percent of
    /// `WChaMax` (SunSpec model 124): bit 0 caps charging at `in_pct`, bit 1 caps
    /// discharging at `out_pct`; negative values force the opposite flow.
    pub fn from_controls(mode: u16, in_pct: f64, out_pct: f64, w_cha_max: f64) -> Window {
        let hi = if mode & 1 != 0 {
            in_pct / 100.0 * w_cha_max
        } else {
            f64::INFINITY
        };
        let lo = if mode & 2 != 0 {
            -out_pct / 100.0 * w_cha_max
        } else {
            f64::NEG_INFINITY
        };
        Window { lo, hi }
    }

    /// The point of the window closest to `p`; an empty window (lo > hi) holds idle.
    pub fn closest(self, p: f64) -> f64 {
        if self.lo > self.hi {
            0.0
        } else {
            p.clamp(self.lo, self.hi)
        }
    }
}

/// What a battery knows when it decides its power for one step.
#[derive(Clone, Copy, Debug)]
pub struct BatteryStep {
    /// Its own (self-consumption) wish, charge-positive, W.
    pub own_w: f64,
    /// Remote control window, if `StorCtl_Mod` has bits set.
    pub window: Option<Window>,
    pub max_charge_w: f64,
    pub max_discharge_w: f64,
    /// Upper bound on charging when it may charge from PV only (`ChaGriSet` = PV).
    pub pv_only_cap_w: Option<f64>,
    pub soc: f64,
    pub soc_min: f64,
    pub soc_max: f64,
    pub capacity_wh: f64,
    pub dt_s: f64,
}

impl BatteryStep {
    /// The power to run at, charge-positive: the own wish moved into the window,
    /// then limited by power ratings and by the energy left before SoC max (or
    /// above SoC min) within this step.
    pub fn power(&self) -> f64 {
        let mut p = match self.window {
            Some(w) => w.closest(self.own_w),
            None => self.own_w,
        };
        if let Some(cap) = self.pv_only_cap_w {
            p = p.min(cap.max(0.0));
        }
        p = p.clamp(-self.max_discharge_w.max(0.0), self.max_charge_w.max(0.0));
        self.within_energy(p)
    }

    /// `p` (charge-positive) limited by the energy left before SoC max (or
    /// above SoC min) within this step.
    pub fn within_energy(&self, p: f64) -> f64 {
        if self.dt_s > 0.0 && self.capacity_wh > 0.0 {
            let wh_per_pct = self.capacity_wh / 100.0;
            let room = ((self.soc_max - self.soc) * wh_per_pct).max(0.0);
            let left = ((self.soc - self.soc_min) * wh_per_pct).max(0.0);
            p.clamp(-left * 3600.0 / self.dt_s, room * 3600.0 / self.dt_s)
        } else {
            p
        }
    }

    /// SoC after running at `p` (charge-positive) for the step, kept within
    /// [soc_min, soc_max] against rounding.
    pub fn soc_after(&self, p: f64) -> f64 {
        if self.capacity_wh <= 0.0 {
            return self.soc;
        }
        let soc = self.soc + p * self.dt_s / 3600.0 / self.capacity_wh * 100.0;
        if p > 0.0 {
            soc.min(self.soc_max.max(self.soc))
        } else {
            soc.max(self.soc_min.min(self.soc))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOON: i64 = 1_719_489_600_000; // 2024-06-27T12:00:00Z
    const HOUR: i64 = 3_600_000;

    fn step(own_w: f64, window: Option<Window>, soc: f64) -> BatteryStep {
        BatteryStep {
            own_w,
            window,
            max_charge_w: 5000.0,
            max_discharge_w: 5000.0,
            pv_only_cap_w: None,
            soc,
            soc_min: 10.0,
            soc_max: 90.0,
            capacity_wh: 10_000.0,
            dt_s: 1.0,
        }
    }

    #[test]
    fn sun_is_zero_at_night_and_peaks_at_noon() {
        assert_eq!(sun_fraction(NOON - 7 * HOUR), 0.0);
        assert_eq!(sun_fraction(NOON + 6 * HOUR), 0.0);
        let noon = sun_fraction(NOON);
        assert!((0.92..=1.0).contains(&noon), "{noon}");
        assert!(sun_fraction(NOON - 4 * HOUR) < noon);
        assert!(sun_fraction(NOON - 5 * HOUR) > 0.0);
    }

    #[test]
    fn load_has_an_evening_peak_above_base() {
        let night = load_w(NOON - 10 * HOUR, 500.0);
        let evening = load_w(NOON + 7 * HOUR, 500.0);
        assert!((450.0..600.0).contains(&night), "{night}");
        assert!(evening > 1000.0, "{evening}");
    }

    #[test]
    fn exact_discharge_window_is_honoured() {
        // InWRte = -25 %, OutWRte = +25 %, both bits: exactly 25 % discharge.
        let w = Window::from_controls(3, -25.0, 25.0, 4000.0);
        assert_eq!(
            w,
            Window {
                lo: -1000.0,
                hi: -1000.0
            }
        );
        assert_eq!(step(3000.0, Some(w), 50.0).power(), -1000.0);
        // Charge limit only: own wish capped.
        let w = Window::from_controls(1, 10.0, 100.0, 4000.0);
        assert_eq!(step(3000.0, Some(w), 50.0).power(), 400.0);
        assert_eq!(step(-3000.0, Some(w), 50.0).power(), -3000.0);
        // Contradictory window: idle.
        let w = Window::from_controls(3, -50.0, -50.0, 4000.0);
        assert_eq!(step(-3000.0, Some(w), 50.0).power(), 0.0);
    }

    #[test]
    fn power_respects_ratings_soc_limits_and_pv_only() {
        assert_eq!(step(9000.0, None, 50.0).power(), 5000.0);
        assert_eq!(step(-9000.0, None, 50.0).power(), -5000.0);
        assert_eq!(step(1000.0, None, 90.0).power(), 0.0);
        assert_eq!(step(-1000.0, None, 10.0).power(), 0.0);
        let mut s = step(1000.0, None, 50.0);
        s.pv_only_cap_w = Some(300.0);
        assert_eq!(s.power(), 300.0);
        // One long step never overshoots SoC max.
        let mut s = step(5000.0, None, 89.0);
        s.dt_s = 3600.0;
        let p = s.power();
        assert!((p - 100.0).abs() < 1e-9, "{p}");
        assert!((s.soc_after(p) - 90.0).abs() < 1e-9);
    }

    #[test]
    fn clock_scales_real_time() {
        let c = SimClock::new(1000, 60.0);
        let later = c.origin + Duration::from_millis(500);
        assert_eq!(c.at(later), 1000 + 30_000);
    }
}
