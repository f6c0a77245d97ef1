//! The controls a profile offers, as its file says them: which registers hold
//! a storage power or a production limit, in which unit, and which fixed words
//! enable and release remote control. Plain data; the recipes that turn a
//! command into writes are `modbus::control`'s. Every register here is a
//! holding register.

use crate::register::codec::{ValueType, WordOrder};

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

/// What a power register not in use holds: the register of the direction
/// not commanded (a split setpoint), or a power limit outside idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unused {
    /// 0 W (a device that counts only the commanded register).
    #[default]
    Zero,
    /// The device's rated power: no limit left at 0 W for the device's own
    /// logic after a release or its own timeout.
    Rated,
}

/// Charge and discharge power limits beside a signed or magnitude setpoint:
/// 0 W at idle (the device holds), the rated power with any other setpoint
/// and at release.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerLimits {
    pub charge: ValueRegister,
    pub discharge: ValueRegister,
}

/// What the device does on its own when the agent stops writing: after its
/// revert timer (the `revert_timeout` register's time) or `after_s`, it
/// writes these words itself. A statement about the device, for the
/// simulator and the docs; the agent never writes them.
#[derive(Clone, Debug, PartialEq)]
pub struct OnTimeout {
    pub after_s: Option<u32>,
    pub writes: Vec<FixedWrite>,
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
    /// Split setpoints: the register of the direction not commanded.
    pub unused: Unused,
    pub limits: Option<PowerLimits>,
    /// The setpoint's writes go out as one request.
    pub one_request: bool,
    pub on_timeout: Option<OnTimeout>,
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

/// Everything a profile lets the agent steer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileControls {
    pub ess_power: Option<EssControl>,
    pub production_limit: Option<LimitControl>,
}
