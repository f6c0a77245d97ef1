//! Fixed inverters: single- and split-phase with integers and scale factors
//! (101, 102) and with floats (111, 112), each model laid out through its own
//! point definitions; and the three-phase float inverter (113) with a vendor
//! model and a repeating-block model in its chain.

use sunspec::models::{
    model101::Model101, model102::Model102, model111::Model111, model112::Model112,
    model113::Model113 as InvF, model120::Model120,
};

use super::super::common;
use super::{plain, scaled, Ac, IntSf, REPEATING_MODEL, VENDOR_MODEL};
use crate::modbus::sunspec::layout::inverter as layout;
use crate::modbus::sunspec::layout::map::{MapBuilder, RegisterMap};
use crate::model::Property;
use crate::register::codec::ValueType::{F32, I16, U16, U32};

/// The points every inverter model (101-103, 111-113) ends with: the other
/// temperatures (absent), the operating state, no events.
macro_rules! inverter_status {
    ($b:expr, $m:expr, $M:ident, $ac:expr) => {{
        for p in [&$M::TMP_SNK, &$M::TMP_TRNS, &$M::TMP_OT] {
            $b.unimpl($m, p);
        }
        plain($b, $m, &$M::ST, U16, $ac.st);
        $b.unimpl($m, &$M::ST_VND);
        $b.set($m, &$M::EVT1, U32, 0.0);
        $b.set($m, &$M::EVT2, U32, 0.0);
        // Each vendor event field has a type of its own: one call each.
        $b.unimpl($m, &$M::EVT_VND1);
        $b.unimpl($m, &$M::EVT_VND2);
        $b.unimpl($m, &$M::EVT_VND3);
        $b.unimpl($m, &$M::EVT_VND4);
    }};
}

/// Lays out an integer + scale factor inverter model (101, 102 and 103 share
/// one layout; they differ in which phases are mandatory).
macro_rules! int_inverter {
    ($b:expr, $M:ident, $ac:expr, $sf:expr) => {{
        let (b, ac, sf): (&mut MapBuilder, &Ac, &IntSf) = ($b, $ac, $sf);
        let m = b.model::<$M>();
        b.set(m, &$M::A_SF, I16, sf.a);
        b.set_scaled(m, &$M::A, U16, ac.total_a(), &$M::A_SF);
        scaled(b, m, &$M::APH_A, U16, ac.a[0], &$M::A_SF);
        scaled(b, m, &$M::APH_B, U16, ac.a[1], &$M::A_SF);
        scaled(b, m, &$M::APH_C, U16, ac.a[2], &$M::A_SF);
        b.set(m, &$M::V_SF, I16, sf.v);
        scaled(b, m, &$M::PP_VPH_AB, U16, ac.v_ll[0], &$M::V_SF);
        scaled(b, m, &$M::PP_VPH_BC, U16, ac.v_ll[1], &$M::V_SF);
        scaled(b, m, &$M::PP_VPH_CA, U16, ac.v_ll[2], &$M::V_SF);
        scaled(b, m, &$M::PH_VPH_A, U16, ac.v[0], &$M::V_SF);
        scaled(b, m, &$M::PH_VPH_B, U16, ac.v[1], &$M::V_SF);
        scaled(b, m, &$M::PH_VPH_C, U16, ac.v[2], &$M::V_SF);
        b.set(m, &$M::W_SF, I16, sf.w);
        b.set_scaled(m, &$M::W, I16, ac.w, &$M::W_SF);
        b.set(m, &$M::HZ_SF, I16, sf.hz);
        b.set_scaled(m, &$M::HZ, U16, ac.hz, &$M::HZ_SF);
        for p in [&$M::VA, &$M::VA_SF, &$M::PF, &$M::PF_SF] {
            b.unimpl(m, p);
        }
        match ac.var {
            Some(var) => {
                b.set(m, &$M::V_AR_SF, I16, sf.var);
                b.set_scaled(m, &$M::V_AR, I16, var, &$M::V_AR_SF);
            }
            None => {
                b.unimpl(m, &$M::V_AR);
                b.unimpl(m, &$M::V_AR_SF);
            }
        }
        b.set(m, &$M::WH_SF, I16, sf.wh);
        b.set_scaled(m, &$M::WH, U32, ac.produced_wh, &$M::WH_SF);
        for p in [&$M::DCA, &$M::DCV] {
            b.unimpl(m, p);
        }
        for p in [&$M::DCA_SF, &$M::DCV_SF, &$M::DCW, &$M::DCW_SF] {
            b.unimpl(m, p);
        }
        b.set(m, &$M::TMP_SF, I16, sf.tmp);
        scaled(b, m, &$M::TMP_CAB, I16, ac.tmp, &$M::TMP_SF);
        inverter_status!(b, m, $M, ac);
    }};
}

/// Lays out a float inverter model (111, 112 and 113 share one layout).
macro_rules! float_inverter {
    ($b:expr, $M:ident, $ac:expr) => {{
        let (b, ac): (&mut MapBuilder, &Ac) = ($b, $ac);
        let m = b.model::<$M>();
        b.set(m, &$M::A, F32, ac.total_a());
        plain(b, m, &$M::APH_A, F32, ac.a[0]);
        plain(b, m, &$M::APH_B, F32, ac.a[1]);
        plain(b, m, &$M::APH_C, F32, ac.a[2]);
        plain(b, m, &$M::PP_VPH_AB, F32, ac.v_ll[0]);
        plain(b, m, &$M::PP_VPH_BC, F32, ac.v_ll[1]);
        plain(b, m, &$M::PP_VPH_CA, F32, ac.v_ll[2]);
        plain(b, m, &$M::PH_VPH_A, F32, ac.v[0]);
        plain(b, m, &$M::PH_VPH_B, F32, ac.v[1]);
        plain(b, m, &$M::PH_VPH_C, F32, ac.v[2]);
        b.set(m, &$M::W, F32, ac.w);
        b.set(m, &$M::HZ, F32, ac.hz);
        plain(b, m, &$M::V_AR, F32, ac.var);
        b.set(m, &$M::WH, F32, ac.produced_wh);
        plain(b, m, &$M::TMP_CAB, F32, ac.tmp);
        for p in [&$M::VA, &$M::PF, &$M::DCA, &$M::DCV, &$M::DCW] {
            b.unimpl(m, p);
        }
        inverter_status!(b, m, $M, ac);
    }};
}

/// 101: phase A only; reactive power and a temperature below zero (signs).
pub fn ac_101(rated_w: f64) -> Ac {
    Ac {
        w: 0.42 * rated_w,
        var: Some(-250.0),
        hz: 49.98,
        v: [Some(229.9), None, None],
        v_ll: [None; 3],
        a: [Some(14.61), None, None],
        produced_wh: 7_654_320.0,
        consumed_wh: None,
        tmp: Some(-4.5),
        st: Some(5.0),
    }
}

/// 102: phases A and B of a 120/240 V split-phase service.
pub fn ac_102(rated_w: f64) -> Ac {
    Ac {
        w: 0.42 * rated_w,
        var: None,
        hz: 60.02,
        v: [Some(120.1), Some(119.8), None],
        v_ll: [Some(239.9), None, None],
        a: [Some(10.5), Some(9.75), None],
        produced_wh: 12_345_678.0,
        consumed_wh: None,
        tmp: Some(45.5),
        st: Some(4.0),
    }
}

/// 111 (values exact in float32).
pub fn ac_111(rated_w: f64) -> Ac {
    Ac {
        w: 0.42 * rated_w,
        var: Some(-120.5),
        hz: 49.875,
        v: [Some(230.25), None, None],
        v_ll: [None; 3],
        a: [Some(14.5), None, None],
        produced_wh: 2_345_678.0,
        consumed_wh: None,
        tmp: Some(-2.5),
        st: Some(4.0),
    }
}

/// 112 (values exact in float32).
pub fn ac_112(rated_w: f64) -> Ac {
    Ac {
        w: 0.42 * rated_w,
        var: None,
        hz: 59.875,
        v: [Some(120.25), Some(119.75), None],
        v_ll: [Some(240.0), None, None],
        a: [Some(12.5), Some(11.75), None],
        produced_wh: 9_876_543.0,
        consumed_wh: None,
        tmp: Some(38.25),
        st: Some(4.0),
    }
}

/// Scale factors from −2 to +1; `W_SF` as fine as the rating allows.
fn int_sf(rated_w: f64, wh: f64) -> IntSf {
    IntSf {
        a: -2.0,
        v: -1.0,
        w: f64::from(common::fit_sf(rated_w * 1.1, common::I16_LIMIT, -1)),
        hz: -2.0,
        var: 0.0,
        wh,
        tmp: -1.0,
    }
}

/// 1, 101, 120 (`WRtg` = the rating), 121 (`WMax` at 90 % of it).
pub fn int_101(mut b: MapBuilder, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    common::common(&mut b, "SIM-INV-101", serial, unit_id);
    int_inverter!(&mut b, Model101, &ac_101(rated_w), &int_sf(rated_w, 1.0));
    let n = common::nameplate(&mut b, rated_w, None);
    let w_sf = b.get(n, &Model120::W_RTG_SF, I16);
    layout::settings(&mut b, 0.9 * rated_w, w_sf);
    b.finish()
}

/// 1, 102, 120.
pub fn int_102(mut b: MapBuilder, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    common::common(&mut b, "SIM-INV-102", serial, unit_id);
    int_inverter!(&mut b, Model102, &ac_102(rated_w), &int_sf(rated_w, 0.0));
    common::nameplate(&mut b, rated_w, None);
    b.finish()
}

/// 1, 111, 120.
pub fn float_111(mut b: MapBuilder, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    common::common(&mut b, "SIM-INV-111", serial, unit_id);
    float_inverter!(&mut b, Model111, &ac_111(rated_w));
    common::nameplate(&mut b, rated_w, None);
    b.finish()
}

/// 1, 112.
pub fn float_112(mut b: MapBuilder, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    common::common(&mut b, "SIM-INV-112", serial, unit_id);
    float_inverter!(&mut b, Model112, &ac_112(rated_w));
    b.finish()
}

pub fn float_113_expected(rated_w: f64) -> Vec<(Property, f64)> {
    use Property as P;
    vec![
        (P::ActivePower, 0.42 * rated_w),
        (P::Frequency, 50.25),
        (P::VoltageL1, 230.5),
        (P::CurrentL1, 4.25),
        (P::TotalEnergyProduced, 12_345_678.0),
        (P::Temperature, 31.5),
        (P::OperatingState, 4.0),
        (P::ActivePowerLimit, 100.0),
    ]
}

/// 1, 113, a vendor model, 120, 121, 160 (repeating modules), 123.
pub fn float_113(mut b: MapBuilder, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    common::common(&mut b, "SIM-INV-FLOAT", serial, unit_id);
    let m = b.model::<InvF>();
    let amps = 4.25;
    for p in [&InvF::APH_A, &InvF::APH_B, &InvF::APH_C] {
        b.set(m, p, F32, amps);
    }
    b.set(m, &InvF::A, F32, 3.0 * amps);
    for p in [&InvF::PH_VPH_A, &InvF::PH_VPH_B, &InvF::PH_VPH_C] {
        b.set(m, p, F32, 230.5);
    }
    b.set(m, &InvF::W, F32, 0.42 * rated_w);
    b.set(m, &InvF::HZ, F32, 50.25);
    b.set(m, &InvF::WH, F32, 12_345_678.0);
    b.set(m, &InvF::TMP_CAB, F32, 31.5);
    b.set(m, &InvF::ST, U16, 4.0);
    for p in [&InvF::V_AR, &InvF::VA, &InvF::PF, &InvF::TMP_SNK] {
        b.unimpl(m, p);
    }
    b.raw_model(VENDOR_MODEL.0, VENDOR_MODEL.1);
    let n = common::nameplate(&mut b, rated_w, None);
    let w_sf = b.get(n, &Model120::W_RTG_SF, I16);
    layout::settings(&mut b, rated_w, w_sf);
    b.raw_model(REPEATING_MODEL.0, REPEATING_MODEL.1);
    layout::controls(&mut b);
    b.finish()
}
