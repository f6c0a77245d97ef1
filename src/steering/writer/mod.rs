//! Device writers: how a [`Command`] becomes register writes on one device, per
//! protocol, and how the read-back is checked.
//!
//! Pure recipes: a writer says which registers to read first (scale factors,
//! references; the same span is read back after writing), which writes to make in
//! which order, and which words the read-back must show. The actuator runs them
//! through the device's bus task. Nothing here does I/O. A register-map profile
//! plugs in through [`ProfileControls`].

mod profile;
mod sunspec;

pub use profile::{ControlUnit, EnableControl, ProfileControls, RegisterControl};
pub use sunspec::{Sunspec123, Sunspec124};

use super::decide::Command;
use crate::modbus::plan::Span;
use crate::modbus::DeviceMap;
use crate::model::DeviceType;

/// One write request: `values` from `addr` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegWrite {
    pub addr: u16,
    pub values: Vec<u16>,
}

/// The writes for one command, in order, and what the read-back must show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan {
    pub writes: Vec<RegWrite>,
    /// `(address, word)` pairs the read-back of [`DeviceControls::span`] must hold.
    pub expect: Vec<(u16, u16)>,
}

/// Why a command cannot be written to a device.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WriteError {
    #[error("the device has no {0}")]
    NoControl(&'static str),
    #[error("{what} is not available on the device ({detail})")]
    Missing { what: &'static str, detail: String },
    #[error("command {0:?} does not apply to this device")]
    WrongCommand(Command),
    #[error("{0}")]
    Encode(String),
}

/// A device's control surface.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceControls {
    /// SunSpec model 124 (basic storage controls).
    Storage124(Sunspec124),
    /// SunSpec model 123 (immediate controls), limits in % of `WMax`.
    Inverter123(Sunspec123),
    /// Controls named by a register-map profile.
    Profile(ProfileControls),
}

impl DeviceControls {
    /// The controls of a discovered device: SunSpec models when the device has a
    /// SunSpec chain. A register-map profile's controls plug in here once
    /// `DeviceMap` carries them (as [`ProfileControls`]).
    pub fn for_device(device_type: DeviceType, map: &DeviceMap) -> Result<Self, WriteError> {
        if map.chain.is_empty() {
            return Err(WriteError::NoControl(
                "controls known to steering (its register-map profile names none)",
            ));
        }
        Self::for_sunspec(device_type, map)
    }

    /// The controls of a discovered SunSpec device of this type.
    pub fn for_sunspec(device_type: DeviceType, map: &DeviceMap) -> Result<Self, WriteError> {
        match device_type {
            DeviceType::Battery => map
                .model(124)
                .map(|b| DeviceControls::Storage124(Sunspec124 { block: *b }))
                .ok_or(WriteError::NoControl(
                    "SunSpec model 124 (storage controls)",
                )),
            DeviceType::Inverter => {
                let block = map.model(123).ok_or(WriteError::NoControl(
                    "SunSpec model 123 (immediate controls)",
                ))?;
                let wmax_w = map.info.rated_power_w.filter(|w| *w > 0.0).ok_or_else(|| {
                    WriteError::Missing {
                        what: "WMax",
                        detail: "neither model 121 WMax nor model 120 WRtg was readable".into(),
                    }
                })?;
                Ok(DeviceControls::Inverter123(Sunspec123 {
                    block: *block,
                    wmax_w,
                }))
            }
            DeviceType::Meter => Err(WriteError::NoControl("controls (it is a meter)")),
        }
    }

    /// Registers read before planning and read back after writing.
    pub fn span(&self) -> Option<Span> {
        match self {
            DeviceControls::Storage124(s) => Some(s.span()),
            DeviceControls::Inverter123(s) => Some(s.span()),
            DeviceControls::Profile(p) => p.span(),
        }
    }

    /// The writes for `cmd`; `words` are the registers of [`Self::span`] as read.
    pub fn plan(
        &self,
        cmd: Command,
        revert_s: u16,
        words: &[u16],
    ) -> Result<WritePlan, WriteError> {
        match self {
            DeviceControls::Storage124(s) => s.plan(cmd, revert_s, words),
            DeviceControls::Inverter123(s) => s.plan(cmd, revert_s, words),
            DeviceControls::Profile(p) => p.plan(cmd, revert_s),
        }
    }
}

/// Checks a read-back against a plan: `Err` names the first register that differs.
pub fn verify(plan: &WritePlan, span: Option<Span>, words: &[u16]) -> Result<(), String> {
    let Some(span) = span else { return Ok(()) };
    for &(addr, want) in &plan.expect {
        let got = addr
            .checked_sub(span.addr)
            .and_then(|i| words.get(i as usize))
            .copied();
        if got != Some(want) {
            return Err(format!(
                "read-back of register {addr} shows {} instead of {want}",
                got.map_or("nothing".to_string(), |g| g.to_string())
            ));
        }
    }
    Ok(())
}

/// The word at `addr` within a read of `span`.
pub(crate) fn word_at(span: Span, words: &[u16], addr: u16) -> Option<u16> {
    addr.checked_sub(span.addr)
        .and_then(|i| words.get(i as usize))
        .copied()
}

#[cfg(test)]
mod tests;
