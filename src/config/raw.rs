//! Serde shapes of each config section, with their defaults.
//!
//! Sections that need no cross-checking beyond their own values are used as they
//! are (`SiteConfig`, `StorageConfig`, ...); the others are resolved in `resolve.rs`.

use std::path::PathBuf;

use serde::Deserialize;

use super::values::{AuthMode, Energy, Parity, Power};

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
    pub max_import: Option<super::values::PowerShare>,
    pub max_export: Option<super::values::PowerShare>,
    /// §14a dimming: what the controllable consumers may draw, beside the
    /// household's own import.
    pub max_consumption: Option<super::values::Power>,
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

/// The MQTT uplink (`docs/mqtt.md`). Only `url` is required.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct MqttConfig {
    /// `mqtt://host[:port]` (default port 1883) or `mqtts://host[:port]` (8883).
    pub url: String,
    /// First topic level; the root is `{prefix}/{gateway_id}`.
    pub prefix: String,
    /// `"5"` or `"3.1.1"`. Not given: MQTT 5, and 3.1.1 from then on if the
    /// broker closes the connection at CONNECT under 5 (`docs/mqtt.md`).
    pub protocol: Option<MqttProtocol>,
    /// Default: `sitegate-{gateway_id}`. Must stay the same across restarts so the
    /// broker keeps the persistent session.
    pub client_id: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    /// PEM file of the CA(s) that signed the broker's certificate; default: the
    /// system's roots. Only with `mqtts://`.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate (chain) and its key, for brokers that want mutual TLS.
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub keep_alive_s: u64,
    /// How long the broker keeps the session (subscription, queued requests) while
    /// the agent is away. MQTT 5 only; 3.1.1 brokers keep it until they decide.
    pub session_expiry_s: u32,
    /// Telemetry older than this is evicted from the outbox, oldest first.
    pub outbox_max_age_h: u64,
    /// The outbox is kept below this size, oldest first.
    pub outbox_max_mb: u64,
    /// Backlog messages per second at most after a reconnect (live data is extra).
    pub drain_rate: u32,
    /// Demand an API token (`"token"` in the payload) on every RPC request.
    pub require_token: bool,
    /// The largest incoming message the client reads, in KiB. MQTT 5 tells the
    /// broker at connect (it then drops bigger messages for us); 3.1.1 cannot.
    pub max_incoming_kb: u32,
    /// The largest message the uplink sends, in KiB: the broker's limit
    /// (AWS IoT Core takes 128 KB). An RPC answer over it is answered with a
    /// problem that says so, never dropped.
    pub max_outgoing_kb: u32,
}

impl MqttConfig {
    /// The protocol the uplink starts with.
    pub fn protocol(&self) -> MqttProtocol {
        self.protocol.unwrap_or_default()
    }
}

impl Default for MqttConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            prefix: "sitegate".to_string(),
            protocol: None,
            client_id: None,
            username: None,
            password: None,
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
            keep_alive_s: 30,
            session_expiry_s: 86_400,
            outbox_max_age_h: 7 * 24,
            outbox_max_mb: 256,
            drain_rate: 200,
            require_token: false,
            max_incoming_kb: 4096,
            max_outgoing_kb: 1024,
        }
    }
}

/// The MQTT protocol version the uplink speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
pub enum MqttProtocol {
    #[default]
    #[serde(rename = "5")]
    V5,
    #[serde(rename = "3.1.1")]
    V311,
}

/// Where the broker is, from [`MqttConfig::url`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerAddr {
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

impl MqttConfig {
    /// Parses `url`: `mqtt://` or `mqtts://`, a host name or IP (`[v6]` bracketed),
    /// an optional port, nothing after it.
    pub fn broker(&self) -> Result<BrokerAddr, String> {
        let (tls, rest) = if let Some(r) = self.url.strip_prefix("mqtts://") {
            (true, r)
        } else if let Some(r) = self.url.strip_prefix("mqtt://") {
            (false, r)
        } else {
            return Err(format!(
                "{:?} must start with mqtt:// or mqtts://",
                self.url
            ));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let default_port = if tls { 8883 } else { 1883 };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{:?}: unclosed [ in the host", self.url))?;
            match after.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None if after.is_empty() => (host, None),
                None => {
                    return Err(format!(
                        "{:?}: unexpected {after:?} after the host",
                        self.url
                    ))
                }
            }
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        let port = match port {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("{:?}: the port must be 1 to 65535", self.url))?,
        };
        let host_ok = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':'));
        if !host_ok {
            return Err(format!(
                "{:?} has no valid host, e.g. mqtts://broker.example.com:8883",
                self.url
            ));
        }
        Ok(BrokerAddr {
            host: host.to_string(),
            port,
            tls,
        })
    }
}
