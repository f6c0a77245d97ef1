//! How the simulated inverter's state is written into its measurement model:
//! 103 (integers and scale factors) or 113 (floats), with the device's noise
//! of the current real second. No decisions about power here.

use sunspec::models::model103::Model103 as Int;
use sunspec::models::model113::Model113 as Float;

use super::Inverter;
use crate::modbus::sunspec::layout::map::{Block, RegisterMap};
use crate::register::codec::ValueType::{F32, I16, U16, U32};
use crate::sim::common::GRID_V;
use crate::sim::noise::{amplitude, channel as ch, Jitter};
use crate::sim::physics::{wobble, Tick};

/// The measurement model an inverter speaks.
pub enum Measure {
    Int(Block<Int>),
    Float(Block<Float>),
}

/// What one publication shows, noise included.
struct Shown {
    w: f64,
    var: f64,
    /// Phase currents and the total.
    a: [f64; 4],
    /// Phase voltages.
    v: [f64; 3],
    hz: f64,
    wh: f64,
    tmp: f64,
    st: f64,
}

impl Inverter {
    fn shown(&self, tick: Tick, st: f64) -> Shown {
        let j: Jitter = self.jitter.at(tick.real_s);
        let v = wobble(tick.sim_ms, GRID_V, 1.5, 300.0);
        let phase_a = self.ac_w / (3.0 * v);
        let amps = |i: u64, a: f64| j.share(ch::A + i, a, amplitude::CURRENT);
        let volts = |i: u64, skew: f64| j.plus(ch::V + i, v + skew, amplitude::VOLTS);
        let var = if self.ac_w > 0.0 {
            j.plus(ch::VAR, 0.0, amplitude::POWER * self.rated_w)
        } else {
            0.0
        };
        let tmp = 25.0 + 20.0 * self.ac_w / self.rated_w.max(1.0);
        Shown {
            w: j.power(ch::W, self.ac_w, self.rated_w),
            var,
            a: [
                amps(0, phase_a),
                amps(1, phase_a),
                amps(2, phase_a),
                amps(3, 3.0 * phase_a),
            ],
            v: [volts(0, 0.0), volts(1, 0.4), volts(2, -0.3)],
            hz: j.plus(ch::HZ, wobble(tick.sim_ms, 50.0, 0.02, 97.0), amplitude::HZ),
            wh: self.wh,
            tmp: j.plus(ch::TEMP, tmp, amplitude::CELSIUS),
            st,
        }
    }

    /// Writes the state of the moment into the measurement model.
    pub(super) fn publish(&self, map: &mut RegisterMap, tick: Tick, st: f64) {
        let s = self.shown(tick, st);
        match self.measure {
            Measure::Int(m) => int(map, m, &s),
            Measure::Float(m) => float(map, m, &s),
        }
    }
}

fn int(map: &mut RegisterMap, m: Block<Int>, s: &Shown) {
    map.set_scaled(m, &Int::A, U16, s.a[3], &Int::A_SF);
    for (p, a) in [&Int::APH_A, &Int::APH_B, &Int::APH_C].into_iter().zip(s.a) {
        map.set_scaled(m, p, U16, a, &Int::A_SF);
    }
    for (p, v) in [&Int::PH_VPH_A, &Int::PH_VPH_B, &Int::PH_VPH_C]
        .into_iter()
        .zip(s.v)
    {
        map.set_scaled(m, p, U16, v, &Int::V_SF);
    }
    map.set_scaled(m, &Int::W, I16, s.w, &Int::W_SF);
    map.set_scaled(m, &Int::HZ, U16, s.hz, &Int::HZ_SF);
    map.set_scaled(m, &Int::V_AR, I16, s.var, &Int::V_AR_SF);
    map.set_scaled(m, &Int::WH, U32, s.wh.floor(), &Int::WH_SF);
    map.set_scaled(m, &Int::TMP_CAB, I16, s.tmp, &Int::TMP_SF);
    map.set(m, &Int::ST, U16, s.st);
}

fn float(map: &mut RegisterMap, m: Block<Float>, s: &Shown) {
    map.set(m, &Float::A, F32, s.a[3]);
    for (p, a) in [&Float::APH_A, &Float::APH_B, &Float::APH_C]
        .into_iter()
        .zip(s.a)
    {
        map.set(m, p, F32, a);
    }
    for (p, v) in [&Float::PH_VPH_A, &Float::PH_VPH_B, &Float::PH_VPH_C]
        .into_iter()
        .zip(s.v)
    {
        map.set(m, p, F32, v);
    }
    map.set(m, &Float::W, F32, s.w);
    map.set(m, &Float::HZ, F32, s.hz);
    map.set(m, &Float::V_AR, F32, s.var);
    map.set(m, &Float::WH, F32, s.wh);
    map.set(m, &Float::TMP_CAB, F32, s.tmp);
    map.set(m, &Float::ST, U16, s.st);
}
