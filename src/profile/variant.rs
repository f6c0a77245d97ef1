//! Model and firmware variants of one profile: devices of one family whose
//! registers or scales differ (Deye's single-phase, three-phase low-voltage
//! and high-voltage hybrids). A variant is told from what the device says
//! about itself, a type or model register, a rated power or a firmware
//! version ([`Condition`]s read at first contact), or named in the device's
//! config (`variant = "..."`). A variant that cannot be told is an error that
//! names the choices and what was read: a device is never read with a guess.
//!
//! A [`Profile`] with variants is a family; [`Profile::with_variant`] and
//! [`Profile::select_variant`] give the concrete profile of one member (the
//! family's shared points, then the variant's own). Pure: the registers are
//! read by the caller (`modbus::poll`, `modbus::scan`); nothing here does I/O.

use super::Profile;
use crate::register::codec::{self, Absent, ValueType, WordOrder};
use crate::register::plan::{Image, Span, Table};
use crate::register::point::PointSpec;

/// What a register must hold for a variant to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Test {
    /// Any of these values (a model or type code).
    OneOf(Vec<i64>),
    /// Within `[at_least, below)`; either end may be open (a firmware version
    /// from which a scale changed, a rated power).
    Range {
        at_least: Option<i64>,
        below: Option<i64>,
    },
}

/// One register a variant is told by, and what it must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub table: Table,
    pub addr: u16,
    /// An integer type.
    pub ty: ValueType,
    pub order: WordOrder,
    pub test: Test,
}

impl Condition {
    pub fn span(&self) -> Span {
        Span::new(self.table, self.addr, self.ty.words())
    }

    /// The register's value in `img`, when it was read.
    pub fn value(&self, img: &Image) -> Option<i64> {
        let words = img.get(self.table, self.addr, self.ty.words())?;
        codec::decode(words, self.ty, self.order, Absent::Never).map(|v| v as i64)
    }

    pub fn holds(&self, v: i64) -> bool {
        match &self.test {
            Test::OneOf(values) => values.contains(&v),
            Test::Range { at_least, below } => {
                at_least.is_none_or(|lo| v >= lo) && below.is_none_or(|hi| v < hi)
            }
        }
    }

    /// A value that passes the test (the simulator shows it).
    pub fn example(&self) -> i64 {
        match &self.test {
            Test::OneOf(values) => values.first().copied().unwrap_or(0),
            Test::Range { at_least, below } => at_least.or(below.map(|b| b - 1)).unwrap_or(0),
        }
    }

    /// The example's register words.
    pub fn example_words(&self) -> Vec<u16> {
        codec::encode(self.example() as f64, self.ty, self.order).unwrap_or_default()
    }

    fn describe(&self) -> String {
        let at = format!("{} {}", self.table.name(), self.addr);
        match &self.test {
            Test::OneOf(values) => {
                let v: Vec<String> = values.iter().map(|v| format!("{v} ({v:#06x})")).collect();
                format!("{at} in [{}]", v.join(", "))
            }
            Test::Range { at_least, below } => match (at_least, below) {
                (Some(lo), Some(hi)) => format!("{lo} <= {at} < {hi}"),
                (Some(lo), None) => format!("{at} >= {lo}"),
                (None, Some(hi)) => format!("{at} < {hi}"),
                (None, None) => format!("{at} any"),
            },
        }
    }
}

/// One member of a family.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// What config names it by (`sg01hp3`).
    pub name: String,
    /// The model names it covers, for people (`SUN-5..25K-SG01HP3-EU-AM2`).
    pub models: Option<String>,
    /// Every condition must hold; none: the variant is only ever named.
    pub when: Vec<Condition>,
    /// Read after the family's shared points.
    pub points: Vec<PointSpec>,
}

impl Variant {
    fn choice(&self) -> String {
        if self.when.is_empty() {
            return format!("{} (only when named)", self.name);
        }
        let when: Vec<String> = self.when.iter().map(Condition::describe).collect();
        format!("{} (when {})", self.name, when.join(" and "))
    }
}

/// Why no variant of a family can be used for a device.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VariantError {
    #[error("profile {profile:?} has no variant {name:?} (choices: {choices})")]
    Unknown {
        profile: String,
        name: String,
        choices: String,
    },
    #[error("profile {profile:?} has no variants; leave `variant` out")]
    NoVariants { profile: String, name: String },
    #[error(
        "profile {profile:?}: the device shows {seen}, which matches no variant \
         (choices: {choices}); it is not read"
    )]
    NoMatch {
        profile: String,
        seen: String,
        choices: String,
    },
    #[error(
        "profile {profile:?}: the device shows {seen}, which matches {matching}; it cannot \
         tell which: set `variant` on the device to one of them; it is not read until then"
    )]
    Ambiguous {
        profile: String,
        seen: String,
        matching: String,
    },
    #[error(
        "profile {profile:?}: the device shows {seen}, which the configured variant {named:?} \
         does not match ({when}); it is not read: name the variant the device is, or leave \
         `variant` out to tell it from the device"
    )]
    Contradicts {
        profile: String,
        named: String,
        seen: String,
        when: String,
    },
}

impl Profile {
    fn choices(&self) -> String {
        self.variants
            .iter()
            .map(Variant::choice)
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The concrete profile of the variant named `name`.
    pub fn with_variant(&self, name: &str) -> Result<Profile, VariantError> {
        if self.variants.is_empty() {
            return Err(VariantError::NoVariants {
                profile: self.name.clone(),
                name: name.to_string(),
            });
        }
        let v = self
            .variants
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| VariantError::Unknown {
                profile: self.name.clone(),
                name: name.to_string(),
                choices: self.choices(),
            })?;
        Ok(self.concrete(v))
    }

    /// Every register the variants are told by (each once); for the
    /// concrete profile of a member, the member's own.
    pub fn variant_spans(&self) -> Vec<Span> {
        let mut out: Vec<Span> = Vec::new();
        let conditions = self.variants.iter().chain(&self.variant);
        for c in conditions.flat_map(|v| &v.when) {
            if !out.contains(&c.span()) {
                out.push(c.span());
            }
        }
        out
    }

    /// For the concrete profile of a member named in config: refuses a
    /// device whose registers contradict the member's conditions (a
    /// single-phase device configured as a three-phase one would be read at
    /// the wrong registers). A member without conditions, or a profile
    /// without variants, is taken as it is.
    pub fn confirm_variant(&self, img: &Image) -> Result<(), VariantError> {
        let Some(v) = &self.variant else {
            return Ok(());
        };
        let holds = |c: &Condition| c.value(img).is_some_and(|x| c.holds(x));
        if v.when.iter().all(holds) {
            return Ok(());
        }
        Err(VariantError::Contradicts {
            profile: self.name.clone(),
            named: v.name.clone(),
            seen: seen(&v.when, img),
            when: v.choice(),
        })
    }

    /// The concrete profile of the one variant whose conditions hold on `img`
    /// (holding [`Self::variant_spans`] as read). None or several: an error
    /// naming what was read and the choices.
    pub fn select_variant(&self, img: &Image) -> Result<Profile, VariantError> {
        let matching: Vec<&Variant> = self
            .variants
            .iter()
            .filter(|v| {
                !v.when.is_empty()
                    && v.when
                        .iter()
                        .all(|c| c.value(img).is_some_and(|x| c.holds(x)))
            })
            .collect();
        let all: Vec<Condition> = self.variants.iter().flat_map(|v| v.when.clone()).collect();
        let seen = seen(&all, img);
        match matching.as_slice() {
            [one] => Ok(self.concrete(one)),
            [] => Err(VariantError::NoMatch {
                profile: self.name.clone(),
                seen,
                choices: self.choices(),
            }),
            many => Err(VariantError::Ambiguous {
                profile: self.name.clone(),
                seen,
                matching: many
                    .iter()
                    .map(|v| match &v.models {
                        Some(m) => format!("{} ({m})", v.name),
                        None => v.name.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(" or "),
            }),
        }
    }

    fn concrete(&self, v: &Variant) -> Profile {
        let mut p = self.clone();
        p.points.extend(v.points.iter().copied());
        if let Some(m) = &v.models {
            p.model = Some(m.clone());
        }
        p.variants = Vec::new();
        p.variant = Some(v.clone());
        p
    }
}

/// What the registers of `conditions` hold, each register once, readably.
fn seen(conditions: &[Condition], img: &Image) -> String {
    let mut spans: Vec<Span> = Vec::new();
    let mut out = Vec::new();
    for c in conditions {
        let s = c.span();
        if spans.contains(&s) {
            continue;
        }
        spans.push(s);
        out.push(match c.value(img) {
            Some(v) => format!("{} {} = {v} ({v:#06x})", s.table.name(), s.addr),
            None => format!("{} {} unread", s.table.name(), s.addr),
        });
    }
    out.join(", ")
}

#[cfg(test)]
mod tests;
