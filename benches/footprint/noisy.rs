//! Series values like those an agent reads from a noisy site, for the benches
//! that write samples into a store themselves (a day of history, the growth
//! bench): the simulator's noise (`sitegate::sim::noise`: its amplitudes,
//! drawn per device and second), a fifth of the inverters and meters as
//! float32 readings, the others at the resolution their scale factors give,
//! counters that integrate the power, meters whose load walks on its own.
//! `calm` gives the smooth values these benches wrote before, for comparison.
//!
//! A [`Series`] holds its device's state: ask it for seconds in time order.

use std::f64::consts::PI;

use sitegate::model::Property;
use sitegate::sim::noise::{amplitude, channel as ch, device_seed, Jitter, LoadWalk};

/// The seed of every bench's noise: the same figures run after run.
const SEED: u64 = 35;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Inverter,
    Battery,
    Meter,
}

/// What the agent reads from each kind of simulated SunSpec device.
pub fn properties(kind: &str) -> &'static [Property] {
    use Property::*;
    match kind {
        "inverter" => &[
            ActivePower,
            ReactivePower,
            TotalEnergyProduced,
            Frequency,
            VoltageL1,
            VoltageL2,
            VoltageL3,
            CurrentL1,
            CurrentL2,
            CurrentL3,
            Temperature,
            OperatingState,
            ActivePowerLimit,
        ],
        "battery" => &[
            ActivePower,
            ReactivePower,
            TotalEnergyProduced,
            TotalEnergyConsumed,
            Frequency,
            VoltageL1,
            VoltageL2,
            VoltageL3,
            CurrentL1,
            CurrentL2,
            CurrentL3,
            Soc,
            MaxChargePower,
            MaxDischargePower,
            OperatingState,
        ],
        _ => &[
            ActivePower,
            ReactivePower,
            TotalEnergyProduced,
            TotalEnergyConsumed,
            Frequency,
            VoltageL1,
            VoltageL2,
            VoltageL3,
            CurrentL1,
            CurrentL2,
            CurrentL3,
        ],
    }
}

/// The smooth values of the calm benches: whole watts, one-decimal volts
/// and counters, slowly moving.
fn calm_value(device: usize, p: usize, second: i64) -> f64 {
    let phase = ((second + device as i64 * 97) as f64 / 900.0).sin();
    match p % 3 {
        0 => (3000.0 + 2500.0 * phase + ((second * 31 + p as i64) % 97) as f64).round(),
        1 => ((2300.0 + 30.0 * phase) + (second % 7) as f64).round() / 10.0,
        _ => (second / 60 + device as i64 * 1000) as f64,
    }
}

/// One device's series.
pub struct Series {
    kind: Kind,
    props: &'static [Property],
    index: usize,
    calm: bool,
    float: bool,
    rated_w: f64,
    jitter: Jitter,
    walk: LoadWalk,
    produced_wh: f64,
    consumed_wh: f64,
    last_s: Option<i64>,
}

/// Resolutions of an integer device: (W, V, A), as its scale factors give.
fn resolution(kind: Kind) -> (f64, f64, f64) {
    match kind {
        Kind::Inverter | Kind::Battery => (1.0, 0.01, 0.01),
        Kind::Meter => (10.0, 0.1, 0.01),
    }
}

impl Series {
    /// Device `index` of `kind` ("inverter", "battery", "meter"); the fifth,
    /// tenth, ... device of the index order is a float one when it is an
    /// inverter or a meter.
    pub fn new(kind: &str, index: usize, calm: bool) -> Series {
        let k = match kind {
            "inverter" => Kind::Inverter,
            "battery" => Kind::Battery,
            _ => Kind::Meter,
        };
        let seed = device_seed(SEED, "history", (index % 251) as u8) ^ index as u64;
        Series {
            kind: k,
            props: properties(kind),
            index,
            calm,
            float: k != Kind::Battery && index % 5 == 4,
            rated_w: 10_000.0,
            jitter: Jitter::seeded(seed),
            walk: LoadWalk::new(seed),
            produced_wh: 10_000_000.0 + index as f64 * 1000.0,
            consumed_wh: 2_000_000.0 + index as f64 * 1000.0,
            last_s: None,
        }
    }

    pub fn properties(&self) -> &'static [Property] {
        self.props
    }

    /// As the device shows `x`: a float32, or a whole number of `step`s.
    fn shown(&self, x: f64, step: f64) -> f64 {
        if self.float {
            f64::from(x as f32)
        } else {
            (x / step).round() * step
        }
    }

    /// The values of [`Series::properties`] at epoch second `s`, onto `out`.
    pub fn values(&mut self, s: i64, out: &mut Vec<f64>) {
        if self.calm {
            out.extend((0..self.props.len()).map(|p| calm_value(self.index, p, s)));
            return;
        }
        let dt = self.last_s.map_or(0, |l| (s - l).max(0)) as f64;
        self.last_s = Some(s);
        let j = self.jitter.at_second(s);
        let t = s as f64;
        let v = 230.0 + 1.5 * (2.0 * PI * t / 300.0).sin();
        let hz = 50.0 + 0.02 * (2.0 * PI * t / 97.0).sin();
        let h = t.rem_euclid(86_400.0) / 3600.0;
        let sun = if (6.0..18.0).contains(&h) {
            0.96 * (PI * (h - 6.0) / 12.0).sin()
        } else {
            0.0
        };
        let rated = self.rated_w;
        // AC power: inverter + produced, battery + discharging, meter + import.
        let p = match self.kind {
            Kind::Inverter => 0.9 * rated * sun,
            Kind::Battery => {
                let theta = 2.0 * PI * t / 86_400.0 + self.index as f64;
                -20_000.0 * 0.3 * 2.0 * PI / 86_400.0 * 3600.0 * theta.cos()
            }
            Kind::Meter => {
                let base = 10_000.0 * (1 + self.index % 7) as f64;
                let load = base * (1.0 + 0.05 * (2.0 * PI * t / 420.0).sin());
                load * self.walk.factor_at(s) - 6.0 * rated * sun
            }
        };
        let (produced, consumed) = match self.kind {
            Kind::Inverter => (p, 0.0),
            Kind::Battery => (p.max(0.0), (-p).max(0.0)),
            Kind::Meter => ((-p).max(0.0), p.max(0.0)),
        };
        self.produced_wh += produced * dt / 3600.0;
        self.consumed_wh += consumed * dt / 3600.0;
        let (w_step, v_step, a_step) = resolution(self.kind);
        let w = match self.kind {
            Kind::Meter => j.share(ch::W, p, amplitude::POWER),
            _ => j.power(ch::W, p, rated),
        };
        let var = match self.kind {
            Kind::Meter => j.share(ch::VAR, -0.05 * p.abs(), amplitude::POWER),
            _ if p != 0.0 => j.plus(ch::VAR, 0.0, amplitude::POWER * rated),
            _ => 0.0,
        };
        let amps = p / (3.0 * v);
        for prop in self.props {
            let x = match prop {
                Property::ActivePower => self.shown(w, w_step),
                Property::ReactivePower => self.shown(var, w_step),
                Property::TotalEnergyProduced => self.shown(self.produced_wh.floor(), 1.0),
                Property::TotalEnergyConsumed => self.shown(self.consumed_wh.floor(), 1.0),
                Property::Frequency => self.shown(j.plus(ch::HZ, hz, amplitude::HZ), 0.01),
                Property::VoltageL1 | Property::VoltageL2 | Property::VoltageL3 => {
                    let i = *prop as u64 - Property::VoltageL1 as u64;
                    let skew = [0.0, 0.4, -0.3][i as usize];
                    self.shown(j.plus(ch::V + i, v + skew, amplitude::VOLTS), v_step)
                }
                Property::CurrentL1 | Property::CurrentL2 | Property::CurrentL3 => {
                    let i = *prop as u64 - Property::CurrentL1 as u64;
                    self.shown(j.share(ch::A + i, amps, amplitude::CURRENT), a_step)
                }
                Property::Temperature => {
                    let tmp = 25.0 + 20.0 * p / rated;
                    self.shown(j.plus(ch::TEMP, tmp, amplitude::CELSIUS), 0.1)
                }
                Property::Soc => {
                    let theta = 2.0 * PI * t / 86_400.0 + self.index as f64;
                    j.soc(50.0 + 30.0 * theta.sin())
                }
                Property::OperatingState => match self.kind {
                    Kind::Inverter if p > 0.0 => 4.0,
                    Kind::Inverter => 2.0,
                    _ if p > 0.0 => 3.0,
                    _ => 4.0,
                },
                Property::MaxChargePower | Property::MaxDischargePower => rated,
                Property::ActivePowerLimit => 100.0,
                Property::StateOfHealth => 98.5,
            };
            out.push(x);
        }
    }
}
