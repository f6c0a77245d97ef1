//! The TOML shapes of a profile file, as written. Strict: unknown keys are
//! errors. Meaning and cross-checks live in `build`.

use serde::Deserialize;

use crate::model::DeviceType;
use crate::register::codec::{ValueType, WordOrder};
use crate::register::plan::Table;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    pub manufacturer: Option<String>,
    pub model: Option<String>,
    #[serde(default)]
    pub device_types: Vec<DeviceType>,
    #[serde(default)]
    pub points: Vec<RawPoint>,
    #[serde(default)]
    pub controls: RawControls,
    pub identify: Option<RawIdentify>,
    #[serde(default)]
    pub variants: Vec<RawVariant>,
}

/// `[[variants]]`: one member of a family, with its own points.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVariant {
    pub name: String,
    pub models: Option<String>,
    /// Registers that tell the variant; every one must hold.
    #[serde(default)]
    pub when: Vec<RawCondition>,
    #[serde(default)]
    pub points: Vec<RawPoint>,
}

/// One register a variant is told by: `values` (any of), or a range
/// `at_least` / `below`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCondition {
    pub register: u16,
    #[serde(default)]
    pub table: Table,
    #[serde(rename = "type", default = "u16_type")]
    pub ty: ValueType,
    #[serde(default)]
    pub word_order: WordOrder,
    #[serde(default)]
    pub values: Vec<i64>,
    pub at_least: Option<i64>,
    pub below: Option<i64>,
}

/// `[identify]`: a register whose value names the device (for `scan`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdentify {
    pub register: u16,
    #[serde(default)]
    pub table: Table,
    /// An integer type, or "string".
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub word_order: WordOrder,
    /// For "string": registers to read.
    pub words: Option<u16>,
    /// For integer types: the values that identify the device.
    #[serde(default)]
    pub values: Vec<i64>,
    /// For "string": how the text starts.
    pub prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPoint {
    pub property: String,
    pub register: u16,
    #[serde(default)]
    pub table: Table,
    #[serde(rename = "type")]
    pub ty: ValueType,
    #[serde(default)]
    pub word_order: WordOrder,
    /// Engineering value = raw × scale (in `unit`).
    pub scale: Option<f64>,
    /// A holding register with a SunSpec-style power-of-ten exponent.
    pub scale_factor: Option<u16>,
    /// Unit of raw × scale; converted to the property's unit.
    pub unit: Option<String>,
    /// Must match the property's kind when given (a check, not a setting).
    pub kind: Option<String>,
    /// Raw bit pattern(s) meaning "not available": one number or a list.
    pub absent: Option<RawAbsent>,
    /// Flip the sign (vendor sign convention).
    #[serde(default)]
    pub negate: bool,
    /// Negative while a flag register has any bit of `mask` set.
    pub negative_when: Option<RawFlag>,
    /// Negative while another signed 16-bit register is negative.
    pub sign_from: Option<RawSignFrom>,
    /// A register of the same type, order and scale subtracted from this one
    /// (discharge power − charge power).
    pub minus: Option<RawSignFrom>,
    /// `operatingState` only: the name of each code, as the vendor's
    /// register list enumerates it (`{ "0" = "STANDBY", ... }`).
    #[serde(default)]
    pub states: std::collections::BTreeMap<String, String>,
}

/// `sign_from = { register = 13020, table = "input" }`, and the same shape
/// for `minus = { register = 1011, table = "input" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSignFrom {
    pub register: u16,
    #[serde(default)]
    pub table: Table,
}

/// `absent = 0x7FFF` or `absent = [0xFFFF, 0x7FFF]`.
#[derive(Debug)]
pub(super) struct RawAbsent(pub Vec<u64>);

/// One raw pattern: a non-negative number.
struct Pattern(u64);

fn negative<E: serde::de::Error>(v: i64) -> E {
    E::custom(format!(
        "{v} is negative: give the raw pattern (-1 of an i16 is 0xFFFF)"
    ))
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Pattern;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a raw register value such as 0x7FFF")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Pattern, E> {
                Ok(Pattern(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Pattern, E> {
                u64::try_from(v).map(Pattern).map_err(|_| negative(v))
            }
        }
        d.deserialize_u64(V)
    }
}

impl<'de> Deserialize<'de> for RawAbsent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawAbsent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a raw register value (e.g. 0x7FFF) or a list of them")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawAbsent, E> {
                Ok(RawAbsent(vec![v]))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawAbsent, E> {
                u64::try_from(v)
                    .map(|v| RawAbsent(vec![v]))
                    .map_err(|_| negative(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawAbsent, A::Error> {
                let mut out = Vec::new();
                while let Some(Pattern(v)) = seq.next_element()? {
                    out.push(v);
                }
                Ok(RawAbsent(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlag {
    pub register: u16,
    #[serde(default)]
    pub table: Table,
    pub mask: u16,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControls {
    pub ess_power: Option<RawEss>,
    pub production_limit: Option<RawLimit>,
}

/// A register written with a value: engineering value = raw × scale.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawValueRegister {
    pub register: u16,
    #[serde(rename = "type")]
    pub ty: ValueType,
    #[serde(default)]
    pub word_order: WordOrder,
    #[serde(default = "one")]
    pub scale: f64,
    /// Added after scaling: raw = value / scale + offset.
    #[serde(default)]
    pub offset: f64,
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSigned {
    pub register: u16,
    #[serde(rename = "type")]
    pub ty: ValueType,
    #[serde(default)]
    pub word_order: WordOrder,
    #[serde(default = "one")]
    pub scale: f64,
    /// Added after scaling: raw = value / scale + offset.
    #[serde(default)]
    pub offset: f64,
    /// Which direction the register counts positive: "discharge" or "charge".
    pub positive: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDirection {
    pub register: u16,
    pub charge: u16,
    pub discharge: u16,
    pub idle: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFixed {
    pub register: u16,
    /// Written as `type` (default u16): an integer, or a number for f32.
    pub value: f64,
    #[serde(rename = "type", default = "u16_type")]
    pub ty: ValueType,
    #[serde(default)]
    pub word_order: WordOrder,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRevert {
    pub register: u16,
    #[serde(rename = "type", default = "u16_type")]
    pub ty: ValueType,
    #[serde(default)]
    pub word_order: WordOrder,
    /// "s" or "min".
    #[serde(default = "seconds")]
    pub unit: String,
}

fn u16_type() -> ValueType {
    ValueType::U16
}
fn seconds() -> String {
    "s".to_string()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEss {
    /// A signed register.
    pub signed: Option<RawSigned>,
    /// One magnitude register for both directions (needs `direction`).
    pub power: Option<RawValueRegister>,
    /// Separate magnitude registers (need `direction`).
    pub charge_power: Option<RawValueRegister>,
    pub discharge_power: Option<RawValueRegister>,
    pub direction: Option<RawDirection>,
    #[serde(default)]
    pub enable: Vec<RawFixed>,
    #[serde(default)]
    pub release: Vec<RawFixed>,
    pub revert_timeout: Option<RawRevert>,
    /// Split setpoints: what the register of the direction not commanded
    /// holds ("zero", the default, or "rated").
    pub unused: Option<String>,
    /// Signed or magnitude setpoints: charge and discharge power limits, 0 W
    /// at idle, the rated power with any other setpoint and at release.
    pub limits: Option<RawLimits>,
    /// The setpoint's writes go out as one request (they must be adjacent).
    #[serde(default)]
    pub one_request: bool,
    /// What the device does on its own when the agent stops writing.
    pub on_timeout: Option<RawOnTimeout>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub charge: RawValueRegister,
    pub discharge: RawValueRegister,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOnTimeout {
    /// Seconds, for a device without a revert timer register.
    pub after_s: Option<u32>,
    pub writes: Vec<RawFixed>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimit {
    pub register: u16,
    #[serde(rename = "type")]
    pub ty: ValueType,
    #[serde(default)]
    pub word_order: WordOrder,
    #[serde(default = "one")]
    pub scale: f64,
    /// Added after scaling: raw = value / scale + offset.
    #[serde(default)]
    pub offset: f64,
    /// "%" (of rated power) or "W" / "kW".
    pub unit: String,
    #[serde(default)]
    pub enable: Vec<RawFixed>,
    #[serde(default)]
    pub release: Vec<RawFixed>,
    pub revert_timeout: Option<RawRevert>,
}
