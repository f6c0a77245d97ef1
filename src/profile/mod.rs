//! Register-map profiles: how to read and steer a device that does not speak
//! SunSpec, from a TOML file (`config/profiles/*.toml`, documented in
//! `docs/devices.md`).
//!
//! A [`Profile`] is parsed and validated once, when the config is checked; the
//! poller turns its points into a read plan, `modbus::control` turns its
//! [`ProfileControls`] into the writes of a command. Layout: `raw` (the TOML
//! shapes), `build` (validation into typed points and controls, every problem
//! with its path), `controls` (what the file says about writes), `identify`
//! (the register that names the device, for `scan`), `variant` (model and
//! firmware variants of one family, and how a device's is told), `builtin`
//! (the library compiled into the binary). Finding a profile by name or path on disk is
//! `config::profiles`'.
//!
//! A leaf: it imports only `model` and `register`, never `config` or
//! `modbus`, and it does no I/O (no files, no Modbus).

mod build;
mod builtin;
mod controls;
mod identify;
mod raw;
mod variant;

use std::fmt;

pub use build::parse;
pub use builtin::{builtin_names, BUILTIN};
pub use controls::{
    Direction, EssControl, EssSetpoint, FixedWrite, LimitControl, LimitUnit, OnTimeout,
    PowerLimits, ProfileControls, RevertTimeout, Unused, ValueRegister,
};
pub use identify::{Identify, IdentifyMatch};
pub use variant::{Condition, Test, Variant, VariantError};

use crate::model::DeviceType;
use crate::register::point::PointSpec;

/// A validated register-map profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The name it was asked for by (`huawei-luna2000`) or its path.
    pub name: String,
    /// Where it came from: a file path or `built-in`.
    pub origin: String,
    pub manufacturer: Option<String>,
    pub model: Option<String>,
    /// Device types the profile is written for; empty = any.
    pub device_types: Vec<DeviceType>,
    /// Points in order of preference (the first with a value wins per property).
    pub points: Vec<PointSpec>,
    /// The names of its `operatingState` codes, by code (empty: none).
    pub state_names: Vec<(u16, String)>,
    pub controls: ProfileControls,
    /// How `scan` recognises the device, when the vendor offers a way.
    pub identify: Option<Identify>,
    /// A family's members; empty for a profile without variants and for the
    /// concrete profile of one member.
    pub variants: Vec<Variant>,
    /// The member this concrete profile was made for (its points are already
    /// in `points`).
    pub variant: Option<Variant>,
}

/// One thing wrong with a profile file: the TOML path inside it and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileProblem {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ProfileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a profile cannot be used: not found, unreadable, or invalid (every
/// problem, each with its path inside the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("profile {name:?} not found (looked for {looked}; built-in profiles: {builtin})")]
    NotFound {
        name: String,
        looked: String,
        builtin: String,
    },
    #[error("cannot read profile {path}: {message}")]
    Unreadable { path: String, message: String },
    #[error("profile {origin} is invalid: {}", list(.problems))]
    Invalid {
        origin: String,
        problems: Vec<ProfileProblem>,
    },
}

fn list(problems: &[ProfileProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
