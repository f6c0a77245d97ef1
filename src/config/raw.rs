//! Serde shapes of each config section, with their defaults.
//!
//! Sections that need no cross-checking beyond their own values are used as they
//! are (`SiteConfig`, `StorageConfig`, ...); the others are resolved in `resolve.rs`.
//! A site's tables are `raw/site.rs`, the uplink's `raw/mqtt.rs`.

use std::path::PathBuf;

use serde::Deserialize;

use super::values::{AuthMode, Energy, Parity, Power};

mod mqtt;
mod site;

pub use mqtt::{BrokerAddr, MqttConfig, MqttProtocol};
pub use site::{
    CurtailmentFulfilment, EssFallback, EssFulfilment, ExportOrder, GridLoopConfig,
    GridSignalConfig, GridSignalLevel, SiteConfig,
};

fn default_listen() -> Vec<String> {
    vec!["127.0.0.1:8080".to_string()]
}

fn default_true() -> bool {
    true
}

fn default_request_timeout_ms() -> u64 {
    30_000
}

#[derive(Debug, Deserialize)]
pub(super) struct RawHttp {
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    #[serde(default)]
    pub auth: AuthMode,
    #[serde(default)]
    pub tokens: Vec<RawToken>,
    /// Serve `GET /metrics` (no token needed, like `/healthz`).
    #[serde(default = "default_true")]
    pub metrics: bool,
    /// The most a request may take, body included; beyond it: 503 `timeout`.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    #[serde(default)]
    pub rate_limit: RateLimitConfig,
    /// Where HTTPS listens (with `tls`).
    #[serde(default)]
    pub https_listen: Vec<String>,
    /// `"self-signed"`, or `{ cert_file = "...", key_file = "..." }`;
    /// resolved in `resolve/http.rs`.
    #[serde(default)]
    pub tls: Option<toml::Value>,
    /// More names for a self-signed certificate (besides the host name and
    /// the controller's addresses).
    #[serde(default)]
    pub tls_names: Vec<String>,
    /// Lets tokens cross a plain listener bound beyond loopback.
    #[serde(default)]
    pub allow_plain_tokens: bool,
}

impl Default for RawHttp {
    fn default() -> Self {
        Self {
            https_listen: Vec::new(),
            tls: None,
            tls_names: Vec::new(),
            allow_plain_tokens: false,
            listen: default_listen(),
            auth: AuthMode::default(),
            tokens: Vec::new(),
            metrics: true,
            request_timeout_ms: default_request_timeout_ms(),
            rate_limit: RateLimitConfig::default(),
        }
    }
}

/// Requests each token (or `anonymous`) may make over HTTP: a token bucket
/// refilled at `requests_per_s` holding at most `burst`. `requests_per_s = 0`
/// turns the limit off.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(default)]
pub struct RateLimitConfig {
    pub requests_per_s: f64,
    pub burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            requests_per_s: 100.0,
            burst: 200,
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
    /// The profile's variant, for a family whose devices do not tell theirs.
    pub variant: Option<String>,
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
    /// Meters: how old the power a reading shows can be, at most (the meter's
    /// refresh period plus its reporting delay), ms.
    pub report_lag_ms: Option<u64>,
    /// The unit id the Modbus server answers for this device as (0: not
    /// served); default its own `unit_id`.
    pub modbus_server_unit_id: Option<u8>,
    /// The Modbus server reads registers the agent does not poll from the
    /// device (off: exception 02).
    #[serde(default)]
    pub modbus_server_forward_reads: bool,
    /// The Modbus server passes writes on to the device, but for the
    /// registers steering writes (off: exception 01).
    #[serde(default)]
    pub modbus_server_forward_writes: bool,
}

fn default_profile() -> String {
    "sunspec".to_string()
}
fn default_poll_interval_ms() -> u64 {
    1000
}

/// The SQLite measurement store.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct StorageConfig {
    pub path: PathBuf,
    /// Longest time a measurement waits in memory before its commit begins: a
    /// power cut loses at most this interval's measurements and those of the
    /// commit being written (see docs/store.md).
    pub flush_interval_ms: u64,
    /// Samples per committed batch at most.
    pub batch_size: usize,
    /// How often staged samples are compacted into raw-sample chunks and
    /// rollups: longer writes less (fewer partly filled pages per series),
    /// shorter leaves readers fewer staged samples to decode.
    pub compact_interval_s: u64,
    /// How often the writer starts a retention pass (the first this long
    /// after the store opens), seconds.
    pub retention_interval_s: u64,
    /// Raw samples older than this are deleted.
    pub retention_days: u32,
    /// Hour rollups older than this are deleted.
    pub rollup_retention_days: u32,
    /// Minute rollups older than this are deleted (between `retention_days`
    /// and `rollup_retention_days`: a year of minutes costs 60 times a year of
    /// hours). Unset: [`DEFAULT_MINUTE_ROLLUP_DAYS`] within those bounds
    /// ([`StorageConfig::minute_rollup_days`]).
    pub minute_rollup_retention_days: Option<u32>,
    /// The database file is kept below this size by deleting the oldest data.
    pub max_size_mb: u64,
    /// The WAL is copied into the database file (a checkpoint) once it holds
    /// this much, MB; the WAL file beside the database is kept within a third
    /// more. Larger writes less (a page rewritten between two checkpoints is
    /// copied once), smaller takes less room. Unset:
    /// [`DEFAULT_WAL_CHECKPOINT_MB`], at most `max_size_mb`
    /// ([`StorageConfig::wal_checkpoint_bytes`]).
    pub wal_checkpoint_mb: Option<u64>,
    /// Samples kept in memory at most while commits fail (a full or failing
    /// disk): they are committed when it allows; past it the oldest go.
    pub buffer_samples: usize,
    /// `/readyz` says a damaged database was set aside for this long at most
    /// (or until its file is removed), hours.
    pub damaged_notice_h: u64,
    /// Files up to this size get the full integrity check before the store
    /// opens; larger ones in the background right after start, MB.
    pub full_check_max_mb: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("/var/lib/sitegate/sitegate.db"),
            flush_interval_ms: 1000,
            batch_size: 50_000,
            compact_interval_s: 600,
            retention_interval_s: 60,
            retention_days: 35,
            rollup_retention_days: 400,
            minute_rollup_retention_days: None,
            max_size_mb: 2048,
            wal_checkpoint_mb: None,
            buffer_samples: 200_000,
            damaged_notice_h: 168,
            full_check_max_mb: 512,
        }
    }
}

/// The WAL's checkpoint threshold unless configured (or the cap is smaller),
/// MiB: several rounds of the staging ring at 1,000 devices (docs/store.md,
/// "Flash wear").
pub const DEFAULT_WAL_CHECKPOINT_MB: u64 = 96;

/// Minute rollups are kept this many days unless configured (or raw samples
/// are kept longer).
pub const DEFAULT_MINUTE_ROLLUP_DAYS: u32 = 90;

impl StorageConfig {
    /// The WAL's checkpoint threshold, bytes: as configured, else
    /// [`DEFAULT_WAL_CHECKPOINT_MB`] and at most the cap (a WAL beside the
    /// file never larger than the file may be), at least 1 MiB.
    pub fn wal_checkpoint_bytes(&self) -> u64 {
        let mb = self
            .wal_checkpoint_mb
            .unwrap_or(DEFAULT_WAL_CHECKPOINT_MB.min(self.max_size_mb));
        mb.max(1).saturating_mul(1 << 20)
    }

    /// The days minute rollups are kept: as configured, else
    /// [`DEFAULT_MINUTE_ROLLUP_DAYS`] within `retention_days` and
    /// `rollup_retention_days`.
    pub fn minute_rollup_days(&self) -> u32 {
        self.minute_rollup_retention_days.unwrap_or(
            DEFAULT_MINUTE_ROLLUP_DAYS
                .max(self.retention_days)
                .min(self.rollup_retention_days.max(self.retention_days)),
        )
    }
}

/// Polling behaviour common to every bus.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct PollingConfig {
    /// First wait after the second failed poll in a row (a first failure is
    /// retried at the device's next poll); doubles per failure.
    pub min_backoff_ms: u64,
    /// Longest wait between attempts at a failing device.
    pub max_backoff_ms: u64,
    /// Unused registers a read may span to save a request.
    pub coalesce_gap: u16,
    /// How often a device's static points (settings, nameplate data, the
    /// control models' scale factors) are read again, s.
    pub static_refresh_s: u64,
}

impl PollingConfig {
    /// [`PollingConfig::static_refresh_s`] as a duration.
    pub fn static_refresh(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.static_refresh_s)
    }
}

impl Default for PollingConfig {
    fn default() -> Self {
        Self {
            min_backoff_ms: 1000,
            max_backoff_ms: 60_000,
            coalesce_gap: 16,
            static_refresh_s: DEFAULT_STATIC_REFRESH_S,
        }
    }
}

/// Static points are read again hourly by default.
pub const DEFAULT_STATIC_REFRESH_S: u64 = 3600;
/// At most a day apart.
pub const MAX_STATIC_REFRESH_S: u64 = 86_400;

/// The wall clock: where the agent learns whether it is synchronised, and
/// what counts as a step (`docs/operations.md`, "Time").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct ClockConfig {
    pub sync_source: SyncSource,
    /// The file systemd-timesyncd creates once it has synchronised the clock
    /// (for `sync_source = "timesyncd"`, and `"auto"` where the kernel's
    /// state cannot be read).
    pub timesync_file: PathBuf,
    /// A jump of the wall clock against the monotonic clock from this size
    /// is a step, ms.
    pub step_threshold_ms: u64,
}

impl Default for ClockConfig {
    fn default() -> Self {
        Self {
            sync_source: SyncSource::Auto,
            timesync_file: PathBuf::from("/run/systemd/timesync/synchronized"),
            step_threshold_ms: 2000,
        }
    }
}

/// Where the clock's synchronisation is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncSource {
    /// The kernel's NTP state (`adjtimex`: set by chrony, ntpd and
    /// timesyncd alike); where the service may not read it, timesyncd's file.
    #[default]
    Auto,
    Kernel,
    Timesyncd,
    /// Not watched: never reported as unsynchronised (steps are still found).
    None,
}

/// Log output.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
