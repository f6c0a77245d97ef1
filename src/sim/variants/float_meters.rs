//! Fixed float meters: single-phase, split-phase and delta (211, 212, 214),
//! each model laid out through its own point definitions, and the
//! three-phase float meter (213). `W` is + import, − export, as the agent
//! reads SunSpec meters.

use sunspec::models::{
    model211::Model211, model212::Model212, model213::Model213 as MeterF, model214::Model214,
};

use super::super::common;
use super::{plain, Ac};
use crate::modbus::sunspec::layout::map::{MapBuilder, RegisterMap};
use crate::model::Property;
use crate::register::codec::ValueType::{F32, U32};

/// Lays out a float meter model (211 to 214 share one layout).
macro_rules! float_meter {
    ($b:expr, $M:ident, $ac:expr) => {{
        let (b, ac): (&mut MapBuilder, &Ac) = ($b, $ac);
        let m = b.model::<$M>();
        b.set(m, &$M::A, F32, ac.total_a());
        plain(b, m, &$M::APH_A, F32, ac.a[0]);
        plain(b, m, &$M::APH_B, F32, ac.a[1]);
        plain(b, m, &$M::APH_C, F32, ac.a[2]);
        plain(b, m, &$M::PH_V, F32, Ac::mean(&ac.v));
        plain(b, m, &$M::PH_VPH_A, F32, ac.v[0]);
        plain(b, m, &$M::PH_VPH_B, F32, ac.v[1]);
        plain(b, m, &$M::PH_VPH_C, F32, ac.v[2]);
        plain(b, m, &$M::PPV, F32, Ac::mean(&ac.v_ll));
        plain(b, m, &$M::PP_VPH_AB, F32, ac.v_ll[0]);
        plain(b, m, &$M::PP_VPH_BC, F32, ac.v_ll[1]);
        plain(b, m, &$M::PP_VPH_CA, F32, ac.v_ll[2]);
        b.set(m, &$M::HZ, F32, ac.hz);
        b.set(m, &$M::W, F32, ac.w);
        plain(b, m, &$M::VAR, F32, ac.var);
        b.set(m, &$M::TOT_WH_EXP, F32, ac.produced_wh);
        b.set(m, &$M::TOT_WH_IMP, F32, ac.consumed_wh.unwrap_or(0.0));
        for p in [
            &$M::WPH_A,
            &$M::WPH_B,
            &$M::WPH_C,
            &$M::VA,
            &$M::V_APH_A,
            &$M::V_APH_B,
            &$M::V_APH_C,
            &$M::VA_RPH_A,
            &$M::VA_RPH_B,
            &$M::VA_RPH_C,
            &$M::PF,
            &$M::P_FPH_A,
            &$M::P_FPH_B,
            &$M::P_FPH_C,
            &$M::TOT_WH_EXP_PH_A,
            &$M::TOT_WH_EXP_PH_B,
            &$M::TOT_WH_EXP_PH_C,
            &$M::TOT_WH_IMP_PH_A,
            &$M::TOT_WH_IMP_PH_B,
            &$M::TOT_WH_IMP_PH_C,
            &$M::TOT_V_AH_EXP,
            &$M::TOT_V_AH_EXP_PH_A,
            &$M::TOT_V_AH_EXP_PH_B,
            &$M::TOT_V_AH_EXP_PH_C,
            &$M::TOT_V_AH_IMP,
            &$M::TOT_V_AH_IMP_PH_A,
            &$M::TOT_V_AH_IMP_PH_B,
            &$M::TOT_V_AH_IMP_PH_C,
            &$M::TOT_V_ARH_IMP_Q1,
            &$M::TOT_V_ARH_IMP_Q1PH_A,
            &$M::TOT_V_ARH_IMP_Q1PH_B,
            &$M::TOT_V_ARH_IMP_Q1PH_C,
            &$M::TOT_V_ARH_IMP_Q2,
            &$M::TOT_V_ARH_IMP_Q2PH_A,
            &$M::TOT_V_ARH_IMP_Q2PH_B,
            &$M::TOT_V_ARH_IMP_Q2PH_C,
            &$M::TOT_V_ARH_EXP_Q3,
            &$M::TOT_V_ARH_EXP_Q3PH_A,
            &$M::TOT_V_ARH_EXP_Q3PH_B,
            &$M::TOT_V_ARH_EXP_Q3PH_C,
            &$M::TOT_V_ARH_EXP_Q4,
            &$M::TOT_V_ARH_EXP_Q4PH_A,
            &$M::TOT_V_ARH_EXP_Q4PH_B,
            &$M::TOT_V_ARH_EXP_Q4PH_C,
        ] {
            b.unimpl(m, p);
        }
        b.set(m, &$M::EVT, U32, 0.0);
    }};
}

/// 211 (values exact in float32).
pub const AC_211: Ac = Ac {
    w: 812.5,
    var: Some(-75.25),
    hz: 50.125,
    v: [Some(229.75), None, None],
    v_ll: [None; 3],
    a: [Some(3.5), None, None],
    produced_wh: 1_000_000.0,
    consumed_wh: Some(2_500_000.0),
    tmp: None,
    st: None,
};

/// 212: exporting (values exact in float32).
pub const AC_212: Ac = Ac {
    w: -4000.5,
    var: None,
    hz: 59.875,
    v: [Some(120.5), Some(121.0), None],
    v_ll: [Some(241.5), None, None],
    a: [Some(-16.5), Some(-16.25), None],
    produced_wh: 3_000_000.0,
    consumed_wh: Some(400_000.0),
    tmp: None,
    st: None,
};

/// 214: delta, line-to-line voltages only (values exact in float32).
pub const AC_214: Ac = Ac {
    w: 20_480.0,
    var: Some(1024.0),
    hz: 50.0,
    v: [None; 3],
    v_ll: [Some(399.5), Some(400.25), Some(400.75)],
    a: [Some(29.5), Some(29.75), Some(30.0)],
    produced_wh: 750_000.0,
    consumed_wh: Some(8_000_000.0),
    tmp: None,
    st: None,
};

pub fn float_211(mut b: MapBuilder, unit_id: u8, serial: &str) -> RegisterMap {
    common::common(&mut b, "SIM-MTR-211", serial, unit_id);
    float_meter!(&mut b, Model211, &AC_211);
    b.finish()
}

pub fn float_212(mut b: MapBuilder, unit_id: u8, serial: &str) -> RegisterMap {
    common::common(&mut b, "SIM-MTR-212", serial, unit_id);
    float_meter!(&mut b, Model212, &AC_212);
    b.finish()
}

pub fn float_214(mut b: MapBuilder, unit_id: u8, serial: &str) -> RegisterMap {
    common::common(&mut b, "SIM-MTR-214", serial, unit_id);
    float_meter!(&mut b, Model214, &AC_214);
    b.finish()
}

pub fn float_213_expected() -> Vec<(Property, f64)> {
    use Property as P;
    vec![
        (P::ActivePower, -1234.5),
        (P::Frequency, 49.75),
        (P::VoltageL2, 231.25),
        (P::TotalEnergyProduced, 5_000_000.0),
        (P::TotalEnergyConsumed, 6_000_000.0),
    ]
}

/// 1, 213.
pub fn float_213(mut b: MapBuilder, unit_id: u8, serial: &str) -> RegisterMap {
    common::common(&mut b, "SIM-MTR-FLOAT", serial, unit_id);
    let m = b.model::<MeterF>();
    b.set(m, &MeterF::W, F32, -1234.5);
    b.set(m, &MeterF::HZ, F32, 49.75);
    for p in [&MeterF::PH_VPH_A, &MeterF::PH_VPH_B, &MeterF::PH_VPH_C] {
        b.set(m, p, F32, 231.25);
    }
    for p in [&MeterF::APH_A, &MeterF::APH_B, &MeterF::APH_C] {
        b.set(m, p, F32, -1.75);
    }
    b.set(m, &MeterF::TOT_WH_EXP, F32, 5_000_000.0);
    b.set(m, &MeterF::TOT_WH_IMP, F32, 6_000_000.0);
    b.unimpl(m, &MeterF::VAR);
    b.finish()
}
