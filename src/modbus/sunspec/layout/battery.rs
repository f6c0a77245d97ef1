//! Register layout of a battery inverter: which points of models 701, 124 and
//! 802 it implements, their scale factors and constant values, and the
//! checks of a write to model 802. The simulated battery writes its state
//! into them; the Modbus server's site device lays out its battery with
//! `battery_base`. No decisions about power here.

use sunspec::models::model124::Model124;
use sunspec::models::model701::Model701;
use sunspec::models::model802::Model802;
use tokio_modbus::ExceptionCode;

use super::common::{check_range, fit_sf, BATTERY_V, GRID_LL_V, GRID_V, I16_LIMIT, U16_LIMIT};
use super::map::{Block, MapBuilder, RegisterMap};
use crate::register::codec::ValueType::{I16, U16, U32};

/// What a battery is built from.
#[derive(Clone, Copy, Debug)]
pub struct BatteryRating {
    pub rated_w: f64,
    pub capacity_wh: f64,
    pub initial_soc: f64,
    pub soc_min: f64,
    pub soc_max: f64,
}

/// `SetOp` (model 802).
const SET_OP_CONNECT: f64 = 1.0;

pub struct Blocks {
    pub m701: Block<Model701>,
    pub m124: Block<Model124>,
    pub m802: Block<Model802>,
}

/// Model 701: DER AC measurement (W + discharging, as the model defines);
/// `fine` (noisy mode): power and voltage scale factors as fine as their
/// range allows.
pub fn ac_measurement(b: &mut MapBuilder, rated_w: f64, fine: bool) -> Block<Model701> {
    type M = Model701;
    let m = b.model::<M>();
    b.set(m, &M::AC_TYPE, U16, 2.0);
    b.set(m, &M::ST, U16, 1.0);
    b.set(m, &M::CONN_ST, U16, 1.0);
    b.set(m, &M::ALRM, U32, 0.0);
    b.set(m, &M::DER_MODE, U32, 1.0);
    let (w_sf, v_sf) = if fine { (-2, -2) } else { (0, -1) };
    b.set(
        m,
        &M::W_SF,
        I16,
        f64::from(fit_sf(rated_w * 1.1, I16_LIMIT, w_sf)),
    );
    b.set(
        m,
        &M::A_SF,
        I16,
        f64::from(fit_sf(rated_w / GRID_V, I16_LIMIT, -2)),
    );
    b.set(
        m,
        &M::V_SF,
        I16,
        f64::from(fit_sf(GRID_LL_V * 1.1, U16_LIMIT, v_sf)),
    );
    b.set(m, &M::HZ_SF, I16, -2.0);
    b.set(m, &M::TOT_WH_SF, I16, 0.0);
    b.set(m, &M::TMP_SF, I16, -1.0);
    for p in [
        &M::VA,
        &M::VAR,
        &M::PF,
        &M::TMP_AMB,
        &M::TMP_SNK,
        &M::TMP_TRNS,
        &M::TMP_SW,
        &M::TMP_OT,
    ] {
        b.unimpl(m, p);
    }
    for p in [
        &M::VAL1,
        &M::VAR_L1,
        &M::PFL1,
        &M::VAL2,
        &M::VAR_L2,
        &M::PFL2,
        &M::VAL3,
        &M::VAR_L3,
        &M::PFL3,
    ] {
        b.unimpl(m, p);
    }
    for p in [&M::PF_SF, &M::VA_SF, &M::VAR_SF, &M::TOT_VARH_SF] {
        b.unimpl(m, p);
    }
    for p in [
        &M::TOT_VARH_INJ,
        &M::TOT_VARH_ABS,
        &M::TOT_WH_INJ_L1,
        &M::TOT_WH_ABS_L1,
        &M::TOT_VARH_INJ_L1,
        &M::TOT_VARH_ABS_L1,
        &M::TOT_WH_INJ_L2,
        &M::TOT_WH_ABS_L2,
        &M::TOT_VARH_INJ_L2,
        &M::TOT_VARH_ABS_L2,
        &M::TOT_WH_INJ_L3,
        &M::TOT_WH_ABS_L3,
        &M::TOT_VARH_INJ_L3,
        &M::TOT_VARH_ABS_L3,
    ] {
        b.unimpl(m, p);
    }
    b.set(m, &M::LLV, U16, 0.0);
    b.set(m, &M::VL1L2, U16, 0.0);
    b.set(m, &M::VL2L3, U16, 0.0);
    b.set(m, &M::VL3L1, U16, 0.0);
    b.unimpl(m, &M::THROT_PCT);
    b.unimpl(m, &M::THROT_SRC);
    b.set_str(m, &M::MN_ALRM_INFO, "");
    m
}

/// Model 124: basic storage controls. `WChaMax` = rated power; rates 100 %;
/// `ChaGriSet` = GRID so forced charging works.
pub fn storage_controls(b: &mut MapBuilder, r: &BatteryRating) -> Block<Model124> {
    type M = Model124;
    let c = b.model::<M>();
    b.set(
        c,
        &M::W_CHA_MAX_SF,
        I16,
        f64::from(fit_sf(r.rated_w, U16_LIMIT, 0)),
    );
    b.set_scaled(c, &M::W_CHA_MAX, U16, r.rated_w, &M::W_CHA_MAX_SF);
    b.set(c, &M::W_CHA_DIS_CHA_GRA_SF, I16, 0.0);
    b.set(c, &M::W_CHA_GRA, U16, 100.0);
    b.set(c, &M::W_DIS_CHA_GRA, U16, 100.0);
    b.set(c, &M::STOR_CTL_MOD, U16, 0.0);
    b.unimpl(c, &M::VA_CHA_MAX);
    b.unimpl(c, &M::VA_CHA_MAX_SF);
    b.set(c, &M::MIN_RSV_PCT_SF, I16, -2.0);
    b.set_scaled(c, &M::MIN_RSV_PCT, U16, r.soc_min, &M::MIN_RSV_PCT_SF);
    b.set(c, &M::CHA_STATE_SF, I16, -2.0);
    let ah = r.capacity_wh / BATTERY_V;
    b.set(
        c,
        &M::STOR_AVAL_SF,
        I16,
        f64::from(fit_sf(ah, U16_LIMIT, -2)),
    );
    b.set(c, &M::IN_BAT_V_SF, I16, -1.0);
    b.set(c, &M::IN_OUT_W_RTE_SF, I16, -2.0);
    b.set_scaled(c, &M::OUT_W_RTE, I16, 100.0, &M::IN_OUT_W_RTE_SF);
    b.set_scaled(c, &M::IN_W_RTE, I16, 100.0, &M::IN_OUT_W_RTE_SF);
    for p in [
        &M::IN_OUT_W_RTE_WIN_TMS,
        &M::IN_OUT_W_RTE_RVRT_TMS,
        &M::IN_OUT_W_RTE_RMP_TMS,
    ] {
        b.set(c, p, U16, 0.0);
    }
    b.set(c, &M::CHA_GRI_SET, U16, 1.0);
    c
}

/// Model 802: battery base model; `fine` as for model 701.
pub fn battery_base(b: &mut MapBuilder, r: &BatteryRating, fine: bool) -> Block<Model802> {
    type M = Model802;
    let m = b.model::<M>();
    let ah = r.capacity_wh / BATTERY_V;
    b.set(m, &M::AH_RTG_SF, I16, f64::from(fit_sf(ah, U16_LIMIT, -1)));
    b.set_scaled(m, &M::AH_RTG, U16, ah, &M::AH_RTG_SF);
    b.set(
        m,
        &M::WH_RTG_SF,
        I16,
        f64::from(fit_sf(r.capacity_wh, U16_LIMIT, 0)),
    );
    b.set_scaled(m, &M::WH_RTG, U16, r.capacity_wh, &M::WH_RTG_SF);
    b.set(
        m,
        &M::W_CHA_DIS_CHA_MAX_SF,
        I16,
        f64::from(fit_sf(r.rated_w, U16_LIMIT, 0)),
    );
    b.set_scaled(
        m,
        &M::W_CHA_RTE_MAX,
        U16,
        r.rated_w,
        &M::W_CHA_DIS_CHA_MAX_SF,
    );
    b.set_scaled(
        m,
        &M::W_DIS_CHA_RTE_MAX,
        U16,
        r.rated_w,
        &M::W_CHA_DIS_CHA_MAX_SF,
    );
    b.set(m, &M::SOC_SF, I16, -1.0);
    b.set_scaled(m, &M::SOC_MAX, U16, r.soc_max, &M::SOC_SF);
    b.set_scaled(m, &M::SOC_MIN, U16, r.soc_min, &M::SOC_SF);
    b.set(m, &M::SOH_SF, I16, -1.0);
    b.set_scaled(m, &M::SOH, U16, 98.5, &M::SOH_SF);
    leave_unimplemented(b, m);
    set_constants(b, m);
    set_current_and_power(b, m, r, fine);
    m
}

/// The points of model 802 the battery does not implement.
fn leave_unimplemented(b: &mut MapBuilder, m: Block<Model802>) {
    type M = Model802;
    for p in [
        &M::DIS_CHA_RTE,
        &M::SOC_RSV_MAX,
        &M::SOC_RSV_MIN,
        &M::DO_D,
        &M::CTRL_HB,
        &M::STATE_VND,
    ] {
        b.unimpl(m, p);
    }
    for p in [
        &M::V_MAX,
        &M::V_MIN,
        &M::CELL_V_MAX,
        &M::CELL_V_MIN,
        &M::CELL_V_AVG,
    ] {
        b.unimpl(m, p);
    }
    for p in [
        &M::CELL_V_MAX_STR,
        &M::CELL_V_MAX_MOD,
        &M::CELL_V_MIN_STR,
        &M::CELL_V_MIN_MOD,
    ] {
        b.unimpl(m, p);
    }
    b.unimpl(m, &M::WARR_DT);
    b.unimpl(m, &M::REQ_INV_STATE);
    b.unimpl(m, &M::REQ_W);
    b.unimpl(m, &M::DIS_CHA_RTE_SF);
    b.unimpl(m, &M::DO_D_SF);
}

/// The points of model 802 that never change: control mode, alarm reset,
/// type, events, the operation and state asked for, the voltage scale
/// factors.
fn set_constants(b: &mut MapBuilder, m: Block<Model802>) {
    type M = Model802;
    b.set(m, &M::LOC_REM_CTL, U16, 0.0);
    b.set(m, &M::ALM_RST, U16, 0.0);
    b.set(m, &M::TYP, U16, 4.0);
    b.set(m, &M::EVT1, U32, 0.0);
    b.set(m, &M::EVT2, U32, 0.0);
    b.set(m, &M::EVT_VND1, U32, 0.0);
    b.set(m, &M::EVT_VND2, U32, 0.0);
    b.set(m, &M::SET_OP, U16, SET_OP_CONNECT);
    b.set(m, &M::SET_INV_STATE, U16, 3.0);
    b.set(m, &M::V_SF, I16, -1.0);
    b.set(m, &M::CELL_V_SF, I16, -3.0);
}

/// The current ratings and the current and power scale factors of model
/// 802, from the rated power; `fine` as for model 701.
fn set_current_and_power(b: &mut MapBuilder, m: Block<Model802>, r: &BatteryRating, fine: bool) {
    type M = Model802;
    let amps = r.rated_w / BATTERY_V;
    b.set(
        m,
        &M::A_SF,
        I16,
        f64::from(fit_sf(amps * 1.3, I16_LIMIT, -2)),
    );
    b.set(
        m,
        &M::A_MAX_SF,
        I16,
        f64::from(fit_sf(amps * 1.3, U16_LIMIT, -1)),
    );
    b.set_scaled(m, &M::A_CHA_MAX, U16, amps, &M::A_MAX_SF);
    b.set_scaled(m, &M::A_DIS_CHA_MAX, U16, amps, &M::A_MAX_SF);
    b.set(
        m,
        &M::W_SF,
        I16,
        f64::from(fit_sf(
            r.rated_w * 1.1,
            I16_LIMIT,
            if fine { -2 } else { 0 },
        )),
    );
}

/// Range checks on the writable points of model 802.
pub fn validate_802(m: Block<Model802>, addr: u16, values: &[u16]) -> Result<(), ExceptionCode> {
    check_range(m.addr(&Model802::SET_OP), addr, values, U16, 1.0, 2.0)?;
    check_range(
        m.addr(&Model802::SET_INV_STATE),
        addr,
        values,
        U16,
        1.0,
        3.0,
    )
}

/// Whether `SetOp` asks the bank to be connected.
pub fn connected(m: Block<Model802>, map: &RegisterMap) -> bool {
    map.get(m, &Model802::SET_OP, U16) == SET_OP_CONNECT
}
