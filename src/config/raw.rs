//! Serde shapes of each config section, with their defaults.
//!
//! Sections that need no cross-checking beyond their own values are used as they
//! are (`SiteConfig`, `StorageConfig`, ...); the others are resolved in `resolve.rs`.

use std::path::PathBuf;

use serde::Deserialize;

use super::values::{AuthMode, Energy, Parity, Power};

fn default_listen() -> Vec<String> {
    vec!["0.0.0.0:8080".to_string()]
}

#[derive(Debug, Deserialize)]
pub(super) struct RawHttp {
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    #[serde(default)]
    pub auth: AuthMode,
    #[serde(default)]
    pub tokens: Vec<RawToken>,
}

impl Default for RawHttp {
    fn default() -> Self {
        Self {
            listen: default_listen(),
            auth: AuthMode::default(),
            tokens: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct RawToken {
    pub name: String,
    pub sha256: String,
    pub scopes: Vec<super::values::Scope>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawBus {
    pub name: String,
    pub tcp: Option<String>,
    pub rtu: Option<RawRtu>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    1000
}

#[derive(Debug, Deserialize)]
pub(super) struct RawRtu {
    pub path: PathBuf,
    #[serde(default = "default_baud")]
    pub baud: u32,
    #[serde(default)]
    pub parity: Parity,
    #[serde(default = "default_data_bits", alias = "dataBits")]
    pub data_bits: u8,
    #[serde(default = "default_stop_bits", alias = "stopBits")]
    pub stop_bits: u8,
}

fn default_baud() -> u32 {
    9600
}
fn default_data_bits() -> u8 {
    8
}
fn default_stop_bits() -> u8 {
    1
}

#[derive(Debug, Deserialize)]
pub(super) struct RawDevice {
    pub reference: Option<String>,
    pub name: String,
    #[serde(rename = "type")]
    pub device_type: crate::model::DeviceType,
    pub site: String,
    pub bus: String,
    pub unit_id: u8,
    #[serde(default = "default_profile")]
    pub profile: String,
    #[serde(default = "default_poll_interval_ms")]
    pub poll_interval_ms: u64,
    #[serde(default)]
    pub invert_power: bool,
    pub rated_power: Option<Power>,
    pub capacity: Option<Energy>,
    pub soc_min: Option<f64>,
    pub soc_max: Option<f64>,
    pub max_charge_power: Option<Power>,
    pub max_discharge_power: Option<Power>,
    /// Order for `priority` fulfilment: lower goes first; ties keep config order.
    pub priority: Option<u32>,
}

fn default_profile() -> String {
    "sunspec".to_string()
}
fn default_poll_interval_ms() -> u64 {
    1000
}

/// A site: its grid connection, its fulfilment rules and its fallback.
#[derive(Debug, Clone, Deserialize)]
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

/// The SQLite measurement store.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct StorageConfig {
    pub path: PathBuf,
    /// Longest time a measurement waits in memory before it is committed: the
    /// most a power cut can lose.
    pub flush_interval_ms: u64,
    /// Samples per committed batch at most.
    pub batch_size: usize,
    /// Raw samples older than this are deleted.
    pub retention_days: u32,
    /// Rollups (minute, hour) older than this are deleted.
    pub rollup_retention_days: u32,
    /// The database file is kept below this size by deleting the oldest data.
    pub max_size_mb: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("/var/lib/sitegate/sitegate.db"),
            flush_interval_ms: 1000,
            batch_size: 50_000,
            retention_days: 35,
            rollup_retention_days: 400,
            max_size_mb: 2048,
        }
    }
}

/// Polling behaviour common to every bus.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct PollingConfig {
    /// First wait after a failed poll; doubles per failure.
    pub min_backoff_ms: u64,
    /// Longest wait between attempts at a failing device.
    pub max_backoff_ms: u64,
    /// Unused registers a read may span to save a request.
    pub coalesce_gap: u16,
}

impl Default for PollingConfig {
    fn default() -> Self {
        Self {
            min_backoff_ms: 1000,
            max_backoff_ms: 60_000,
            coalesce_gap: 16,
        }
    }
}

/// Log output.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LoggingConfig {
    /// A tracing filter such as `info` or `sitegate=debug,info`.
    pub level: String,
    pub format: LogFormat,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self {
            level: "info".to_string(),
            format: LogFormat::Text,
        }
    }
}

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Plain lines without timestamps or colour: what journald wants.
    #[default]
    Text,
    Json,
}

/// The MQTT uplink.
#[derive(Debug, Clone, Deserialize)]
pub struct MqttConfig {
    /// `mqtt://host:port` or `mqtts://host:port`.
    pub url: String,
    #[serde(default = "default_prefix")]
    pub prefix: String,
}

fn default_prefix() -> String {
    "sitegate".to_string()
}
