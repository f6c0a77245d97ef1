//! Register-map profile devices: an adapter from steering's commands to the
//! profile recipes of [`crate::modbus::profile`] (`EssControl`, `LimitControl`),
//! which own the register order (revert timer, enable writes, power or limit,
//! direction). This file adds what steering needs around them: the mapping of
//! commands (a release is the profile's `release` writes; idle is 0 W), and the
//! read-back of every register written, compared word for word.
//!
//! The device's revert timer (where the profile names one) is written with the
//! site's `revert_timeout_s`, rounded up by the recipe to the register's unit;
//! the actuator refreshes every `revert_timeout_s / 2`, so before that timer
//! fires. Profiles without a timer rely on that refresh and on the release.

use super::{WriteError, WritePlan};
use crate::modbus::codec::EncodeError;
use crate::modbus::profile::{EssControl, LimitControl, LimitError};
use crate::steering::decide::Command;

fn encode_error(e: EncodeError) -> WriteError {
    WriteError::Encode(e.to_string())
}

/// A profile's storage power control (`[controls.ess_power]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileEss {
    pub control: EssControl,
}

impl ProfileEss {
    /// `EssPower(w)`: the recipe's writes for `w` W (+ discharge, 0 idle);
    /// `EssRelease`: its release writes.
    pub fn plan(&self, cmd: Command, revert_s: u16) -> Result<WritePlan, WriteError> {
        let writes = match cmd {
            Command::EssPower(w) => self
                .control
                .writes(w, u32::from(revert_s))
                .map_err(encode_error)?,
            Command::EssRelease => self.control.release_writes(),
            other => return Err(WriteError::WrongCommand(other)),
        };
        Ok(WritePlan::echo(writes))
    }
}

/// A profile's production limit control (`[controls.production_limit]`);
/// `rated_w` is the 100 % of a percentage register.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileLimit {
    pub control: LimitControl,
    pub rated_w: Option<f64>,
}

impl ProfileLimit {
    /// `ProductionLimit(w)`: the recipe's writes for a cap of `w` W;
    /// `ProductionRelease`: its release writes.
    pub fn plan(&self, cmd: Command, revert_s: u16) -> Result<WritePlan, WriteError> {
        let writes = match cmd {
            Command::ProductionLimit(w) => self
                .control
                .writes(w, self.rated_w, u32::from(revert_s))
                .map_err(|e| match e {
                    LimitError::NoRating => WriteError::Missing {
                        what: "rated power",
                        detail: "the profile's limit is in % of rated power; set `rated_power` \
                                 on the device"
                            .into(),
                    },
                    LimitError::Encode(e) => encode_error(e),
                })?,
            Command::ProductionRelease => self.control.release_writes(),
            other => return Err(WriteError::WrongCommand(other)),
        };
        Ok(WritePlan::echo(writes))
    }
}
