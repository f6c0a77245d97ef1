//! Controls of a register-map profile: the registers a profile names for ESS
//! power, production limit, enable and revert timeout, and the recipe that drives
//! them. The profile loader builds a [`ProfileControls`]; this file only writes.

use super::{RegWrite, WriteError, WritePlan};
use crate::modbus::codec::{self, ValueType, WordOrder};
use crate::modbus::plan::Span;
use crate::steering::decide::Command;

/// What a setpoint register holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ControlUnit {
    /// Watts (ESS: + discharge).
    Watts,
    /// Percent of `ProfileControls::rated_w`.
    PercentOfRated,
}

/// One setpoint register: engineering value = raw × `scale`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegisterControl {
    pub addr: u16,
    pub ty: ValueType,
    pub order: WordOrder,
    pub scale: f64,
    pub unit: ControlUnit,
}

/// A register that switches remote control on and off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnableControl {
    pub addr: u16,
    pub on: u16,
    pub off: u16,
}

/// The controls a profile offers. Holding registers only.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileControls {
    pub ess_power: Option<RegisterControl>,
    pub production_limit: Option<RegisterControl>,
    pub enable: Option<EnableControl>,
    /// Revert timeout in seconds, written before the setpoint.
    pub revert_timeout: Option<(u16, ValueType)>,
    /// The 100 % of percentage registers.
    pub rated_w: Option<f64>,
}

impl ProfileControls {
    /// Profiles need no calibration read; the read-back covers nothing yet.
    pub fn span(&self) -> Option<Span> {
        None
    }

    pub fn plan(&self, cmd: Command, revert_s: u16) -> Result<WritePlan, WriteError> {
        let mut plan = WritePlan {
            writes: Vec::new(),
            expect: Vec::new(),
        };
        let (reg, value) = match cmd {
            Command::EssPower(w) => (
                self.ess_power
                    .ok_or(WriteError::NoControl("ESS power register"))?,
                w,
            ),
            Command::ProductionLimit(w) => (
                self.production_limit
                    .ok_or(WriteError::NoControl("production limit register"))?,
                w,
            ),
            Command::ProductionRelease if self.enable.is_none() => (
                self.production_limit
                    .ok_or(WriteError::NoControl("production limit register"))?,
                self.rated_w.unwrap_or(f64::INFINITY),
            ),
            // Without an enable register, idle is the nearest thing to a release.
            Command::EssRelease if self.enable.is_none() => (
                self.ess_power
                    .ok_or(WriteError::NoControl("ESS power register"))?,
                0.0,
            ),
            Command::EssRelease | Command::ProductionRelease => {
                if let Some(e) = self.enable {
                    self.push(&mut plan, e.addr, vec![e.off]);
                }
                return Ok(plan);
            }
        };
        if let Some((addr, ty)) = self.revert_timeout {
            let words = codec::encode(f64::from(revert_s), ty, WordOrder::HighFirst)
                .map_err(|e| WriteError::Encode(e.to_string()))?;
            self.push(&mut plan, addr, words);
        }
        let engineering = match reg.unit {
            ControlUnit::Watts => value,
            ControlUnit::PercentOfRated => {
                let rated = self
                    .rated_w
                    .filter(|r| *r > 0.0)
                    .ok_or(WriteError::Missing {
                        what: "rated power",
                        detail: "the profile gives the limit in % but no rating is known".into(),
                    })?;
                (value / rated * 100.0).min(100.0)
            }
        };
        let engineering = if engineering.is_finite() {
            engineering
        } else {
            100.0
        };
        let raw = engineering / reg.scale;
        let words =
            codec::encode(raw, reg.ty, reg.order).map_err(|e| WriteError::Encode(e.to_string()))?;
        self.push(&mut plan, reg.addr, words);
        if let Some(e) = self.enable {
            self.push(&mut plan, e.addr, vec![e.on]);
        }
        Ok(plan)
    }

    fn push(&self, plan: &mut WritePlan, addr: u16, values: Vec<u16>) {
        plan.writes.push(RegWrite { addr, values });
    }
}
