//! Serde shapes of the `[mqtt]` table: the broker, its TLS files, the
//! session and its bounds, with their defaults.
//!
//! Shapes and defaults only; `resolve/storage.rs` checks the rest.

use std::path::PathBuf;

use serde::Deserialize;

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
