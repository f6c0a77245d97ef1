//! The agent's configuration: one TOML file, parsed into types that cannot be wrong.
//!
//! Loading happens in three steps: TOML syntax, then each section is deserialized on
//! its own (so one bad entry does not hide the next; unknown keys are collected, not
//! fatal at first sight), then a cross-reference pass. Every problem found is
//! reported at once with its TOML path. Nothing here starts a task or opens a socket.

pub mod capacity;
pub mod csip;
pub mod csip_files;
pub mod eebus;
mod gateway_id;
pub mod live_change;
mod load;
pub mod log_level;
mod modbus_server;
mod ops;
pub mod patch;
pub mod pmin;
mod problem;
pub mod profiles;
mod raw;
pub mod redact;
mod resolve;
mod simulator;
mod site_rates;
pub mod size_floor;
pub mod tls;
pub mod tls_pair;
mod values;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use csip::CsipConfig;
pub use eebus::EebusConfig;
pub use gateway_id::GatewayIdSource;
pub use load::{parse, parse_in, text_sha256, ConfigError};
pub use modbus_server::{Cidr, ModbusServerConfig, Served, ServedSite, ServedUnit};
pub use ops::{OpsConfig, ROLLBACK_AFTER_S_DEFAULT, ROLLBACK_AFTER_S_MAX, ROLLBACK_AFTER_S_MIN};
pub use problem::Problem;
pub use raw::{
    BrokerAddr, ClockConfig, CurtailmentFulfilment, EssFallback, EssFulfilment, ExportOrder,
    GridLoopConfig, GridSignalConfig, GridSignalLevel, LogFormat, LoggingConfig, MqttConfig,
    MqttProtocol, PollingConfig, RateLimitConfig, SiteConfig, StorageConfig, SyncSource,
};
pub use resolve::SITE_UNIT_BASE;
pub use simulator::{SimResponseConfig, SimSiteConfig, SimulatorConfig};
pub use values::{AuthMode, Parity, Power, PowerShare, Scope};

use crate::model::{DeviceId, DeviceType};
use crate::profile::Profile;

/// The whole, validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Names this gateway in MQTT topics and logs.
    pub gateway_id: String,
    /// Where `gateway_id` came from (see `config/gateway_id.rs`).
    pub gateway_id_source: GatewayIdSource,
    pub http: HttpConfig,
    pub storage: StorageConfig,
    pub polling: PollingConfig,
    pub logging: LoggingConfig,
    pub clock: ClockConfig,
    /// The operations channel (`[ops]`): how a config change is watched.
    pub ops: OpsConfig,
    pub sites: Vec<SiteConfig>,
    pub buses: Vec<BusConfig>,
    pub devices: Vec<DeviceConfig>,
    pub mqtt: Option<MqttConfig>,
    /// The Modbus server (`[modbus_server]`); `None`: off.
    pub modbus_server: Option<ModbusServerConfig>,
    /// The sites' CSIP-AUS clients (`[csip_aus]`), the enabled ones.
    pub csip: Vec<csip::CsipConfig>,
    /// The site's EEBus node (`[eebus]`), when enabled.
    pub eebus: Option<eebus::EebusConfig>,
    /// How the simulated devices respond (read by the simulator only).
    pub simulator: SimulatorConfig,
    /// Where named register-map profiles are looked for before the built-in ones.
    pub profiles_dir: PathBuf,
    /// Problems `check-config` reports (exit 78) and `config.put` refuses
    /// like any other, but `run` starts anyway: the TLS files `[mqtt]` names
    /// (unreadable, not a CA, a key that does not match its certificate: the
    /// uplink retries with backoff and `/readyz` says why, while polling,
    /// storing and steering go on), a plain HTTP listener beyond loopback
    /// under `auth = "tokens"` (a site upgraded onto such a config keeps
    /// running; tokens sent to it from the network are answered 401), and
    /// the HTTPS certificate files (the agent then does not start).
    pub file_problems: Vec<Problem>,
    /// The hex SHA-256 of the text this config was parsed from.
    pub text_sha256: String,
    /// The file this config was read from ([`Config::load`]); `None` for
    /// text parsed in memory (the demo, tests).
    pub file: Option<PathBuf>,
}

/// The local HTTP API.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub listen: Vec<SocketAddr>,
    pub auth: AuthMode,
    pub tokens: Vec<TokenConfig>,
    /// Serve `GET /metrics`.
    pub metrics: bool,
    /// Longest a request may take before it is answered 503 `timeout`.
    pub request_timeout_ms: u64,
    pub rate_limit: RateLimitConfig,
    /// Where HTTPS listens; empty without `tls`.
    pub https_listen: Vec<SocketAddr>,
    /// The HTTPS certificate, when HTTPS is served.
    pub tls: Option<HttpTls>,
    /// Tokens may cross a plain listener bound beyond loopback.
    pub allow_plain_tokens: bool,
}

/// Where the HTTPS certificate comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum HttpTls {
    /// Made by the agent and kept in the state directory (`https/`), with
    /// these names besides the host name and the controller's addresses.
    SelfSigned { names: Vec<String> },
    /// A certificate chain and its private key, PEM.
    Files {
        cert_file: PathBuf,
        key_file: PathBuf,
    },
}

/// One API token: its name, the SHA-256 of its plaintext, and its scopes.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    pub name: String,
    pub sha256: [u8; 32],
    pub scopes: Vec<Scope>,
}

impl TokenConfig {
    /// A hash of one hex digit repeated (`"0000…"`, as the annotated example
    /// ships): no token hashes to it, so it lets nobody in.
    pub fn is_placeholder(&self) -> bool {
        self.sha256
            .iter()
            .all(|b| *b == self.sha256[0] && b >> 4 == b & 0xf)
    }
}

/// One Modbus connection, owned by one bus task.
#[derive(Debug, Clone, PartialEq)]
pub struct BusConfig {
    pub name: String,
    pub transport: Transport,
    /// Per-request response timeout.
    pub timeout_ms: u64,
}

/// How a bus reaches its devices.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Tcp { host: String, port: u16 },
    Rtu(RtuConfig),
}

/// A serial RS-485 line.
#[derive(Debug, Clone, PartialEq)]
pub struct RtuConfig {
    pub path: PathBuf,
    pub baud: u32,
    pub parity: Parity,
    pub data_bits: u8,
    pub stop_bits: u8,
}

/// Which register map a device is read with.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileRef {
    /// Discover the SunSpec model chain.
    Sunspec,
    /// A register-map profile, found and validated while the config was loaded
    /// (by name in `profiles_dir`, built in, or by path).
    Registers(Arc<Profile>),
}

/// One device, fully resolved: its reference is explicit or derived, its site and
/// bus exist.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceConfig {
    pub id: DeviceId,
    pub reference: String,
    pub name: String,
    pub device_type: DeviceType,
    pub site: String,
    pub bus: String,
    pub unit_id: u8,
    pub profile: ProfileRef,
    pub poll_interval_ms: u64,
    /// Flip the sign of power readings so they match the vocabulary.
    pub invert_power: bool,
    /// Rated power in W (overrides what the device reports).
    pub rated_power_w: Option<f64>,
    /// Usable capacity in Wh (batteries).
    pub capacity_wh: Option<f64>,
    pub soc_min: Option<f64>,
    pub soc_max: Option<f64>,
    pub max_charge_power_w: Option<f64>,
    pub max_discharge_power_w: Option<f64>,
    /// Order for `priority` fulfilment (lower first; ties keep config order).
    pub priority: Option<u32>,
    /// Meters: how old the power a reading shows can be, at most: the meter's
    /// refresh period plus its reporting delay (default
    /// [`DEFAULT_REPORT_LAG_MS`]). The grid loop trusts no meter reading that
    /// can show the power of before its own last change.
    pub report_lag_ms: u64,
    /// The unit id the Modbus server answers for this device as: `None`
    /// its own `unit_id`, `Some(0)` not served.
    pub modbus_server_unit_id: Option<u8>,
    /// The Modbus server reads registers the agent does not poll from the
    /// device, when the bus is idle (off: exception 02).
    pub modbus_server_forward_reads: bool,
    /// The Modbus server passes writes on to the device when the bus is
    /// idle, but none to a register steering writes (off: exception 01).
    pub modbus_server_forward_writes: bool,
}

/// A meter that refreshes every second and reports half a second late.
pub const DEFAULT_REPORT_LAG_MS: u64 = 1500;

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::single("", format!("cannot read {}: {e}", path.display())))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut config = parse_in(&text, dir)?;
        config.file = Some(path.to_path_buf());
        Ok(config)
    }

    /// What `check-config` warns about without failing (a default gateway id
    /// that cloned controllers would share).
    pub fn warnings(&self) -> Vec<Problem> {
        gateway_id::warning(&self.gateway_id, self.gateway_id_source)
            .into_iter()
            .chain(capacity::warning(self))
            .chain(self.no_token_warning())
            .chain(self.placeholder_token_warnings())
            .collect()
    }

    /// A token whose hash is one digit repeated (`"0000…"`, as the annotated
    /// example ships): no token hashes to it, so it lets nobody in.
    fn placeholder_token_warnings(&self) -> Vec<Problem> {
        self.http
            .tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_placeholder())
            .map(|(i, t)| {
                Problem::new(
                    format!("http.tokens[{i}].sha256"),
                    format!(
                        "token {:?} has a placeholder hash ({}…): no token matches it; make one with `sitegate token new --name {}`",
                        t.name,
                        &hex::encode(t.sha256)[..8],
                        t.name
                    ),
                )
            })
            .collect()
    }

    /// `auth = "tokens"` without a token: the agent runs (health, readiness,
    /// metrics, polling, the uplink) and every token route answers 401 until
    /// one is added (SIGHUP reloads tokens). A package installs so.
    fn no_token_warning(&self) -> Option<Problem> {
        (self.http.auth == AuthMode::Tokens && self.http.tokens.is_empty()).then(|| {
            Problem::new(
                "http.tokens",
                "auth = \"tokens\" but no [[http.tokens]] is configured: every API call that needs a token answers 401 until one is added (make one with `sitegate token new`, then `systemctl reload sitegate`)",
            )
        })
    }

    /// Checks a gateway id given outside a file (`sitegate demo --gateway-id`)
    /// by the rule the file's `gateway_id` follows.
    pub fn check_gateway_id(id: &str) -> Result<(), String> {
        resolve::identifier(id)
    }

    pub fn site(&self, reference: &str) -> Option<&SiteConfig> {
        self.sites.iter().find(|s| s.reference == reference)
    }

    pub fn device(&self, reference: &str) -> Option<&DeviceConfig> {
        self.devices.iter().find(|d| d.reference == reference)
    }

    /// Devices on one bus, in config order.
    pub fn devices_on_bus<'a>(&'a self, bus: &'a str) -> impl Iterator<Item = &'a DeviceConfig> {
        self.devices.iter().filter(move |d| d.bus == bus)
    }
}

#[cfg(test)]
mod tests;
