//! The fixed DER storage device: models 1, 701, 702, 704, 713. Its model-704
//! limit and power setpoint registers accept writes (and only hold them).

use sunspec::models::{
    model701::Model701 as DerAc, model702::Model702 as DerCap, model704::Model704 as DerCtl,
    model713::Model713 as DerStor,
};

use super::super::common;
use crate::modbus::sunspec::layout::map::{MapBuilder, RegisterMap};
use crate::model::Property;
use crate::register::codec::ValueType::{I16, I32, U16, U32, U64};

pub fn expected() -> Vec<(Property, f64)> {
    use Property as P;
    vec![
        (P::ActivePower, -2500.0),
        (P::TotalEnergyProduced, 3_000_000.0),
        (P::TotalEnergyConsumed, 3_200_000.0),
        (P::Frequency, 50.01),
        (P::Temperature, 28.5),
        (P::Soc, 66.6),
        (P::StateOfHealth, 97.0),
        (P::ActivePowerLimit, 80.0),
    ]
}

pub fn build(mut b: MapBuilder, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
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
