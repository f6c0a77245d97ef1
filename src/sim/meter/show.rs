//! How the simulated meter's reading is written into model 203 or 213, with
//! the meter's noise of the current real second. No balance here.

use sunspec::models::model203::Model203 as Int;
use sunspec::models::model213::Model213 as Float;

use super::Meter;
use crate::modbus::sunspec::layout::map::{Block, RegisterMap};
use crate::register::codec::ValueType::{F32, I16, U32};
use crate::sim::common::{GRID_LL_V, GRID_V};
use crate::sim::noise::{amplitude, channel as ch};
use crate::sim::physics::{wobble, Tick};

/// The measurement model a meter speaks.
pub enum Models {
    Int(Block<Int>),
    Float(Block<Float>),
}

/// What one refresh shows, noise included.
struct Shown {
    w: f64,
    w_phase: [f64; 3],
    var: f64,
    /// Phase currents and the total.
    a: [f64; 4],
    /// Phase voltages and the average.
    v: [f64; 4],
    /// Line-to-line voltages and the average.
    v_ll: [f64; 4],
    hz: f64,
    export_wh: f64,
    import_wh: f64,
}

impl Meter {
    fn shown(&self, site_w: f64, tick: Tick) -> Shown {
        let j = self.jitter.at(tick.real_s);
        let v = wobble(tick.sim_ms, GRID_V, 1.5, 300.0);
        let amps = site_w / (3.0 * v);
        let a = |i: u64, a: f64| j.share(ch::A + i, a, amplitude::CURRENT);
        let volts = |i: u64, v: f64| j.plus(ch::V + i, v, amplitude::VOLTS);
        let ll = GRID_LL_V + 1.7 * (v - GRID_V);
        let w = j.share(ch::W, site_w, amplitude::POWER);
        let w_phase = |i: u64| j.share(ch::W_PHASE + i, site_w / 3.0, amplitude::POWER);
        Shown {
            w,
            w_phase: [w_phase(0), w_phase(1), w_phase(2)],
            var: j.share(ch::VAR, -0.05 * site_w.abs(), amplitude::POWER),
            a: [a(0, amps), a(1, amps), a(2, amps), a(3, 3.0 * amps)],
            v: [
                volts(0, v),
                volts(1, v + 0.4),
                volts(2, v - 0.3),
                volts(6, v),
            ],
            v_ll: [volts(3, ll), volts(4, ll), volts(5, ll), volts(7, ll)],
            hz: j.plus(ch::HZ, wobble(tick.sim_ms, 50.0, 0.02, 97.0), amplitude::HZ),
            export_wh: self.export_wh,
            import_wh: self.import_wh,
        }
    }

    /// Writes `site_w` and the counters into the measurement model.
    pub(super) fn show(&self, map: &mut RegisterMap, site_w: f64, tick: Tick) {
        let s = self.shown(site_w, tick);
        match self.models {
            Models::Int(m) => int(map, m, &s),
            Models::Float(m) => float(map, m, &s),
        }
    }
}

fn int(map: &mut RegisterMap, m: Block<Int>, s: &Shown) {
    map.set_scaled(m, &Int::A, I16, s.a[3], &Int::A_SF);
    for (p, a) in [&Int::APH_A, &Int::APH_B, &Int::APH_C].into_iter().zip(s.a) {
        map.set_scaled(m, p, I16, a, &Int::A_SF);
    }
    let ph = [&Int::PH_VPH_A, &Int::PH_VPH_B, &Int::PH_VPH_C, &Int::PH_V];
    for (p, v) in ph.into_iter().zip(s.v) {
        map.set_scaled(m, p, I16, v, &Int::V_SF);
    }
    let ll = [&Int::PH_VPH_AB, &Int::PH_VPH_BC, &Int::PH_VPH_CA, &Int::PPV];
    for (p, v) in ll.into_iter().zip(s.v_ll) {
        map.set_scaled(m, p, I16, v, &Int::V_SF);
    }
    map.set_scaled(m, &Int::HZ, I16, s.hz, &Int::HZ_SF);
    map.set_scaled(m, &Int::W, I16, s.w, &Int::W_SF);
    for (p, w) in [&Int::WPH_A, &Int::WPH_B, &Int::WPH_C]
        .into_iter()
        .zip(s.w_phase)
    {
        map.set_scaled(m, p, I16, w, &Int::W_SF);
    }
    map.set_scaled(m, &Int::VAR, I16, s.var, &Int::VAR_SF);
    let exp = s.export_wh.floor();
    map.set_scaled(m, &Int::TOT_WH_EXP, U32, exp, &Int::TOT_WH_SF);
    let imp = s.import_wh.floor();
    map.set_scaled(m, &Int::TOT_WH_IMP, U32, imp, &Int::TOT_WH_SF);
}

fn float(map: &mut RegisterMap, m: Block<Float>, s: &Shown) {
    map.set(m, &Float::A, F32, s.a[3]);
    for (p, a) in [&Float::APH_A, &Float::APH_B, &Float::APH_C]
        .into_iter()
        .zip(s.a)
    {
        map.set(m, p, F32, a);
    }
    let ph = [
        &Float::PH_VPH_A,
        &Float::PH_VPH_B,
        &Float::PH_VPH_C,
        &Float::PH_V,
    ];
    for (p, v) in ph.into_iter().zip(s.v) {
        map.set(m, p, F32, v);
    }
    let ll = [
        &Float::PP_VPH_AB,
        &Float::PP_VPH_BC,
        &Float::PP_VPH_CA,
        &Float::PPV,
    ];
    for (p, v) in ll.into_iter().zip(s.v_ll) {
        map.set(m, p, F32, v);
    }
    map.set(m, &Float::HZ, F32, s.hz);
    map.set(m, &Float::W, F32, s.w);
    for (p, w) in [&Float::WPH_A, &Float::WPH_B, &Float::WPH_C]
        .into_iter()
        .zip(s.w_phase)
    {
        map.set(m, p, F32, w);
    }
    map.set(m, &Float::VAR, F32, s.var);
    map.set(m, &Float::TOT_WH_EXP, F32, s.export_wh);
    map.set(m, &Float::TOT_WH_IMP, F32, s.import_wh);
}
