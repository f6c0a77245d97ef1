//! SunSpec families the physics does not drive: a float inverter (models 1,
//! 113, 120, 121, 123, a vendor model and a repeating-block model in between),
//! a float meter (1, 213) and a DER storage device (1, 701, 702, 704, 713).
//! Their values are fixed at build time ([`expected`] says which), so tests can
//! check every mapped point against known numbers. The DER storage device's
//! model-704 limit and power setpoint registers accept writes (and only hold them).
//!
//! Layout only: no behaviour, no clock, no I/O.

use sunspec::models::{
    model113::Model113 as InvF, model213::Model213 as MeterF, model701::Model701 as DerAc,
    model702::Model702 as DerCap, model704::Model704 as DerCtl, model713::Model713 as DerStor,
};

use super::common;
use super::inverter::layout;
use super::map::RegisterMap;
use crate::modbus::codec::ValueType::{F32, I16, I32, U16, U32, U64};
use crate::model::Property;

/// Which fixed device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    InverterFloat,
    MeterFloat,
    DerStorage,
}

/// Id and length of the vendor model placed inside the float inverter's chain.
pub const VENDOR_MODEL: (u16, u16) = (64_110, 12);
/// Model 160 (MPPT) with 3 repeating modules: 8 fixed + 3 × 20 registers.
pub const REPEATING_MODEL: (u16, u16) = (160, 8 + 3 * 20);

/// The values a fixed device shows, in the vocabulary's units and signs.
pub fn expected(v: Variant, rated_w: f64) -> Vec<(Property, f64)> {
    use Property as P;
    match v {
        Variant::InverterFloat => vec![
            (P::ActivePower, 0.42 * rated_w),
            (P::Frequency, 50.25),
            (P::VoltageL1, 230.5),
            (P::CurrentL1, 4.25),
            (P::TotalEnergyProduced, 12_345_678.0),
            (P::Temperature, 31.5),
            (P::OperatingState, 4.0),
            (P::ActivePowerLimit, 100.0),
        ],
        Variant::MeterFloat => vec![
            (P::ActivePower, -1234.5),
            (P::Frequency, 49.75),
            (P::VoltageL2, 231.25),
            (P::TotalEnergyProduced, 5_000_000.0),
            (P::TotalEnergyConsumed, 6_000_000.0),
        ],
        Variant::DerStorage => vec![
            (P::ActivePower, -2500.0),
            (P::TotalEnergyProduced, 3_000_000.0),
            (P::TotalEnergyConsumed, 3_200_000.0),
            (P::Frequency, 50.01),
            (P::Temperature, 28.5),
            (P::Soc, 66.6),
            (P::StateOfHealth, 97.0),
            (P::ActivePowerLimit, 80.0),
        ],
    }
}

pub fn build(v: Variant, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    match v {
        Variant::InverterFloat => inverter_float(unit_id, serial, rated_w),
        Variant::MeterFloat => meter_float(unit_id, serial),
        Variant::DerStorage => der_storage(unit_id, serial, rated_w),
    }
}

fn inverter_float(unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    let mut b = RegisterMap::sunspec(40000);
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
    let w_sf = b.get(n, &sunspec::models::model120::Model120::W_RTG_SF, I16);
    layout::settings(&mut b, rated_w, w_sf);
    b.raw_model(REPEATING_MODEL.0, REPEATING_MODEL.1);
    layout::controls(&mut b);
    b.finish()
}

fn meter_float(unit_id: u8, serial: &str) -> RegisterMap {
    let mut b = RegisterMap::sunspec(40000);
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

fn der_storage(unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    let mut b = RegisterMap::sunspec(40000);
    common::common(&mut b, "SIM-DER-STOR", serial, unit_id);
    let ac = b.model::<DerAc>();
    b.set(ac, &DerAc::AC_TYPE, U16, 2.0);
    b.set(ac, &DerAc::W_SF, I16, 0.0);
    b.set_scaled(ac, &DerAc::W, I16, -2500.0, &DerAc::W_SF);
    b.set(ac, &DerAc::TOT_WH_SF, I16, 0.0);
    b.set(ac, &DerAc::TOT_WH_INJ, U64, 3_000_000.0);
    b.set(ac, &DerAc::TOT_WH_ABS, U64, 3_200_000.0);
    b.set(ac, &DerAc::HZ_SF, I16, -2.0);
    b.set_scaled(ac, &DerAc::HZ, U32, 50.01, &DerAc::HZ_SF);
    b.set(ac, &DerAc::TMP_SF, I16, -1.0);
    b.set_scaled(ac, &DerAc::TMP_CAB, I16, 28.5, &DerAc::TMP_SF);
    for p in [&DerAc::VAR, &DerAc::AL1, &DerAc::AL2, &DerAc::AL3] {
        b.unimpl(ac, p);
    }
    for p in [&DerAc::VL1, &DerAc::VL2, &DerAc::VL3] {
        b.unimpl(ac, p);
    }
    b.unimpl(ac, &DerAc::INV_ST);
    let cap = b.model::<DerCap>();
    b.set(cap, &DerCap::W_SF, I16, 1.0);
    b.set_scaled(cap, &DerCap::W_MAX_RTG, U16, rated_w, &DerCap::W_SF);
    let ctl = b.model::<DerCtl>();
    b.set(ctl, &DerCtl::W_MAX_LIM_PCT_SF, I16, 0.0);
    b.set(ctl, &DerCtl::W_MAX_LIM_PCT, U16, 80.0);
    b.set(ctl, &DerCtl::W_MAX_LIM_PCT_ENA, U16, 1.0);
    // Writable controls, so that steering can write them (no behaviour).
    b.set(ctl, &DerCtl::W_MAX_LIM_PCT_RVRT_TMS, U32, 0.0);
    b.set(ctl, &DerCtl::W_SET_SF, I16, 0.0);
    b.set(ctl, &DerCtl::W_SET_ENA, U16, 0.0);
    b.set(ctl, &DerCtl::W_SET_MOD, U16, 0.0);
    b.set(ctl, &DerCtl::W_SET, I32, 0.0);
    b.set(ctl, &DerCtl::W_SET_RVRT_TMS, U32, 0.0);
    let st = b.model::<DerStor>();
    b.set(st, &DerStor::WH_SF, I16, 1.0);
    b.set_scaled(st, &DerStor::WH_RTG, U16, 10_000.0, &DerStor::WH_SF);
    b.set(st, &DerStor::PCT_SF, I16, -1.0);
    b.set_scaled(st, &DerStor::SOC, U16, 66.6, &DerStor::PCT_SF);
    b.set_scaled(st, &DerStor::SOH, U16, 97.0, &DerStor::PCT_SF);
    b.finish()
}
