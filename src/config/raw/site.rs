//! Serde shapes of a `[[sites]]` table: the grid connection, the grid
//! operator's signal, the grid loop, and the fulfilment and fallback rules,
//! with their defaults.
//!
//! Shapes and defaults only; `resolve/sites.rs` checks them against the rest.

use serde::Deserialize;

use super::{default_poll_interval_ms, default_true};
use crate::config::values::Power;

/// A site: its grid connection, its fulfilment rules and its fallback.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SiteConfig {
    pub reference: String,
    pub name: String,
    /// Most the site may draw from the grid.
    pub max_import: Option<Power>,
    /// Most the site may feed into the grid.
    pub max_export: Option<Power>,
    /// The 100 % of percentage curtailment; default: the inverters' rated sum.
    pub rated_production_power: Option<Power>,
    #[serde(default)]
    pub ess_fulfilment: EssFulfilment,
    #[serde(default)]
    pub curtailment_fulfilment: CurtailmentFulfilment,
    #[serde(default)]
    pub ess_fallback: EssFallback,
    /// How often the control loop re-evaluates the site's signal.
    #[serde(default = "default_control_interval_ms")]
    pub control_interval_ms: u64,
    /// Revert timeout written with every setpoint (SunSpec `*_RvrtTms`): a device
    /// that hears nothing for this long goes back to its own defaults. The agent
    /// refreshes its setpoints at half this time.
    #[serde(default = "default_revert_timeout_s")]
    pub revert_timeout_s: u16,
    /// How the grid limits are held at the meter.
    #[serde(default)]
    pub grid_loop: GridLoopConfig,
    /// A grid operator's local signals (digital inputs on Modbus I/O modules).
    #[serde(default)]
    pub grid_signals: Vec<GridSignalConfig>,
}

/// A grid operator's local signal: a ripple-control receiver or control box
/// wired to the digital inputs of a Modbus I/O module. The inputs make a number
/// (input 1 in bit 0) and each level maps a number to limits that win over
/// every partner signal (`docs/steering.md`, "Grid-operator signals").
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GridSignalConfig {
    pub name: String,
    /// The `[[buses]]` entry the module is on.
    pub bus: String,
    pub unit_id: u8,
    /// A built-in module profile (`generic-di`, `generic-di-register`); `table`,
    /// `register` and `inputs` override it or stand without it.
    pub module: Option<String>,
    pub table: Option<crate::register::plan::Table>,
    pub register: Option<u16>,
    pub inputs: Option<u8>,
    #[serde(default = "default_poll_interval_ms")]
    pub poll_interval_ms: u64,
    /// The input value whose level applies while the module cannot be read
    /// (and before its first read); absent: the tightest of every level.
    pub lost_value: Option<u16>,
    pub levels: Vec<GridSignalLevel>,
}

impl GridSignalConfig {
    /// Where the inputs are: the module profile, overridden by the explicit
    /// keys. `None` when neither says.
    pub fn block(&self) -> Option<crate::register::io::InputBlock> {
        let base = self
            .module
            .as_deref()
            .and_then(crate::register::io::module)
            .map(|m| m.block);
        Some(crate::register::io::InputBlock {
            table: self.table.or(base.map(|b| b.table))?,
            register: self.register.or(base.map(|b| b.register))?,
            inputs: self.inputs.or(base.map(|b| b.inputs))?,
        })
    }
}

/// One value of a grid signal's inputs and the limits it sets.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GridSignalLevel {
    /// The inputs as a number, input 1 in bit 0.
    pub value: u16,
    pub max_import: Option<crate::config::values::PowerShare>,
    pub max_export: Option<crate::config::values::PowerShare>,
    /// §14a dimming: what the controllable consumers may draw, beside the
    /// household's own import.
    pub max_consumption: Option<crate::config::values::Power>,
}

/// The grid loop of a site (`docs/steering.md`, "The grid loop").
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GridLoopConfig {
    /// Hold `max_import`/`max_export` at the grid meter (closed loop). Off: the
    /// limits only clamp what the agent itself commands to the storage.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Too much export: charge the storage first, or curtail production first.
    #[serde(default)]
    pub export_order: ExportOrder,
    /// Largest move per second away from a held limit, in % of the rated power
    /// of the devices moved (corrections towards the limit are never slowed).
    #[serde(default = "default_ramp_percent_per_s")]
    pub ramp_percent_per_s: f64,
}

impl Default for GridLoopConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            export_order: ExportOrder::default(),
            ramp_percent_per_s: default_ramp_percent_per_s(),
        }
    }
}

fn default_ramp_percent_per_s() -> f64 {
    25.0
}

/// What the grid loop does first about too much export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportOrder {
    /// Charge the storage where it has room, then curtail: energy is kept.
    #[default]
    StorageFirst,
    /// Curtail production, then charge the storage.
    CurtailFirst,
}

fn default_control_interval_ms() -> u64 {
    1000
}
fn default_revert_timeout_s() -> u16 {
    60
}

/// How a site-level storage target is spread over batteries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
pub enum EssFulfilment {
    #[default]
    #[serde(rename = "proportional")]
    Proportional,
    #[serde(rename = "priority")]
    Priority,
    #[serde(rename = "soc_balance", alias = "socBalance")]
    SocBalance,
}

impl EssFulfilment {
    /// The camelCase name used on the wire.
    pub const fn wire_name(self) -> &'static str {
        match self {
            EssFulfilment::Proportional => "proportional",
            EssFulfilment::Priority => "priority",
            EssFulfilment::SocBalance => "socBalance",
        }
    }
}

/// How a site-level production limit is spread over inverters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CurtailmentFulfilment {
    #[default]
    Proportional,
    Priority,
    Dynamic,
}

impl CurtailmentFulfilment {
    pub const fn wire_name(self) -> &'static str {
        match self {
            CurtailmentFulfilment::Proportional => "proportional",
            CurtailmentFulfilment::Priority => "priority",
            CurtailmentFulfilment::Dynamic => "dynamic",
        }
    }
}

/// What the storage does when no ESS entry is active.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EssFallback {
    /// Remote control released: the storage runs its own logic.
    #[default]
    Auto,
    /// 0 W at every storage device.
    Idle,
}
