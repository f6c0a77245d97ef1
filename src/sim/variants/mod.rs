//! SunSpec families the physics does not drive, with values fixed at build
//! time ([`expected`] says which, [`absent`] which properties they must not
//! offer), so tests can check every mapped point against known numbers:
//! inverters single-, split- and three-phase, integer + scale factor (101, 102)
//! and float (111, 112, 113); meters single-phase, split-phase and delta,
//! integer + scale factor (201, 202, 204) and float (211, 212, 213, 214); a DER
//! storage device (701, 702, 704, 713). The DER storage device's model-704
//! limit and power setpoint registers accept writes (and only hold them).
//!
//! Layout only: no behaviour, no clock, no I/O.

mod der;
mod float_meters;
mod inverters;
mod meters;

use sunspec::{Group, Point, Value};

use crate::modbus::sunspec::layout::map::{Block, MapBuilder, RegisterMap};
use crate::model::Property;
use crate::register::codec::ValueType;

/// Which fixed device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Three-phase float inverter: models 1, 113, a vendor model, 120, 121,
    /// 160 with repeating modules, 123.
    InverterFloat,
    /// Three-phase float meter: 1, 213.
    MeterFloat,
    /// DER storage: 1, 701, 702, 704, 713.
    DerStorage,
    /// Single-phase inverter, integer + SF: 1, 101, 120, 121, with the `WMax`
    /// setting (121) at 90 % of the `WRtg` rating (120).
    Inverter101,
    /// Split-phase inverter, integer + SF: 1, 102, 120.
    Inverter102,
    /// Single-phase float inverter: 1, 111, 120.
    Inverter111,
    /// Split-phase float inverter: 1, 112.
    Inverter112,
    /// Single-phase meter, integer + SF: 1, 201.
    Meter201,
    /// Split-phase meter, integer + SF: 1, 202.
    Meter202,
    /// Three-phase delta meter (no neutral), integer + SF: 1, 204.
    Meter204,
    /// Single-phase float meter: 1, 211.
    Meter211,
    /// Split-phase float meter: 1, 212.
    Meter212,
    /// Three-phase delta float meter: 1, 214.
    Meter214,
}

/// Id and length of the vendor model placed inside the float inverter's chain.
pub const VENDOR_MODEL: (u16, u16) = (64_110, 12);
/// Model 160 (MPPT) with 3 repeating modules: 8 fixed + 3 × 20 registers.
pub const REPEATING_MODEL: (u16, u16) = (160, 8 + 3 * 20);

/// What a fixed AC device shows, in the vocabulary's units and signs; `None`
/// is laid out as "not implemented".
#[derive(Clone, Copy, Debug)]
struct Ac {
    /// Inverter: + produced; meter: + import.
    w: f64,
    var: Option<f64>,
    hz: f64,
    /// Line-to-neutral voltage, phases A, B, C.
    v: [Option<f64>; 3],
    /// Line-to-line voltage, AB, BC, CA.
    v_ll: [Option<f64>; 3],
    /// Current, phases A, B, C.
    a: [Option<f64>; 3],
    /// Inverter: lifetime yield; meter: exported.
    produced_wh: f64,
    /// Meter: imported (inverters have no such point).
    consumed_wh: Option<f64>,
    tmp: Option<f64>,
    st: Option<f64>,
}

impl Ac {
    fn total_a(&self) -> f64 {
        self.a.iter().flatten().sum()
    }

    /// Mean of the voltages that exist, if any.
    fn mean(v: &[Option<f64>; 3]) -> Option<f64> {
        let n = v.iter().flatten().count();
        (n > 0).then(|| v.iter().flatten().sum::<f64>() / n as f64)
    }

    fn expected(&self) -> Vec<(Property, f64)> {
        use Property as P;
        let mut out = vec![
            (P::ActivePower, self.w),
            (P::Frequency, self.hz),
            (P::TotalEnergyProduced, self.produced_wh),
        ];
        let optional = [
            (P::ReactivePower, self.var),
            (P::TotalEnergyConsumed, self.consumed_wh),
            (P::VoltageL1, self.v[0]),
            (P::VoltageL2, self.v[1]),
            (P::VoltageL3, self.v[2]),
            (P::CurrentL1, self.a[0]),
            (P::CurrentL2, self.a[1]),
            (P::CurrentL3, self.a[2]),
            (P::Temperature, self.tmp),
            (P::OperatingState, self.st),
        ];
        out.extend(optional.into_iter().filter_map(|(p, v)| Some((p, v?))));
        out
    }

    fn absent(&self) -> Vec<Property> {
        use Property as P;
        [
            (P::ReactivePower, self.var),
            (P::VoltageL1, self.v[0]),
            (P::VoltageL2, self.v[1]),
            (P::VoltageL3, self.v[2]),
            (P::CurrentL1, self.a[0]),
            (P::CurrentL2, self.a[1]),
            (P::CurrentL3, self.a[2]),
        ]
        .into_iter()
        .filter_map(|(p, v)| v.is_none().then_some(p))
        .collect()
    }
}

/// Scale factors of an integer + SF model (10^n).
#[derive(Clone, Copy, Debug)]
struct IntSf {
    a: f64,
    v: f64,
    w: f64,
    hz: f64,
    var: f64,
    wh: f64,
    tmp: f64,
}

/// The values of a variant described by [`Ac`].
fn ac(v: Variant, rated_w: f64) -> Option<Ac> {
    match v {
        Variant::InverterFloat | Variant::MeterFloat | Variant::DerStorage => None,
        Variant::Inverter101 => Some(inverters::ac_101(rated_w)),
        Variant::Inverter102 => Some(inverters::ac_102(rated_w)),
        Variant::Inverter111 => Some(inverters::ac_111(rated_w)),
        Variant::Inverter112 => Some(inverters::ac_112(rated_w)),
        Variant::Meter201 => Some(meters::AC_201),
        Variant::Meter202 => Some(meters::AC_202),
        Variant::Meter204 => Some(meters::AC_204),
        Variant::Meter211 => Some(float_meters::AC_211),
        Variant::Meter212 => Some(float_meters::AC_212),
        Variant::Meter214 => Some(float_meters::AC_214),
    }
}

/// The values a fixed device shows, in the vocabulary's units and signs.
pub fn expected(v: Variant, rated_w: f64) -> Vec<(Property, f64)> {
    match v {
        Variant::InverterFloat => inverters::float_113_expected(rated_w),
        Variant::MeterFloat => float_meters::float_213_expected(),
        Variant::DerStorage => der::expected(),
        _ => ac(v, rated_w).map(|a| a.expected()).unwrap_or_default(),
    }
}

/// Properties a fixed device must not offer: its points for them are "not
/// implemented" (phases it does not have, reactive power it does not measure).
pub fn absent(v: Variant) -> Vec<Property> {
    use Property as P;
    match v {
        Variant::InverterFloat | Variant::MeterFloat => vec![P::ReactivePower],
        Variant::DerStorage => vec![
            P::ReactivePower,
            P::VoltageL1,
            P::VoltageL2,
            P::VoltageL3,
            P::CurrentL1,
            P::CurrentL2,
            P::CurrentL3,
            P::OperatingState,
        ],
        // Which points are implemented does not depend on the rating.
        _ => ac(v, 1000.0).map(|a| a.absent()).unwrap_or_default(),
    }
}

/// Lays out a variant with the "SunS" marker at `base`.
pub fn build(v: Variant, base: u16, unit_id: u8, serial: &str, rated_w: f64) -> RegisterMap {
    let b = RegisterMap::sunspec(base);
    match v {
        Variant::InverterFloat => inverters::float_113(b, unit_id, serial, rated_w),
        Variant::MeterFloat => float_meters::float_213(b, unit_id, serial),
        Variant::DerStorage => der::build(b, unit_id, serial, rated_w),
        Variant::Inverter101 => inverters::int_101(b, unit_id, serial, rated_w),
        Variant::Inverter102 => inverters::int_102(b, unit_id, serial, rated_w),
        Variant::Inverter111 => inverters::float_111(b, unit_id, serial, rated_w),
        Variant::Inverter112 => inverters::float_112(b, unit_id, serial, rated_w),
        Variant::Meter201 => meters::int_201(b, unit_id, serial),
        Variant::Meter202 => meters::int_202(b, unit_id, serial),
        Variant::Meter204 => meters::int_204(b, unit_id, serial),
        Variant::Meter211 => float_meters::float_211(b, unit_id, serial),
        Variant::Meter212 => float_meters::float_212(b, unit_id, serial),
        Variant::Meter214 => float_meters::float_214(b, unit_id, serial),
    }
}

/// The "not implemented" words of `ty`: int MIN, uint MAX, float NaN.
fn unimplemented(ty: ValueType) -> Vec<u16> {
    match ty {
        ValueType::U16 => vec![0xFFFF],
        ValueType::I16 => vec![0x8000],
        ValueType::U32 => vec![0xFFFF; 2],
        ValueType::I32 => vec![0x8000, 0],
        ValueType::U64 => vec![0xFFFF; 4],
        ValueType::I64 => vec![0x8000, 0, 0, 0],
        ValueType::F32 => vec![0x7FC0, 0],
    }
}

/// Stores `value` scaled by the register of `sf`, or "not implemented" for
/// `None` (whether the model makes the point optional or not).
fn scaled<M: Group, T: Value, S: Value>(
    b: &mut MapBuilder,
    m: Block<M>,
    p: &Point<M, T>,
    ty: ValueType,
    value: Option<f64>,
    sf: &Point<M, S>,
) {
    match value {
        Some(v) => b.set_scaled(m, p, ty, v, sf),
        None => b.set_words(m, p, &unimplemented(ty)),
    }
}

/// Stores `value` as it is, or "not implemented" for `None`.
fn plain<M: Group, T: Value>(
    b: &mut MapBuilder,
    m: Block<M>,
    p: &Point<M, T>,
    ty: ValueType,
    value: Option<f64>,
) {
    match value {
        Some(v) => b.set(m, p, ty, v),
        None => b.set_words(m, p, &unimplemented(ty)),
    }
}

#[cfg(test)]
mod tests;
