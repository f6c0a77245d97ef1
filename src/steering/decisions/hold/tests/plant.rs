//! A site that responds like a real one, for the grid loop's transition tests:
//! inverters and batteries follow their commands with a first-order lag and a
//! ramp, the meter refreshes every second and reports half a second late,
//! every device is polled once a second, and the loop ticks once a second,
//! through `decide`, exactly as the control loop runs it. Time in ms, physics
//! every 100 ms.

use std::collections::{BTreeSet, VecDeque};

use super::{LoopSettings, LoopState, Meter};
use crate::config::{CurtailmentFulfilment, EssFallback, EssFulfilment, ExportOrder};
use crate::steering::alloc::{BatteryView, InverterView};
use crate::steering::decide::{decide, Command, Decision, Measurements, Site, SiteRules};
use crate::steering::signal::Active;

pub const STEP_MS: i64 = 100;
pub const POLL_MS: i64 = 1000;
pub const TICK_MS: i64 = 1000;
pub const METER_REFRESH_MS: i64 = 1000;
pub const METER_LAG_MS: i64 = 500;

/// How a device follows: lag (s) and ramp (W/s).
#[derive(Clone, Copy, Debug)]
pub struct Follow {
    pub lag_s: f64,
    pub ramp_w_per_s: f64,
}

impl Follow {
    fn step(&self, current: f64, target: f64) -> f64 {
        let dt = STEP_MS as f64 / 1000.0;
        let mut d = target - current;
        if self.lag_s > 0.0 {
            d *= 1.0 - (-dt / self.lag_s).exp();
        }
        let max = self.ramp_w_per_s * dt;
        current + d.clamp(-max, max)
    }
}

/// One reading as the agent keeps it.
#[derive(Clone, Copy, Debug, Default)]
struct Reading {
    value: f64,
    ts: i64,
}

pub struct Plant {
    pub now: i64,
    pub load_w: f64,
    /// Sun as a fraction of each inverter's rating.
    pub sun: f64,
    pub inverter_rated: Vec<f64>,
    pub battery_rated: Vec<f64>,
    pub capacity_wh: Vec<f64>,
    pub soc: Vec<f64>,
    pub pv: Vec<f64>,
    pub bat: Vec<f64>,
    pub inverter_follow: Follow,
    pub battery_follow: Vec<Follow>,
    limits: Vec<Option<f64>>,
    storage: Vec<Option<f64>>,
    /// True grid power (+ import) every step, for the meter's lag.
    history: VecDeque<(i64, f64)>,
    meter_shown: f64,
    pub meter_online: bool,
    meter_reading: Reading,
    pv_readings: Vec<Reading>,
    bat_readings: Vec<Reading>,
    pub rules: SiteRules,
    pub state: LoopState,
    pub last: Option<Decision>,
}

/// The site: a 60 kW inverter, a 30 kW / 50 kWh battery, a meter;
/// 40 kW export and 60 kW import allowed.
pub fn site(lag_s: f64, soc: f64) -> Plant {
    let inverter_rated = vec![60_000.0];
    let battery_rated = vec![30_000.0];
    Plant {
        now: 0,
        load_w: 8_000.0,
        sun: 1.0,
        pv: vec![0.0],
        bat: vec![0.0],
        soc: vec![soc],
        capacity_wh: vec![50_000.0],
        inverter_follow: Follow {
            lag_s,
            ramp_w_per_s: 0.1 * inverter_rated[0],
        },
        battery_follow: vec![Follow {
            lag_s,
            ramp_w_per_s: f64::INFINITY,
        }],
        limits: vec![None],
        storage: vec![None],
        history: VecDeque::new(),
        meter_shown: 0.0,
        meter_online: true,
        meter_reading: Reading::default(),
        pv_readings: vec![Reading::default()],
        bat_readings: vec![Reading::default()],
        rules: rules(&inverter_rated, &battery_rated),
        inverter_rated,
        battery_rated,
        state: LoopState::default(),
        last: None,
    }
}

fn rules(inverters: &[f64], batteries: &[f64]) -> SiteRules {
    SiteRules {
        ess: EssFulfilment::Proportional,
        curtailment: CurtailmentFulfilment::Proportional,
        ess_fallback: EssFallback::Auto,
        max_import_w: Some(60_000.0),
        max_export_w: Some(40_000.0),
        rated_production_w: inverters.iter().sum(),
        grid_loop: Some(LoopSettings {
            export_order: ExportOrder::StorageFirst,
            curtailment: CurtailmentFulfilment::Proportional,
            storage_ramp_w_per_s: 0.25 * batteries.iter().sum::<f64>(),
            production_ramp_w_per_s: 0.25 * inverters.iter().sum::<f64>(),
            settle_ms: 2 * POLL_MS + 1500 + TICK_MS,
        }),
    }
}

impl Plant {
    /// + import.
    pub fn grid(&self) -> f64 {
        self.load_w - self.pv.iter().sum::<f64>() - self.bat.iter().sum::<f64>()
    }

    fn full(&self, k: usize) -> bool {
        self.soc[k] >= 95.0
    }

    fn empty(&self, k: usize) -> bool {
        self.soc[k] <= 5.0
    }

    fn physics(&mut self) {
        let surplus = self.pv.iter().sum::<f64>() - self.load_w;
        for k in 0..self.pv.len() {
            let avail = self.sun * self.inverter_rated[k];
            let target = self.limits[k].map_or(avail, |l| avail.min(l));
            self.pv[k] = self.inverter_follow.step(self.pv[k], target);
        }
        let rated: f64 = self.battery_rated.iter().sum();
        for k in 0..self.bat.len() {
            // Released: self-consumption, its share of the surplus.
            let own = -surplus * self.battery_rated[k] / rated;
            let mut target = self.storage[k].unwrap_or(own);
            target = target.clamp(-self.battery_rated[k], self.battery_rated[k]);
            if (target < 0.0 && self.full(k)) || (target > 0.0 && self.empty(k)) {
                target = 0.0;
            }
            self.bat[k] = self.battery_follow[k].step(self.bat[k], target);
            if (self.bat[k] < 0.0 && self.full(k)) || (self.bat[k] > 0.0 && self.empty(k)) {
                self.bat[k] = 0.0;
            }
            let dt_h = STEP_MS as f64 / 3_600_000.0;
            self.soc[k] -= self.bat[k] * dt_h / self.capacity_wh[k] * 100.0;
        }
        let g = self.grid();
        self.history.push_back((self.now, g));
        while self.history.len() > 100 {
            self.history.pop_front();
        }
        if self.now % METER_REFRESH_MS == 0 {
            let at = self.now - METER_LAG_MS;
            self.meter_shown = self
                .history
                .iter()
                .rev()
                .find(|(t, _)| *t <= at)
                .or(self.history.front())
                .map_or(g, |(_, w)| *w);
        }
    }

    fn poll(&mut self) {
        // Staggered: the meter at 0, inverters at 300, batteries at 600 ms.
        let phase = self.now % POLL_MS;
        if phase == 0 && self.meter_online {
            self.meter_reading = Reading {
                value: self.meter_shown,
                ts: self.now,
            };
        }
        if phase == 300 {
            for (r, v) in self.pv_readings.iter_mut().zip(&self.pv) {
                *r = Reading {
                    value: *v,
                    ts: self.now,
                };
            }
        }
        if phase == 600 {
            for (r, v) in self.bat_readings.iter_mut().zip(&self.bat) {
                *r = Reading {
                    value: *v,
                    ts: self.now,
                };
            }
        }
    }

    fn views(&self) -> (Vec<BatteryView>, Vec<InverterView>) {
        let b = (0..self.bat.len())
            .map(|k| BatteryView {
                rated_w: self.battery_rated[k],
                max_charge_w: self.battery_rated[k],
                max_discharge_w: self.battery_rated[k],
                soc: Some(self.soc[k]),
                soc_min: 5.0,
                soc_max: 95.0,
                capacity_wh: Some(self.capacity_wh[k]),
                priority: 0,
            })
            .collect();
        let i = (0..self.pv.len())
            .map(|k| InverterView {
                rated_w: self.inverter_rated[k],
                measured_w: Some(self.pv_readings[k].value),
                priority: 0,
                limit_w: self.limits[k],
            })
            .collect();
        (b, i)
    }

    fn measurements(&self) -> Measurements {
        let meter_age = self.now - self.meter_reading.ts;
        let meter = if meter_age > 3 * POLL_MS {
            Meter::Lost("meter silent".into())
        } else {
            Meter::Fresh {
                grid_w: self.meter_reading.value,
                ts_ms: self.meter_reading.ts,
                report_lag_ms: METER_REFRESH_MS + METER_LAG_MS,
            }
        };
        let bat: f64 = self.bat_readings.iter().map(|r| r.value).sum();
        let oldest = self
            .pv_readings
            .iter()
            .chain(&self.bat_readings)
            .map(|r| r.ts)
            .min()
            .unwrap_or(self.now);
        Measurements {
            readings: self
                .bat_readings
                .iter()
                .chain(&self.pv_readings)
                .map(|r| Some((r.ts, r.value)))
                .collect(),
            meter: Some(meter),
            battery_w: Some(bat),
            production_w: Some(self.pv_readings.iter().map(|r| r.value).sum()),
            online_battery_w: bat,
            readings_from_ms: oldest.min(self.meter_reading.ts),
            ..Measurements::default()
        }
    }

    fn tick(&mut self, a: &Active) {
        let (b, i) = self.views();
        let m = self.measurements();
        let site = Site {
            rules: &self.rules,
            batteries: &b,
            inverters: &i,
            measurements: &m,
        };
        let d = decide(&site, a, &BTreeSet::new(), &self.state, self.now);
        self.state = d.loop_state.clone();
        for (slot, c) in d.batteries.iter().enumerate() {
            self.storage[slot] = match c {
                Command::EssPower(w) => Some(*w),
                _ => None,
            };
        }
        for (slot, c) in d.inverters.iter().enumerate() {
            self.limits[slot] = match c {
                Command::ProductionLimit(w) => Some(*w),
                _ => None,
            };
        }
        if std::env::var("PLANT_TRACE").is_ok() {
            eprintln!(
                "t {:5.1} grid {:7.0} pv {:6.0} bat {:6.0} soc {:4.1} | meter {:7.0} | {:?} cap {:?} bat {:?} load {:?}",
                self.now as f64 / 1000.0,
                self.grid(),
                self.pv[0],
                self.bat[0],
                self.soc[0],
                self.meter_reading.value,
                d.grid.mode,
                self.limits[0],
                self.storage[0],
                d.loop_state.load.map(|l| (l.low_w.round(), l.high_w.round())),
            );
        }
        self.last = Some(d);
    }

    /// Runs for `ms`, calling `active(t)` for the signal at each tick; returns
    /// the true grid power (+ import) every step.
    pub fn run(&mut self, ms: i64, active: &dyn Fn(i64) -> Active) -> Vec<(i64, f64)> {
        let mut out = Vec::new();
        let end = self.now + ms;
        while self.now < end {
            self.now += STEP_MS;
            self.physics();
            self.poll();
            if self.now % TICK_MS == 500 {
                self.tick(&active(self.now));
            }
            out.push((self.now, self.grid()));
        }
        out
    }
}

/// How far a trace went past an export limit and its band: (peak W over the
/// limit, seconds over the limit, Wh beyond the limit plus its tolerance).
pub fn export_over(trace: &[(i64, f64)], limit: &dyn Fn(i64) -> f64) -> (f64, f64, f64) {
    let dt_h = STEP_MS as f64 / 3_600_000.0;
    let mut peak = 0.0f64;
    let mut secs = 0.0;
    let mut wh = 0.0;
    for &(t, g) in trace {
        let l = limit(t);
        let over = -g - l;
        peak = peak.max(over);
        if over > 0.0 {
            secs += STEP_MS as f64 / 1000.0;
        }
        wh += (over - super::tolerance_w(l)).max(0.0) * dt_h;
    }
    (peak, secs, wh)
}
