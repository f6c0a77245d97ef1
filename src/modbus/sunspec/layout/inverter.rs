//! Register layout of the simulated inverter: which points of models 103 (or
//! 113), 121 and 123 it implements, their scale factors and initial values.
//! No behaviour.

use sunspec::models::model103::Model103;
use sunspec::models::model113::Model113;
use sunspec::models::model121::Model121;
use sunspec::models::model123::Model123;

use super::common::{fit_sf, GRID_V, I16_LIMIT, U16_LIMIT};
use super::map::{Block, MapBuilder};
use crate::register::codec::ValueType::{F32, I16, U16, U32};

/// Model 103: three-phase measurements (integer + scale factor); `fine`
/// (noisy mode): every scale factor as fine as its range allows.
pub fn measurement(b: &mut MapBuilder, rated_w: f64, fine: bool) -> Block<Model103> {
    let m = b.model::<Model103>();
    let amps = rated_w / (3.0 * GRID_V);
    let (v_sf, w_sf, var_sf) = if fine { (-2, -2, -2) } else { (-1, -1, 0) };
    b.set(
        m,
        &Model103::A_SF,
        I16,
        f64::from(fit_sf(amps * 1.1, U16_LIMIT, -2)),
    );
    b.set(
        m,
        &Model103::V_SF,
        I16,
        f64::from(fit_sf(GRID_V * 1.1, U16_LIMIT, v_sf)),
    );
    b.set(
        m,
        &Model103::W_SF,
        I16,
        f64::from(fit_sf(rated_w * 1.1, I16_LIMIT, w_sf)),
    );
    b.set(m, &Model103::HZ_SF, I16, -2.0);
    b.set(
        m,
        &Model103::V_AR_SF,
        I16,
        f64::from(fit_sf(rated_w, I16_LIMIT, var_sf)),
    );
    b.set(m, &Model103::WH_SF, I16, 0.0);
    b.set(m, &Model103::TMP_SF, I16, -1.0);
    for p in [
        &Model103::PP_VPH_AB,
        &Model103::PP_VPH_BC,
        &Model103::PP_VPH_CA,
    ] {
        b.unimpl(m, p);
    }
    for p in [
        &Model103::VA,
        &Model103::VA_SF,
        &Model103::PF,
        &Model103::PF_SF,
    ] {
        b.unimpl(m, p);
    }
    for p in [&Model103::DCA, &Model103::DCV] {
        b.unimpl(m, p);
    }
    for p in [
        &Model103::DCA_SF,
        &Model103::DCV_SF,
        &Model103::DCW,
        &Model103::DCW_SF,
    ] {
        b.unimpl(m, p);
    }
    for p in [&Model103::TMP_SNK, &Model103::TMP_TRNS, &Model103::TMP_OT] {
        b.unimpl(m, p);
    }
    b.unimpl(m, &Model103::ST_VND);
    b.set(m, &Model103::EVT1, U32, 0.0);
    b.set(m, &Model103::EVT2, U32, 0.0);
    b.unimpl(m, &Model103::EVT_VND1);
    b.unimpl(m, &Model103::EVT_VND2);
    b.unimpl(m, &Model103::EVT_VND3);
    b.unimpl(m, &Model103::EVT_VND4);

    m
}

/// Model 113: three-phase measurements as floats; what the device does not
/// measure is NaN ("not implemented").
pub fn measurement_float(b: &mut MapBuilder) -> Block<Model113> {
    type M = Model113;
    let m = b.model::<M>();
    for p in [
        &M::A,
        &M::APH_A,
        &M::APH_B,
        &M::APH_C,
        &M::PH_VPH_A,
        &M::PH_VPH_B,
        &M::PH_VPH_C,
        &M::W,
        &M::HZ,
        &M::WH,
        &M::TMP_CAB,
    ] {
        b.set(m, p, F32, 0.0);
    }
    b.set(m, &M::V_AR, F32, 0.0);
    for p in [&M::PP_VPH_AB, &M::PP_VPH_BC, &M::PP_VPH_CA, &M::VA, &M::PF] {
        b.unimpl(m, p);
    }
    for p in [
        &M::DCA,
        &M::DCV,
        &M::DCW,
        &M::TMP_SNK,
        &M::TMP_TRNS,
        &M::TMP_OT,
    ] {
        b.unimpl(m, p);
    }
    b.set(m, &M::ST, U16, 2.0);
    b.unimpl(m, &M::ST_VND);
    b.set(m, &M::EVT1, U32, 0.0);
    b.set(m, &M::EVT2, U32, 0.0);
    b.unimpl(m, &M::EVT_VND1);
    b.unimpl(m, &M::EVT_VND2);
    b.unimpl(m, &M::EVT_VND3);
    b.unimpl(m, &M::EVT_VND4);
    m
}

/// Model 121: basic settings; `WMax` = rated power at the nameplate's scale.
pub fn settings(b: &mut MapBuilder, rated_w: f64, w_sf: f64) -> Block<Model121> {
    let s = b.model::<Model121>();
    b.set(s, &Model121::W_MAX_SF, I16, w_sf);
    b.set_scaled(s, &Model121::W_MAX, U16, rated_w, &Model121::W_MAX_SF);
    b.set(s, &Model121::V_REF_SF, I16, 0.0);
    b.set_scaled(s, &Model121::V_REF, U16, GRID_V, &Model121::V_REF_SF);
    b.set(s, &Model121::V_REF_OFS_SF, I16, 0.0);
    b.set(s, &Model121::V_REF_OFS, I16, 0.0);
    for p in [
        &Model121::V_MAX,
        &Model121::V_MIN,
        &Model121::VA_MAX,
        &Model121::W_GRA,
    ] {
        b.unimpl(s, p);
    }
    for p in [&Model121::MAX_RMP_RTE, &Model121::ECP_NOM_HZ] {
        b.unimpl(s, p);
    }
    for p in [
        &Model121::V_AR_MAX_Q1,
        &Model121::V_AR_MAX_Q2,
        &Model121::V_AR_MAX_Q3,
        &Model121::V_AR_MAX_Q4,
        &Model121::PF_MIN_Q1,
        &Model121::PF_MIN_Q2,
        &Model121::PF_MIN_Q3,
        &Model121::PF_MIN_Q4,
        &Model121::V_MIN_MAX_SF,
        &Model121::VA_MAX_SF,
        &Model121::V_AR_MAX_SF,
        &Model121::W_GRA_SF,
        &Model121::PF_MIN_SF,
        &Model121::MAX_RMP_RTE_SF,
        &Model121::ECP_NOM_HZ_SF,
    ] {
        b.unimpl(s, p);
    }
    b.unimpl(s, &Model121::V_AR_ACT);
    b.unimpl(s, &Model121::CLC_TOT_VA);
    b.unimpl(s, &Model121::CONN_PH);

    s
}

/// Model 123: immediate controls; connected, limit 100 % and disabled, no timers.
pub fn controls(b: &mut MapBuilder) -> Block<Model123> {
    let c = b.model::<Model123>();
    b.unimpl(c, &Model123::CONN_WIN_TMS);
    b.unimpl(c, &Model123::CONN_RVRT_TMS);
    b.set(c, &Model123::CONN, U16, 1.0);
    b.set(c, &Model123::W_MAX_LIM_PCT_SF, I16, -2.0);
    b.set_scaled(
        c,
        &Model123::W_MAX_LIM_PCT,
        U16,
        100.0,
        &Model123::W_MAX_LIM_PCT_SF,
    );
    for p in [
        &Model123::W_MAX_LIM_PCT_WIN_TMS,
        &Model123::W_MAX_LIM_PCT_RVRT_TMS,
        &Model123::W_MAX_LIM_PCT_RMP_TMS,
        &Model123::OUT_PF_SET_WIN_TMS,
        &Model123::OUT_PF_SET_RVRT_TMS,
        &Model123::OUT_PF_SET_RMP_TMS,
    ] {
        b.set(c, p, U16, 0.0);
    }
    b.set(c, &Model123::W_MAX_LIM_ENA, U16, 0.0);
    b.set(c, &Model123::OUT_PF_SET_SF, I16, -3.0);
    b.set_scaled(c, &Model123::OUT_PF_SET, I16, 1.0, &Model123::OUT_PF_SET_SF);
    b.set(c, &Model123::OUT_PF_SET_ENA, U16, 0.0);
    for p in [
        &Model123::V_AR_W_MAX_PCT,
        &Model123::V_AR_MAX_PCT,
        &Model123::V_AR_AVAL_PCT,
    ] {
        b.unimpl(c, p);
    }
    for p in [
        &Model123::V_AR_PCT_WIN_TMS,
        &Model123::V_AR_PCT_RVRT_TMS,
        &Model123::V_AR_PCT_RMP_TMS,
    ] {
        b.unimpl(c, p);
    }
    b.unimpl(c, &Model123::V_AR_PCT_MOD);
    b.set(c, &Model123::V_AR_PCT_ENA, U16, 0.0);
    b.unimpl(c, &Model123::V_AR_PCT_SF);

    c
}
