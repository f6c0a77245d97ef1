//! The typed values of the steering components.
//!
//! Plain data: a value here is already valid (finite, in range); the API
//! parses and validates bodies into them, and renders them. Nothing here knows
//! devices, time or a wire format.

use crate::model::PowerValue;

/// One independently set part of a site's signal (seed rule 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    Ess,
    Curtailment,
    MaximizeGridImport,
    /// Temporary grid limits (the seed's "temporary grid limit adjustments").
    GridLimit,
}

impl Component {
    pub const ALL: [Component; 4] = [
        Component::Ess,
        Component::Curtailment,
        Component::MaximizeGridImport,
        Component::GridLimit,
    ];

    /// The name used on the wire (`?component=`, `scheduled[].component`) and in the store.
    pub const fn wire_name(self) -> &'static str {
        match self {
            Component::Ess => "ess",
            Component::Curtailment => "curtailment",
            Component::MaximizeGridImport => "maximizeGridImport",
            Component::GridLimit => "gridLimit",
        }
    }

    pub fn from_wire(s: &str) -> Option<Component> {
        Component::ALL.into_iter().find(|c| c.wire_name() == s)
    }
}

/// What the site storage is told to do.
#[derive(Clone, Debug, PartialEq)]
pub enum EssSetting {
    /// Active power for the whole site storage as given (+ discharge, − charge).
    Power(PowerValue),
    /// (Dis)charge at `power` until the site SoC reaches `until_soc`, then idle.
    UntilSoc { power: PowerValue, until_soc: f64 },
    /// 0 W at every storage device.
    Idle,
}

impl EssSetting {
    /// The requested site power in W (+ discharge); idle is 0.
    pub fn watts(&self) -> f64 {
        match self {
            EssSetting::Power(p) | EssSetting::UntilSoc { power: p, .. } => p.as_watts(),
            EssSetting::Idle => 0.0,
        }
    }
}

/// The most the site's production may deliver in total.
#[derive(Clone, Debug, PartialEq)]
pub enum CurtailmentValue {
    Power(PowerValue),
    /// Share (0 to 100) of the site's rated production power.
    Percent(f64),
}

impl CurtailmentValue {
    /// The limit in W, given the site's rated production power.
    pub fn watts(&self, rated_production_w: f64) -> f64 {
        match self {
            CurtailmentValue::Power(p) => p.as_watts(),
            CurtailmentValue::Percent(pct) => rated_production_w * pct / 100.0,
        }
    }
}

/// Temporary grid limits: each member, when given, tightens the configured limit
/// of the same direction (validated against it on the way in). `None` leaves the
/// configured limit in force.
#[derive(Clone, Debug, PartialEq)]
pub struct GridLimit {
    pub max_import: Option<PowerValue>,
    pub max_export: Option<PowerValue>,
}

/// The value of one timeline entry.
#[derive(Clone, Debug, PartialEq)]
pub enum ComponentValue {
    Ess(EssSetting),
    Curtailment(CurtailmentValue),
    MaximizeGridImport(bool),
    GridLimit(GridLimit),
}

impl ComponentValue {
    pub const fn component(&self) -> Component {
        match self {
            ComponentValue::Ess(_) => Component::Ess,
            ComponentValue::Curtailment(_) => Component::Curtailment,
            ComponentValue::MaximizeGridImport(_) => Component::MaximizeGridImport,
            ComponentValue::GridLimit(_) => Component::GridLimit,
        }
    }
}
