//! The schedule's vocabulary: a program as listed, an event as followed
//! (its phase, its drawn randomization), what happened to it, and the values
//! in force with where they come from. Plain data.

use std::collections::BTreeMap;

use crate::csip::resource::program::{Control, DefaultControl, Mode};
use crate::csip::resource::response::ResponseStatus;

/// A program as last listed.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramState {
    /// The DERProgramList it was listed in.
    pub list: String,
    pub href: String,
    pub mrid: String,
    pub primacy: u8,
    pub default: Option<DefaultControl>,
}

/// Where an event stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Scheduled,
    Active,
    Completed,
    Cancelled,
    Superseded,
    Expired,
}

impl Phase {
    pub fn is_over(self) -> bool {
        !matches!(self, Phase::Scheduled | Phase::Active)
    }

    pub fn wire_name(self) -> &'static str {
        match self {
            Phase::Scheduled => "scheduled",
            Phase::Active => "active",
            Phase::Completed => "completed",
            Phase::Cancelled => "cancelled",
            Phase::Superseded => "superseded",
            Phase::Expired => "expired",
        }
    }

    pub fn from_wire(s: &str) -> Option<Phase> {
        [
            Phase::Scheduled,
            Phase::Active,
            Phase::Completed,
            Phase::Cancelled,
            Phase::Superseded,
            Phase::Expired,
        ]
        .into_iter()
        .find(|p| p.wire_name() == s)
    }
}

/// An event the client follows, and what it decided for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tracked {
    pub control: Control,
    /// The href of its program.
    pub program: String,
    pub primacy: u8,
    /// Its randomization, chosen when it was first seen, s.
    pub start_offset_s: i64,
    pub duration_offset_s: i64,
    pub phase: Phase,
    /// The server listed it at the last complete read of its program.
    pub listed: bool,
}

impl Tracked {
    /// When it starts and ends, randomized, ms.
    pub fn effective_ms(&self) -> (i64, i64) {
        let start = (self.control.start_s + self.start_offset_s) * 1000;
        let duration = (i64::from(self.control.duration_s) + self.duration_offset_s).max(0);
        (start, start + duration * 1000)
    }

    pub(super) fn nominal_ms(&self) -> (i64, i64) {
        (self.control.start_s * 1000, self.control.end_s() * 1000)
    }

    /// Whether `self` takes precedence over `other`: a lower primacy, or
    /// at the same primacy a later creation (the mRID breaks a tie).
    pub(super) fn precedes(&self, other: &Tracked) -> bool {
        self.primacy < other.primacy
            || (self.primacy == other.primacy
                && (self.control.creation_s, &self.control.mrid)
                    > (other.control.creation_s, &other.control.mrid))
    }
}

/// What happened to an event, for its Response and the history.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub mrid: String,
    pub program: String,
    pub status: ResponseStatus,
    /// When it happened, server time, ms.
    pub at_ms: i64,
    pub reply_to: Option<String>,
    pub response_required: u8,
}

/// Where a value in force comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    Event {
        mrid: String,
        program: String,
        primacy: u8,
        /// When it ends, randomized, server time, ms.
        until_ms: i64,
        /// Its `rampTms`, s.
        ramp_s: Option<f64>,
    },
    Default {
        mrid: String,
        program: String,
        primacy: u8,
    },
}

impl Origin {
    pub fn mrid(&self) -> &str {
        match self {
            Origin::Event { mrid, .. } | Origin::Default { mrid, .. } => mrid,
        }
    }
}

/// One mode's value in force.
#[derive(Clone, Debug, PartialEq)]
pub struct InForceValue {
    pub value: f64,
    pub origin: Origin,
}

/// Every mode's value in force, and the ramp rate the defaults set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InForce {
    pub modes: BTreeMap<Mode, InForceValue>,
    /// `setGradW` of the program with the lowest primacy whose default
    /// has one.
    pub set_grad_w: Option<u16>,
}

impl InForce {
    pub fn get(&self, m: Mode) -> Option<f64> {
        self.modes.get(&m).map(|v| v.value)
    }
}
