//! Fixed meters with integers and scale factors: single-phase, split-phase
//! and delta (201, 202, 204), each model laid out through its own point
//! definitions. `W` is + import, − export, as the agent reads SunSpec meters.

use sunspec::models::{model201::Model201, model202::Model202, model204::Model204};

use super::super::common;
use super::{scaled, Ac, IntSf};
use crate::modbus::sunspec::layout::map::{MapBuilder, RegisterMap};
use crate::register::codec::ValueType::{I16, U32};

/// Lays out an integer + scale factor meter model (201 to 204 share one
/// layout; 201 names its line-to-line voltages `PPVph*`, the others `PhVph*`).
macro_rules! int_meter {
    ($b:expr, $M:ident, [$ab:ident, $bc:ident, $ca:ident], $ac:expr, $sf:expr) => {{
        let (b, ac, sf): (&mut MapBuilder, &Ac, &IntSf) = ($b, $ac, $sf);
        let m = b.model::<$M>();
        b.set(m, &$M::A_SF, I16, sf.a);
        b.set_scaled(m, &$M::A, I16, ac.total_a(), &$M::A_SF);
        scaled(b, m, &$M::APH_A, I16, ac.a[0], &$M::A_SF);
        scaled(b, m, &$M::APH_B, I16, ac.a[1], &$M::A_SF);
        scaled(b, m, &$M::APH_C, I16, ac.a[2], &$M::A_SF);
        b.set(m, &$M::V_SF, I16, sf.v);
        scaled(b, m, &$M::PH_V, I16, Ac::mean(&ac.v), &$M::V_SF);
        scaled(b, m, &$M::PH_VPH_A, I16, ac.v[0], &$M::V_SF);
        scaled(b, m, &$M::PH_VPH_B, I16, ac.v[1], &$M::V_SF);
        scaled(b, m, &$M::PH_VPH_C, I16, ac.v[2], &$M::V_SF);
        scaled(b, m, &$M::PPV, I16, Ac::mean(&ac.v_ll), &$M::V_SF);
        scaled(b, m, &$M::$ab, I16, ac.v_ll[0], &$M::V_SF);
        scaled(b, m, &$M::$bc, I16, ac.v_ll[1], &$M::V_SF);
        scaled(b, m, &$M::$ca, I16, ac.v_ll[2], &$M::V_SF);
        b.set(m, &$M::HZ_SF, I16, sf.hz);
        b.set_scaled(m, &$M::HZ, I16, ac.hz, &$M::HZ_SF);
        b.set(m, &$M::W_SF, I16, sf.w);
        b.set_scaled(m, &$M::W, I16, ac.w, &$M::W_SF);
        for p in [&$M::WPH_A, &$M::WPH_B, &$M::WPH_C] {
            b.unimpl(m, p);
        }
        for p in [
            &$M::VA,
            &$M::V_APH_A,
            &$M::V_APH_B,
            &$M::V_APH_C,
            &$M::VA_SF,
        ] {
            b.unimpl(m, p);
        }
        for p in [&$M::VA_RPH_A, &$M::VA_RPH_B, &$M::VA_RPH_C] {
            b.unimpl(m, p);
        }
        match ac.var {
            Some(var) => {
                b.set(m, &$M::VAR_SF, I16, sf.var);
                b.set_scaled(m, &$M::VAR, I16, var, &$M::VAR_SF);
            }
            None => {
                b.unimpl(m, &$M::VAR);
                b.unimpl(m, &$M::VAR_SF);
            }
        }
        for p in [
            &$M::PF,
            &$M::P_FPH_A,
            &$M::P_FPH_B,
            &$M::P_FPH_C,
            &$M::PF_SF,
        ] {
            b.unimpl(m, p);
        }
        b.set(m, &$M::TOT_WH_SF, I16, sf.wh);
        b.set_scaled(m, &$M::TOT_WH_EXP, U32, ac.produced_wh, &$M::TOT_WH_SF);
        let imported = ac.consumed_wh.unwrap_or(0.0);
        b.set_scaled(m, &$M::TOT_WH_IMP, U32, imported, &$M::TOT_WH_SF);
        // Per-phase, apparent and reactive energies: accumulators, 0 = absent.
        for p in [
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
            &$M::TOT_V_ARH_IMP_Q1_PH_A,
            &$M::TOT_V_ARH_IMP_Q1_PH_B,
            &$M::TOT_V_ARH_IMP_Q1_PH_C,
            &$M::TOT_V_ARH_IMP_Q2,
            &$M::TOT_V_ARH_IMP_Q2_PH_A,
            &$M::TOT_V_ARH_IMP_Q2_PH_B,
            &$M::TOT_V_ARH_IMP_Q2_PH_C,
            &$M::TOT_V_ARH_EXP_Q3,
            &$M::TOT_V_ARH_EXP_Q3_PH_A,
            &$M::TOT_V_ARH_EXP_Q3_PH_B,
            &$M::TOT_V_ARH_EXP_Q3_PH_C,
            &$M::TOT_V_ARH_EXP_Q4,
            &$M::TOT_V_ARH_EXP_Q4_PH_A,
            &$M::TOT_V_ARH_EXP_Q4_PH_B,
            &$M::TOT_V_ARH_EXP_Q4_PH_C,
        ] {
            b.unimpl_acc(m, p);
        }
        b.unimpl(m, &$M::TOT_V_AH_SF);
        b.unimpl(m, &$M::TOT_V_ARH_SF);
        b.set(m, &$M::EVT, U32, 0.0);
    }};
}

/// 201: phase A only, exporting; reactive power at scale 1.
pub const AC_201: Ac = Ac {
    w: -1950.0,
    var: Some(310.0),
    hz: 50.02,
    v: [Some(231.4), None, None],
    v_ll: [None; 3],
    a: [Some(-8.45), None, None],
    produced_wh: 4_321_000.0,
    consumed_wh: Some(1_234_560.0),
    tmp: None,
    st: None,
};

/// 202: phases A and B of a split-phase service, importing.
pub const AC_202: Ac = Ac {
    w: 2345.6,
    var: None,
    hz: 59.98,
    v: [Some(121.3), Some(120.7), None],
    v_ll: [Some(242.0), None, None],
    a: [Some(10.25), Some(9.5), None],
    produced_wh: 777_777.0,
    consumed_wh: Some(3_333_333.0),
    tmp: None,
    st: None,
};

/// 204: three phases without a neutral: line-to-line voltages only.
pub const AC_204: Ac = Ac {
    w: 12_340.0,
    var: Some(-1530.0),
    hz: 50.0,
    v: [None; 3],
    v_ll: [Some(400.5), Some(401.0), Some(399.5)],
    a: [Some(17.8), Some(17.9), Some(17.7)],
    produced_wh: 98_700.0,
    consumed_wh: Some(45_600_000.0),
    tmp: None,
    st: None,
};

/// Scale factors: current `a`, power `w`, reactive power `var`, energy `wh`.
const fn int_sf(a: f64, w: f64, var: f64, wh: f64) -> IntSf {
    IntSf {
        a,
        v: -1.0,
        w,
        hz: -2.0,
        var,
        wh,
        tmp: 0.0,
    }
}

pub fn int_201(mut b: MapBuilder, unit_id: u8, serial: &str) -> RegisterMap {
    common::common(&mut b, "SIM-MTR-201", serial, unit_id);
    let sf = int_sf(-2.0, 1.0, 0.0, 1.0);
    int_meter!(
        &mut b,
        Model201,
        [PP_VPH_AB, PP_VPH_BC, PP_VPH_CA],
        &AC_201,
        &sf
    );
    b.finish()
}

pub fn int_202(mut b: MapBuilder, unit_id: u8, serial: &str) -> RegisterMap {
    common::common(&mut b, "SIM-MTR-202", serial, unit_id);
    let sf = int_sf(-2.0, -1.0, 0.0, 0.0);
    int_meter!(
        &mut b,
        Model202,
        [PH_VPH_AB, PH_VPH_BC, PH_VPH_CA],
        &AC_202,
        &sf
    );
    b.finish()
}

pub fn int_204(mut b: MapBuilder, unit_id: u8, serial: &str) -> RegisterMap {
    common::common(&mut b, "SIM-MTR-204", serial, unit_id);
    let sf = IntSf {
        hz: -1.0,
        ..int_sf(-1.0, 1.0, 1.0, 2.0)
    };
    int_meter!(
        &mut b,
        Model204,
        [PH_VPH_AB, PH_VPH_BC, PH_VPH_CA],
        &AC_204,
        &sf
    );
    b.finish()
}
