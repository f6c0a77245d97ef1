//! The controls a profile offers and the pure recipes that turn a setpoint into
//! register writes, in the order the device needs them.
//!
//! This is the contract with the steering layer: steering decides *what* to set
//! (an ESS power in W, + discharge; a production limit in W) and runs the writes
//! through the bus; this file only says *which* registers get *which* words.
//! Every write is to holding registers (function 6 for one word, 16 for more).

use crate::modbus::codec::{self, EncodeError, ValueType, WordOrder};

/// One write: `values` from `addr` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterWrite {
    pub addr: u16,
    pub values: Vec<u16>,
}

/// A register a value is written to: raw = engineering value / `scale` +
/// `offset` (a vendor that shifts signed powers into unsigned registers, such
/// as Alpha ESS's 32000 = 0 W).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueRegister {
    pub addr: u16,
    pub ty: ValueType,
    pub order: WordOrder,
    pub scale: f64,
    pub offset: f64,
}

impl ValueRegister {
    fn write(&self, value: f64) -> Result<RegisterWrite, EncodeError> {
        Ok(RegisterWrite {
            addr: self.addr,
            values: codec::encode(value / self.scale + self.offset, self.ty, self.order)?,
        })
    }
}

/// Fixed words written as they are (mode switches, enable flags): one word,
/// or the two or four of a 32/64-bit register, which go out in one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedWrite {
    pub addr: u16,
    pub values: Vec<u16>,
}

impl FixedWrite {
    /// One 16-bit word.
    pub fn word(addr: u16, value: u16) -> FixedWrite {
        FixedWrite {
            addr,
            values: vec![value],
        }
    }

    fn write(&self) -> RegisterWrite {
        RegisterWrite {
            addr: self.addr,
            values: self.values.clone(),
        }
    }
}

/// The register holding the device's own fallback timer; written first so
/// that a lost gateway cannot leave a setpoint in force.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RevertTimeout {
    pub addr: u16,
    pub ty: ValueType,
    pub order: WordOrder,
    /// Seconds per raw unit (1 for seconds, 60 for minutes).
    pub seconds_per_unit: u32,
}

impl RevertTimeout {
    /// Rounded up to whole units, so the device never reverts earlier than asked.
    fn write(&self, seconds: u32) -> Result<RegisterWrite, EncodeError> {
        let units = seconds.div_ceil(self.seconds_per_unit.max(1));
        Ok(RegisterWrite {
            addr: self.addr,
            values: codec::encode(f64::from(units), self.ty, self.order)?,
        })
    }
}

/// How a storage power setpoint is expressed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EssSetpoint {
    /// One signed register; `discharge_positive` says which way counts positive.
    Signed {
        register: ValueRegister,
        discharge_positive: bool,
    },
    /// One magnitude register for both directions; the direction register says which.
    Magnitude { register: ValueRegister },
    /// A magnitude register per direction.
    Split {
        charge: ValueRegister,
        discharge: ValueRegister,
    },
}

/// A register selecting charge, discharge or idle (written after the power).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Direction {
    pub addr: u16,
    pub charge: u16,
    pub discharge: u16,
    pub idle: u16,
}

/// Storage power control.
#[derive(Clone, Debug, PartialEq)]
pub struct EssControl {
    pub setpoint: EssSetpoint,
    pub direction: Option<Direction>,
    /// Written before the setpoint, every time (remote-control mode on).
    pub enable: Vec<FixedWrite>,
    /// Hands control back to the device's own logic.
    pub release: Vec<FixedWrite>,
    pub revert_timeout: Option<RevertTimeout>,
}

impl EssControl {
    /// Writes that make the device run at `watts` (+ discharge, − charge, 0 idle),
    /// reverting on its own after `revert_s` seconds without a new write (when
    /// the profile names a revert register). Order: revert timer, enable writes,
    /// power register(s), direction.
    pub fn writes(&self, watts: f64, revert_s: u32) -> Result<Vec<RegisterWrite>, EncodeError> {
        if !watts.is_finite() {
            return Err(EncodeError::NotFinite(watts));
        }
        let mut out = Vec::new();
        if let Some(r) = &self.revert_timeout {
            out.push(r.write(revert_s)?);
        }
        out.extend(self.enable.iter().map(FixedWrite::write));
        let magnitude = watts.abs();
        match self.setpoint {
            EssSetpoint::Signed {
                register,
                discharge_positive,
            } => out.push(register.write(if discharge_positive { watts } else { -watts })?),
            EssSetpoint::Magnitude { register } => out.push(register.write(magnitude)?),
            EssSetpoint::Split { charge, discharge } => {
                let (c, d) = if watts < 0.0 {
                    (magnitude, 0.0)
                } else {
                    (0.0, magnitude)
                };
                out.push(charge.write(c)?);
                out.push(discharge.write(d)?);
            }
        }
        if let Some(d) = self.direction {
            let value = if watts > 0.0 {
                d.discharge
            } else if watts < 0.0 {
                d.charge
            } else {
                d.idle
            };
            out.push(RegisterWrite {
                addr: d.addr,
                values: vec![value],
            });
        }
        Ok(out)
    }

    /// Writes that hand control back to the device.
    pub fn release_writes(&self) -> Vec<RegisterWrite> {
        self.release.iter().map(FixedWrite::write).collect()
    }
}

/// What a production limit register counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitUnit {
    /// Percent of the device's rated power.
    Percent,
    /// Watts.
    Watts,
}

/// Production (curtailment) limit control.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitControl {
    /// In `unit` after scaling (kW registers are folded into `scale`).
    pub register: ValueRegister,
    pub unit: LimitUnit,
    pub enable: Vec<FixedWrite>,
    pub release: Vec<FixedWrite>,
    pub revert_timeout: Option<RevertTimeout>,
}

/// Why a limit cannot be written.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error("the limit register counts in % of rated power, but no rated power is known")]
    NoRating,
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

impl LimitControl {
    /// Writes that cap production at `limit_w`; `rated_w` is the 100 % of a
    /// percentage register. Order: revert timer, enable writes, limit.
    pub fn writes(
        &self,
        limit_w: f64,
        rated_w: Option<f64>,
        revert_s: u32,
    ) -> Result<Vec<RegisterWrite>, LimitError> {
        if !limit_w.is_finite() {
            return Err(EncodeError::NotFinite(limit_w).into());
        }
        let value = match self.unit {
            LimitUnit::Watts => limit_w.max(0.0),
            LimitUnit::Percent => {
                let rated = rated_w.filter(|r| *r > 0.0).ok_or(LimitError::NoRating)?;
                (limit_w / rated * 100.0).clamp(0.0, 100.0)
            }
        };
        let mut out = Vec::new();
        if let Some(r) = &self.revert_timeout {
            out.push(r.write(revert_s)?);
        }
        out.extend(self.enable.iter().map(FixedWrite::write));
        out.push(self.register.write(value)?);
        Ok(out)
    }

    /// Writes that lift the limit.
    pub fn release_writes(&self) -> Vec<RegisterWrite> {
        self.release.iter().map(FixedWrite::write).collect()
    }
}

/// Everything a profile lets the agent steer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileControls {
    pub ess_power: Option<EssControl>,
    pub production_limit: Option<LimitControl>,
}
