//! From a discovered model chain to point specifications in the vocabulary.
//!
//! Offsets come from the `sunspec` crate (generated from the official model
//! definitions). The type and "not implemented" rule of each point come from the
//! model definitions too (acc32/acc64 accumulators: 0; others: the type's
//! sentinel; floats: NaN). Pure: no I/O.

use sunspec::models::{
    model103::Model103 as Inv, model113::Model113 as InvF, model120::Model120 as Nameplate,
    model123::Model123 as Controls, model124::Model124 as Storage, model203::Model203 as Meter,
    model213::Model213 as MeterF, model701::Model701 as DerAc, model704::Model704 as DerCtl,
    model713::Model713 as DerStor, model802::Model802 as Battery,
};
use sunspec::{Group, Point, Value};

use super::ModelBlock;
use crate::model::{DeviceType, Property};
use crate::register::codec::{Absent, ValueType};
use crate::register::plan::Table;
use crate::register::point::{Gate, PointSpec, Scale};

use Absent::{SunspecAccumulator as Acc, SunspecNumber as Num};
use Property as P;
use ValueType::{F32, I16, U16, U32, U64};

/// Preference when several models give the same property (lower wins).
const RANK_AC: u8 = 0;
const RANK_DER: u8 = 1;
const RANK_BATTERY: u8 = 2;
const RANK_DER_STORAGE: u8 = 3;
const RANK_STORAGE: u8 = 4;
const RANK_NAMEPLATE: u8 = 5;

/// Collects points of one block, skipping points the block's `L` does not hold.
struct Builder<'a> {
    block: &'a ModelBlock,
    rank: u8,
    out: &'a mut Vec<(u8, PointSpec)>,
}

impl Builder<'_> {
    fn addr<G: Group, T: Value>(&self, p: &Point<G, T>) -> Option<u16> {
        self.block
            .holds(p.offset, p.length)
            .then(|| self.block.point(p.offset))
    }

    /// An integer point scaled by a SunSpec scale factor point.
    fn sf<G: Group, T: Value, S: Value>(
        &mut self,
        property: Property,
        p: &Point<G, T>,
        ty: ValueType,
        absent: Absent,
        sf: &Point<G, S>,
    ) -> Option<&mut PointSpec> {
        let (addr, sf_addr) = (self.addr(p)?, self.addr(sf)?);
        self.push(PointSpec::sunspec(
            property,
            addr,
            ty,
            absent,
            Scale::SunspecSf(sf_addr),
        ))
    }

    /// A point used as read (floats, enums).
    fn plain<G: Group, T: Value>(
        &mut self,
        property: Property,
        p: &Point<G, T>,
        ty: ValueType,
    ) -> Option<&mut PointSpec> {
        let addr = self.addr(p)?;
        self.push(PointSpec::sunspec(property, addr, ty, Num, Scale::One))
    }

    fn push(&mut self, spec: PointSpec) -> Option<&mut PointSpec> {
        self.out.push((self.rank, spec));
        self.out.last_mut().map(|(_, s)| s)
    }
}

/// The points to poll for a device with this chain. Signed power properties are
/// negated when `invert_power` is set.
pub fn points_for(
    chain: &[ModelBlock],
    device_type: DeviceType,
    invert_power: bool,
) -> Vec<PointSpec> {
    let mut ranked = Vec::new();
    for block in chain {
        let rank = match block.id {
            101..=103 | 111..=113 | 201..=204 | 211..=214 => RANK_AC,
            // 123 is the limit the agent writes, so its reading wins over 704's.
            123 => RANK_AC,
            701 | 704 => RANK_DER,
            802 => RANK_BATTERY,
            713 => RANK_DER_STORAGE,
            124 => RANK_STORAGE,
            _ => RANK_NAMEPLATE,
        };
        let mut b = Builder {
            block,
            rank,
            out: &mut ranked,
        };
        match block.id {
            101..=103 => inverter_int(&mut b),
            111..=113 => inverter_float(&mut b),
            201..=204 => meter_int(&mut b),
            211..=214 => meter_float(&mut b),
            120 if device_type == DeviceType::Battery => nameplate(&mut b),
            123 => controls_123(&mut b),
            124 => storage_124(&mut b),
            701 => der_ac(&mut b),
            704 => der_controls(&mut b),
            713 => der_storage(&mut b),
            802 => battery(&mut b),
            // Other models (1, 120 on non-batteries, 121, 122, 160, vendor
            // models ...) carry no live property; unknown ones are skipped.
            _ => {}
        }
    }
    ranked.sort_by_key(|(rank, _)| *rank);
    ranked
        .into_iter()
        .map(|(_, p)| p.negated(invert_power && p.property.is_signed_power()))
        .collect()
}

fn inverter_int(b: &mut Builder) {
    b.sf(P::ActivePower, &Inv::W, I16, Num, &Inv::W_SF);
    b.sf(P::ReactivePower, &Inv::V_AR, I16, Num, &Inv::V_AR_SF);
    b.sf(P::TotalEnergyProduced, &Inv::WH, U32, Acc, &Inv::WH_SF);
    b.sf(P::Frequency, &Inv::HZ, U16, Num, &Inv::HZ_SF);
    b.sf(P::VoltageL1, &Inv::PH_VPH_A, U16, Num, &Inv::V_SF);
    b.sf(P::VoltageL2, &Inv::PH_VPH_B, U16, Num, &Inv::V_SF);
    b.sf(P::VoltageL3, &Inv::PH_VPH_C, U16, Num, &Inv::V_SF);
    b.sf(P::CurrentL1, &Inv::APH_A, U16, Num, &Inv::A_SF);
    b.sf(P::CurrentL2, &Inv::APH_B, U16, Num, &Inv::A_SF);
    b.sf(P::CurrentL3, &Inv::APH_C, U16, Num, &Inv::A_SF);
    b.sf(P::Temperature, &Inv::TMP_CAB, I16, Num, &Inv::TMP_SF);
    b.plain(P::OperatingState, &Inv::ST, U16);
}

fn inverter_float(b: &mut Builder) {
    b.plain(P::ActivePower, &InvF::W, F32);
    b.plain(P::ReactivePower, &InvF::V_AR, F32);
    b.plain(P::TotalEnergyProduced, &InvF::WH, F32);
    b.plain(P::Frequency, &InvF::HZ, F32);
    b.plain(P::VoltageL1, &InvF::PH_VPH_A, F32);
    b.plain(P::VoltageL2, &InvF::PH_VPH_B, F32);
    b.plain(P::VoltageL3, &InvF::PH_VPH_C, F32);
    b.plain(P::CurrentL1, &InvF::APH_A, F32);
    b.plain(P::CurrentL2, &InvF::APH_B, F32);
    b.plain(P::CurrentL3, &InvF::APH_C, F32);
    b.plain(P::Temperature, &InvF::TMP_CAB, F32);
    b.plain(P::OperatingState, &InvF::ST, U16);
}

fn meter_int(b: &mut Builder) {
    b.sf(P::ActivePower, &Meter::W, I16, Num, &Meter::W_SF);
    b.sf(P::ReactivePower, &Meter::VAR, I16, Num, &Meter::VAR_SF);
    b.sf(
        P::TotalEnergyProduced,
        &Meter::TOT_WH_EXP,
        U32,
        Acc,
        &Meter::TOT_WH_SF,
    );
    b.sf(
        P::TotalEnergyConsumed,
        &Meter::TOT_WH_IMP,
        U32,
        Acc,
        &Meter::TOT_WH_SF,
    );
    b.sf(P::Frequency, &Meter::HZ, I16, Num, &Meter::HZ_SF);
    b.sf(P::VoltageL1, &Meter::PH_VPH_A, I16, Num, &Meter::V_SF);
    b.sf(P::VoltageL2, &Meter::PH_VPH_B, I16, Num, &Meter::V_SF);
    b.sf(P::VoltageL3, &Meter::PH_VPH_C, I16, Num, &Meter::V_SF);
    b.sf(P::CurrentL1, &Meter::APH_A, I16, Num, &Meter::A_SF);
    b.sf(P::CurrentL2, &Meter::APH_B, I16, Num, &Meter::A_SF);
    b.sf(P::CurrentL3, &Meter::APH_C, I16, Num, &Meter::A_SF);
}

fn meter_float(b: &mut Builder) {
    b.plain(P::ActivePower, &MeterF::W, F32);
    b.plain(P::ReactivePower, &MeterF::VAR, F32);
    b.plain(P::TotalEnergyProduced, &MeterF::TOT_WH_EXP, F32);
    b.plain(P::TotalEnergyConsumed, &MeterF::TOT_WH_IMP, F32);
    b.plain(P::Frequency, &MeterF::HZ, F32);
    b.plain(P::VoltageL1, &MeterF::PH_VPH_A, F32);
    b.plain(P::VoltageL2, &MeterF::PH_VPH_B, F32);
    b.plain(P::VoltageL3, &MeterF::PH_VPH_C, F32);
    b.plain(P::CurrentL1, &MeterF::APH_A, F32);
    b.plain(P::CurrentL2, &MeterF::APH_B, F32);
    b.plain(P::CurrentL3, &MeterF::APH_C, F32);
}

fn nameplate(b: &mut Builder) {
    b.sf(
        P::MaxChargePower,
        &Nameplate::MAX_CHA_RTE,
        U16,
        Num,
        &Nameplate::MAX_CHA_RTE_SF,
    );
    b.sf(
        P::MaxDischargePower,
        &Nameplate::MAX_DIS_CHA_RTE,
        U16,
        Num,
        &Nameplate::MAX_DIS_CHA_RTE_SF,
    );
}

/// `activePowerLimit`: `WMaxLimPct` while `WMaxLim_Ena` is 1, else 100 %.
fn controls_123(b: &mut Builder) {
    let Some(ena) = b.addr(&Controls::W_MAX_LIM_ENA) else {
        return;
    };
    let gate = Gate {
        table: Table::Holding,
        addr: ena,
        enabled_when: 1,
        otherwise: 100.0,
    };
    if let Some(p) = b.sf(
        P::ActivePowerLimit,
        &Controls::W_MAX_LIM_PCT,
        U16,
        Num,
        &Controls::W_MAX_LIM_PCT_SF,
    ) {
        p.gate = Some(gate);
    }
}

fn der_controls(b: &mut Builder) {
    let Some(ena) = b.addr(&DerCtl::W_MAX_LIM_PCT_ENA) else {
        return;
    };
    let gate = Gate {
        table: Table::Holding,
        addr: ena,
        enabled_when: 1,
        otherwise: 100.0,
    };
    if let Some(p) = b.sf(
        P::ActivePowerLimit,
        &DerCtl::W_MAX_LIM_PCT,
        U16,
        Num,
        &DerCtl::W_MAX_LIM_PCT_SF,
    ) {
        p.gate = Some(gate);
    }
}

fn storage_124(b: &mut Builder) {
    b.sf(
        P::Soc,
        &Storage::CHA_STATE,
        U16,
        Num,
        &Storage::CHA_STATE_SF,
    );
    b.sf(
        P::MaxChargePower,
        &Storage::W_CHA_MAX,
        U16,
        Num,
        &Storage::W_CHA_MAX_SF,
    );
    b.plain(P::OperatingState, &Storage::CHA_ST, U16);
}

fn der_ac(b: &mut Builder) {
    b.sf(P::ActivePower, &DerAc::W, I16, Num, &DerAc::W_SF);
    b.sf(P::ReactivePower, &DerAc::VAR, I16, Num, &DerAc::VAR_SF);
    b.sf(
        P::TotalEnergyProduced,
        &DerAc::TOT_WH_INJ,
        U64,
        Num,
        &DerAc::TOT_WH_SF,
    );
    b.sf(
        P::TotalEnergyConsumed,
        &DerAc::TOT_WH_ABS,
        U64,
        Num,
        &DerAc::TOT_WH_SF,
    );
    b.sf(P::Frequency, &DerAc::HZ, U32, Num, &DerAc::HZ_SF);
    b.sf(P::VoltageL1, &DerAc::VL1, U16, Num, &DerAc::V_SF);
    b.sf(P::VoltageL2, &DerAc::VL2, U16, Num, &DerAc::V_SF);
    b.sf(P::VoltageL3, &DerAc::VL3, U16, Num, &DerAc::V_SF);
    b.sf(P::CurrentL1, &DerAc::AL1, I16, Num, &DerAc::A_SF);
    b.sf(P::CurrentL2, &DerAc::AL2, I16, Num, &DerAc::A_SF);
    b.sf(P::CurrentL3, &DerAc::AL3, I16, Num, &DerAc::A_SF);
    b.sf(P::Temperature, &DerAc::TMP_CAB, I16, Num, &DerAc::TMP_SF);
    b.plain(P::OperatingState, &DerAc::INV_ST, U16);
}

fn der_storage(b: &mut Builder) {
    b.sf(P::Soc, &DerStor::SOC, U16, Num, &DerStor::PCT_SF);
    b.sf(P::StateOfHealth, &DerStor::SOH, U16, Num, &DerStor::PCT_SF);
}

/// Model 802's `W` is DC and its sign is not defined by the model: it is the last
/// resort for `activePower` (discharge taken as positive; `invert_power` flips).
fn battery(b: &mut Builder) {
    b.sf(P::Soc, &Battery::SOC, U16, Num, &Battery::SOC_SF);
    b.sf(P::StateOfHealth, &Battery::SOH, U16, Num, &Battery::SOH_SF);
    b.plain(P::OperatingState, &Battery::CHA_ST, U16);
    b.sf(
        P::MaxChargePower,
        &Battery::W_CHA_RTE_MAX,
        U16,
        Num,
        &Battery::W_CHA_DIS_CHA_MAX_SF,
    );
    b.sf(
        P::MaxDischargePower,
        &Battery::W_DIS_CHA_RTE_MAX,
        U16,
        Num,
        &Battery::W_CHA_DIS_CHA_MAX_SF,
    );
    b.sf(P::ActivePower, &Battery::W, I16, Num, &Battery::W_SF);
}

#[cfg(test)]
mod tests;
