//! From profile text to a validated [`Profile`]: TOML syntax, the shapes of
//! `raw` (unknown keys and bad values reported with their path), then the
//! meaning: known properties, units that convert, kinds that match, scales that
//! are finite and non-zero, registers that fit below 65536, complete controls.
//! Every problem is collected; nothing stops at the first.

mod controls;
mod identify;
mod release;
mod states;
mod variant;
mod writes;

use super::controls::ProfileControls;
use super::raw::{RawAbsent, RawPoint, RawProfile};
use super::{Profile, ProfileError, ProfileProblem};
use crate::model::{Kind, Property, Unit};
use crate::register::codec::{Absent, Sentinels, ValueType};
use crate::register::plan::Table;
use crate::register::point::{Minus, PointSpec, Scale, SignFlag, SignOf};
use controls::{ess, limit};

pub(super) struct Problems(pub(super) Vec<ProfileProblem>);

impl Problems {
    pub(super) fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ProfileProblem {
            path: path.into(),
            message: message.into(),
        });
    }
}

/// Parses and validates profile text. `name` and `origin` label the result and
/// the errors.
pub fn parse(name: &str, origin: &str, text: &str) -> Result<Profile, ProfileError> {
    let invalid = |problems| ProfileError::Invalid {
        origin: origin.to_string(),
        problems,
    };
    let value: toml::Value = toml::from_str(text).map_err(|e: toml::de::Error| {
        invalid(vec![ProfileProblem {
            path: String::new(),
            message: format!("not valid TOML: {}", e.message()),
        }])
    })?;
    let raw: RawProfile = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        invalid(vec![ProfileProblem {
            path: if path == "." { String::new() } else { path },
            message: e.into_inner().message().to_string(),
        }])
    })?;
    let mut p = Problems(Vec::new());
    let mut points = Vec::new();
    for (i, rp) in raw.points.iter().enumerate() {
        if let Some(spec) = point(&format!("points[{i}]"), rp, &mut p) {
            points.push(spec);
        }
    }
    let no_points = |v: &super::raw::RawVariant| v.points.is_empty();
    if raw.points.is_empty() && (raw.variants.is_empty() || raw.variants.iter().any(no_points)) {
        p.push(
            "points",
            "a profile needs at least one [[points]] entry (shared, or in every [[variants]])",
        );
    }
    let spans = point_registers("points", &raw.points);
    disjoint(
        &spans,
        "two points cannot decode the same registers",
        &mut p,
    );
    let state_names = states::state_names("points", &raw.points, &mut p);
    let variants = variant::variants(&raw.variants, &spans, &mut p);
    let controls = ProfileControls {
        ess_power: raw
            .controls
            .ess_power
            .as_ref()
            .and_then(|e| ess("controls.ess_power", e, &mut p)),
        production_limit: raw
            .controls
            .production_limit
            .as_ref()
            .and_then(|l| limit("controls.production_limit", l, &mut p)),
    };
    let identify = raw
        .identify
        .as_ref()
        .and_then(|r| identify::identify("identify", r, &mut p));
    if !p.0.is_empty() {
        return Err(invalid(p.0));
    }
    Ok(Profile {
        name: name.to_string(),
        origin: origin.to_string(),
        manufacturer: raw.manufacturer,
        model: raw.model,
        device_types: raw.device_types,
        points,
        state_names,
        controls,
        identify,
        variants,
        variant: None,
    })
}

/// The registers each point decodes, with its path (`{at}[i].register`).
pub(super) fn point_registers(at: &str, points: &[RawPoint]) -> Vec<Registers> {
    points
        .iter()
        .enumerate()
        .map(|(i, rp)| Registers {
            path: format!("{at}[{i}].register"),
            table: rp.table,
            addr: rp.register,
            len: rp.ty.words(),
        })
        .collect()
}

/// Factor from `unit` to the property's unit, when they measure the same thing.
fn unit_factor(unit: &str, to: Unit) -> Option<f64> {
    let f = match (to, unit) {
        (Unit::Watt, "W") | (Unit::WattHour, "Wh") | (Unit::VoltAmpereReactive, "var") => 1.0,
        (Unit::Watt, "kW") | (Unit::WattHour, "kWh") | (Unit::VoltAmpereReactive, "kvar") => 1e3,
        (Unit::Watt, "MW") | (Unit::WattHour, "MWh") => 1e6,
        (Unit::Percent, "%") | (Unit::Hertz, "Hz") | (Unit::Volt, "V") | (Unit::Ampere, "A") => 1.0,
        (Unit::Volt, "kV") => 1e3,
        (Unit::Ampere, "mA") => 1e-3,
        (Unit::DegreeCelsius, "°C" | "C" | "degC") => 1.0,
        (Unit::None, "") => 1.0,
        _ => return None,
    };
    Some(f)
}

pub(super) fn check_scale(path: &str, scale: f64, p: &mut Problems) -> bool {
    let ok = scale.is_finite() && scale != 0.0;
    if !ok {
        p.push(
            path,
            format!("must be a finite number other than 0, found {scale}"),
        );
    }
    ok
}

pub(super) fn check_span(path: &str, register: u16, ty: ValueType, p: &mut Problems) -> bool {
    let ok = u32::from(register) + u32::from(ty.words()) <= 65_536;
    if !ok {
        p.push(
            path,
            format!("{register} + {} registers runs past 65535", ty.words()),
        );
    }
    ok
}

/// The "no value" patterns of a point: each must fit its type; one list holds
/// at most [`Sentinels::MAX`].
fn absent(path: &str, rp: &RawPoint, p: &mut Problems) -> Option<Absent> {
    let Some(RawAbsent(list)) = &rp.absent else {
        return Some(Absent::Never);
    };
    let max = if rp.ty.words() >= 4 {
        u64::MAX
    } else {
        (1u64 << (16 * u32::from(rp.ty.words()))) - 1
    };
    let mut ok = true;
    for a in list.iter().filter(|a| **a > max) {
        p.push(path, format!("{a} does not fit in {:?}", rp.ty));
        ok = false;
    }
    match list.as_slice() {
        [one] => ok.then_some(Absent::Raw(*one)),
        many => match Sentinels::new(many) {
            Some(s) => ok.then_some(Absent::RawAny(s)),
            None => {
                p.push(
                    path,
                    format!(
                        "give 1 to {} raw patterns, found {}",
                        Sentinels::MAX,
                        many.len()
                    ),
                );
                None
            }
        },
    }
}

/// Registers one entry of a profile reads or writes, for the overlap checks.
#[derive(Clone)]
pub(super) struct Registers {
    pub path: String,
    pub table: Table,
    pub addr: u16,
    pub len: u16,
}

impl Registers {
    fn end(&self) -> u32 {
        u32::from(self.addr) + u32::from(self.len)
    }

    fn overlaps(&self, other: &Registers) -> bool {
        self.table == other.table
            && u32::from(self.addr) < other.end()
            && u32::from(other.addr) < self.end()
    }

    fn describe(&self) -> String {
        if self.len <= 1 {
            self.addr.to_string()
        } else {
            format!("{}-{}", self.addr, self.end() - 1)
        }
    }
}

/// Refuses entries whose registers overlap an earlier entry's: two points
/// decoding the same registers (one of them is wrong), or two writes of one
/// recipe to the same register (the read-back could only ever confirm the
/// later one, so the earlier write would go unchecked).
pub(super) fn disjoint(entries: &[Registers], why: &str, p: &mut Problems) {
    for (j, later) in entries.iter().enumerate() {
        if let Some(earlier) = entries[..j].iter().find(|e| e.overlaps(later)) {
            p.push(
                &later.path,
                format!(
                    "registers {} overlap {} (registers {}): {why}",
                    later.describe(),
                    earlier.path,
                    earlier.describe()
                ),
            );
        }
    }
}

pub(super) fn point(path: &str, rp: &RawPoint, p: &mut Problems) -> Option<PointSpec> {
    let before = p.0.len();
    let property = property(path, &rp.property, p);
    check_span(&format!("{path}.register"), rp.register, rp.ty, p);
    let factor = match (property, &rp.unit) {
        (Some(prop), Some(unit)) => unit_factor(unit, prop.unit()).or_else(|| {
            p.push(
                format!("{path}.unit"),
                format!(
                    "{unit:?} cannot be converted to {} ({:?})",
                    prop.name(),
                    prop.unit().as_str()
                ),
            );
            None
        }),
        _ => Some(1.0),
    };
    if let (Some(prop), Some(kind)) = (property, &rp.kind) {
        let expected = match prop.kind() {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        if kind != expected {
            p.push(
                format!("{path}.kind"),
                format!(
                    "{kind:?} does not match {}, which is a {expected}",
                    prop.name()
                ),
            );
        }
    }
    let scale = scale(path, rp, factor, p);
    check_tables(path, rp, p);
    let absent = absent(&format!("{path}.absent"), rp, p);
    if p.0.len() > before {
        return None;
    }
    Some(PointSpec {
        property: property?,
        table: rp.table,
        addr: rp.register,
        ty: rp.ty,
        order: rp.word_order,
        absent: absent?,
        scale: scale?,
        negate: rp.negate,
        gate: None,
        sign: rp.negative_when.as_ref().map(|f| SignFlag {
            table: f.table,
            addr: f.register,
            mask: f.mask,
        }),
        sign_of: rp.sign_from.as_ref().map(|f| SignOf {
            table: f.table,
            addr: f.register,
        }),
        minus: rp.minus.as_ref().map(|m| Minus {
            table: m.table,
            addr: m.register,
        }),
    })
}

/// The point's property by its name `raw`.
fn property(path: &str, raw: &str, p: &mut Problems) -> Option<Property> {
    match raw.parse::<Property>() {
        Ok(prop) => Some(prop),
        Err(_) => {
            let known: Vec<&str> = Property::ALL.iter().map(|x| x.name()).collect();
            p.push(
                format!("{path}.property"),
                format!("{:?} is not a property (known: {})", raw, known.join(", ")),
            );
            None
        }
    }
}

/// The point's scale: `scale` (times the unit's `factor`) or a SunSpec
/// `scale_factor` register, not both; the unit's factor alone otherwise.
fn scale(path: &str, rp: &RawPoint, factor: Option<f64>, p: &mut Problems) -> Option<Scale> {
    match (rp.scale, rp.scale_factor) {
        (Some(_), Some(_)) => {
            p.push(path, "give scale or scale_factor, not both");
            None
        }
        (Some(s), None) => check_scale(&format!("{path}.scale"), s, p)
            .then(|| Scale::Factor(s * factor.unwrap_or(1.0))),
        (None, Some(sf)) => {
            if factor.is_some_and(|f| f != 1.0) {
                p.push(
                    format!("{path}.unit"),
                    "a scale_factor register gives values in the property's own unit; leave unit out or use it",
                );
            }
            Some(Scale::SunspecSf(sf))
        }
        (None, None) => Some(match factor {
            Some(f) if f != 1.0 => Scale::Factor(f),
            _ => Scale::One,
        }),
    }
}

/// The tables the point, its sign and what it subtracts are read from:
/// holding or input registers, never discrete inputs; the subtracted
/// register's span.
fn check_tables(path: &str, rp: &RawPoint, p: &mut Problems) {
    if rp.sign_from.as_ref().map(|f| f.table) == Some(Table::DiscreteInput) {
        p.push(
            format!("{path}.sign_from.table"),
            "a sign comes from a holding or input register",
        );
    }
    if rp.minus.as_ref().map(|f| f.table) == Some(Table::DiscreteInput) {
        p.push(
            format!("{path}.minus.table"),
            "a value is subtracted from a holding or input register",
        );
    }
    if let Some(m) = &rp.minus {
        check_span(&format!("{path}.minus.register"), m.register, rp.ty, p);
    }
    if rp.table == Table::DiscreteInput {
        p.push(
            format!("{path}.table"),
            "a profile reads holding or input registers; discrete inputs are read by a site's grid_signals",
        );
    }
}
