//! `[modbus_server]`: the Modbus TCP server (and RTU slave on a serial
//! line) that shares the site's devices and the site itself with other
//! systems (`docs/modbus-server.md`). The
//! section's serde shape, the resolved settings, and the client address
//! ranges it allows. Off unless the section is present.
//!
//! Data and parsing only: the checks are `resolve/modbus_server.rs`'s, and
//! nothing here opens a socket.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use serde::Deserialize;

use super::raw::RawRtu;
use super::values::PowerShare;
use super::RtuConfig;
use crate::model::DeviceId;

/// The section as written.
#[derive(Debug, Deserialize)]
pub(super) struct RawModbusServer {
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    /// Client address ranges (CIDR, or a bare address); default loopback only.
    #[serde(default = "default_allow")]
    pub allow: Vec<String>,
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    #[serde(default = "default_max_per_client")]
    pub max_connections_per_client: usize,
    #[serde(default = "default_requests_per_s")]
    pub requests_per_s: f64,
    #[serde(default = "default_burst")]
    pub burst: u32,
    #[serde(default = "default_idle_timeout_s")]
    pub idle_timeout_s: u64,
    #[serde(default = "default_stale_after_polls")]
    pub stale_after_polls: u32,
    #[serde(default = "default_forward_cache_ms")]
    pub forward_cache_ms: u64,
    #[serde(default)]
    pub sites: Vec<RawServedSite>,
    /// A serial line the server answers on as an RTU slave (the keys of a
    /// bus's `rtu`).
    pub serial: Option<RawRtu>,
}

/// One `[[modbus_server.sites]]` entry: a site's own unit id and whether a
/// SCADA may set its limits.
#[derive(Debug, Deserialize)]
pub(super) struct RawServedSite {
    pub site: String,
    pub unit_id: Option<u8>,
    #[serde(default)]
    pub control: bool,
    #[serde(default = "default_heartbeat_s")]
    pub heartbeat_s: u64,
    /// The export limit once the SCADA's heartbeat stops; absent: back to
    /// the configured limits.
    pub failsafe_export: Option<PowerShare>,
}

fn default_true() -> bool {
    true
}
fn default_listen() -> Vec<String> {
    vec!["127.0.0.1:5020".to_string()]
}
fn default_allow() -> Vec<String> {
    vec!["127.0.0.0/8".to_string(), "::1/128".to_string()]
}
fn default_max_connections() -> usize {
    16
}
fn default_max_per_client() -> usize {
    4
}
fn default_requests_per_s() -> f64 {
    50.0
}
fn default_burst() -> u32 {
    100
}
fn default_idle_timeout_s() -> u64 {
    60
}
fn default_stale_after_polls() -> u32 {
    3
}
fn default_forward_cache_ms() -> u64 {
    1000
}
fn default_heartbeat_s() -> u64 {
    60
}

/// The Modbus server, resolved: every address parsed, every unit id known
/// and unique.
#[derive(Debug, Clone, PartialEq)]
pub struct ModbusServerConfig {
    pub listen: Vec<SocketAddr>,
    /// Clients outside every range are closed at once.
    pub allow: Vec<Cidr>,
    /// Open connections at most over every listener.
    pub max_connections: usize,
    /// Open connections at most from one client address.
    pub max_connections_per_client: usize,
    /// Requests per second per connection (a token bucket of `burst`);
    /// past it the request is answered exception 06 (server busy).
    pub requests_per_s: f64,
    pub burst: u32,
    /// A connection silent this long is closed, s.
    pub idle_timeout_s: u64,
    /// A device's image older than this many of its poll intervals is
    /// answered exception 0x0B.
    pub stale_after_polls: u32,
    /// A forwarded read's answer serves the same read again this long, ms.
    pub forward_cache_ms: u64,
    /// What each unit id serves, sorted by unit id.
    pub units: Vec<ServedUnit>,
    /// The serial line it answers on as an RTU slave, if any.
    pub serial: Option<RtuConfig>,
}

impl ModbusServerConfig {
    /// What `unit` serves.
    pub fn unit(&self, unit: u8) -> Option<&Served> {
        self.units
            .binary_search_by_key(&unit, |u| u.unit_id)
            .ok()
            .map(|i| &self.units[i].served)
    }

    /// Whether `ip` may connect.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.allow.iter().any(|c| c.contains(ip))
    }
}

/// One unit id of the server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedUnit {
    pub unit_id: u8,
    pub served: Served,
}

/// What a unit id answers for.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    /// A device's registers as the agent last polled them.
    Device(DeviceId),
    /// A site as one SunSpec device.
    Site(ServedSite),
}

/// A site served as a SunSpec device.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedSite {
    pub site: String,
    /// A SCADA may write the site's export limit.
    pub control: bool,
    /// A SCADA limit holds this long after its last write, s.
    pub heartbeat_s: u64,
    /// The export limit after the heartbeat stopped; `None`: the configured
    /// limits alone.
    pub failsafe_export: Option<PowerShare>,
}

/// An address range: `192.168.1.0/24`, `::1/128`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// An IPv4 client seen through an IPv6 socket (`::ffff:a.b.c.d`) is that
/// IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("{s:?} is not an address range such as \"192.168.1.0/24\", \"::1/128\" or \"10.0.0.5\"")
        };
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr = canonical(addr.trim().parse::<IpAddr>().map_err(|_| bad())?);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(bad)?,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_contain_their_addresses_only() {
        let lan: Cidr = "192.168.1.0/24".parse().unwrap();
        assert!(lan.contains("192.168.1.77".parse().unwrap()));
        assert!(!lan.contains("192.168.2.1".parse().unwrap()));
        assert!(lan.contains("::ffff:192.168.1.3".parse().unwrap()));
        let any: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(any.contains("8.8.8.8".parse().unwrap()));
        let one: Cidr = "10.0.0.5".parse().unwrap();
        assert_eq!(one.prefix, 32);
        assert!(!one.contains("10.0.0.6".parse().unwrap()));
        let v6: Cidr = "::1/128".parse().unwrap();
        assert!(v6.contains("::1".parse().unwrap()));
        assert!(!v6.contains("127.0.0.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("lan".parse::<Cidr>().is_err());
    }

    const BASE: &str = r#"
[http]
listen = ["127.0.0.1:8080"]
auth = "none"

[[sites]]
reference = "ste_a"
name = "A"

[[buses]]
name = "lan"
tcp = "127.0.0.1:502"

[[buses]]
name = "lan2"
tcp = "127.0.0.1:503"

[[devices]]
name = "PV"
type = "inverter"
site = "ste_a"
bus = "lan"
unit_id = 1

[[devices]]
name = "Meter"
type = "meter"
site = "ste_a"
bus = "lan2"
unit_id = 1
"#;

    fn problems(text: &str) -> Vec<String> {
        match crate::config::parse(text) {
            Ok(_) => Vec::new(),
            Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn off_unless_the_section_is_there() {
        let c = crate::config::parse(BASE).expect("valid without the server");
        assert_eq!(c.modbus_server, None);
        let off = format!("{BASE}\n[modbus_server]\nenabled = false\n");
        assert_eq!(
            crate::config::parse(&off).map(|c| c.modbus_server).ok(),
            Some(None)
        );
    }

    #[test]
    fn two_buses_with_one_unit_id_is_an_error_naming_both() {
        let p = problems(&format!("{BASE}\n[modbus_server]\n"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("devices[1].unit_id:"), "{p:?}");
        assert!(
            p[0].contains("dvc_a_meter") && p[0].contains("dvc_a_pv"),
            "{p:?}"
        );
        assert!(p[0].contains("unit id of its own"), "{p:?}");
        let text = format!("{BASE}modbus_server_unit_id = 2\n\n[modbus_server]\n");
        let c = crate::config::parse(&text).expect("valid");
        let s = c.modbus_server.expect("on");
        assert_eq!(s.listen, vec!["127.0.0.1:5020".parse().unwrap()]);
        let units: Vec<u8> = s.units.iter().map(|u| u.unit_id).collect();
        assert_eq!(units, vec![1, 2, 200]);
        assert_eq!(s.unit(1), Some(&Served::Device(DeviceId(0))));
        assert_eq!(s.unit(2), Some(&Served::Device(DeviceId(1))));
        assert!(matches!(s.unit(200), Some(Served::Site(site)) if site.site == "ste_a"));
        assert!(s.allows("127.0.0.1".parse().unwrap()));
        assert!(s.allows("::1".parse().unwrap()));
        assert!(!s.allows("192.168.1.5".parse().unwrap()));
    }

    #[test]
    fn every_bad_value_is_named_with_its_path() {
        let text = format!(
            "{}modbus_server_unit_id = 0\n\n{}",
            BASE,
            r#"[modbus_server]
listen = ["localhost"]
allow = ["10.0.0.0/40"]
max_connections = 0
requests_per_s = -1
idle_timeout_s = 0
colour = "blue"
[[modbus_server.sites]]
site = "ste_b"
unit_id = 250
heartbeat_s = 0
"#
        );
        let p = problems(&text);
        for needle in [
            "modbus_server.listen[0]: \"localhost\" is not an IP address",
            "modbus_server.allow[0]: \"10.0.0.0/40\" is not an address range",
            "modbus_server.max_connections: must be 1 to 1024, found 0",
            "modbus_server.requests_per_s: must be above 0",
            "modbus_server.idle_timeout_s: must be 1 to 86400, found 0",
            "modbus_server.colour: unknown key",
            "modbus_server.sites[0].site: unknown site \"ste_b\"",
            "modbus_server.sites[0].heartbeat_s: must be 1 to 3600, found 0",
        ] {
            assert!(
                p.iter().any(|x| x.contains(needle)),
                "{needle} not in {p:?}"
            );
        }
    }

    #[test]
    fn a_site_unit_id_taken_by_a_device_is_an_error() {
        let text = format!(
            "{BASE}modbus_server_unit_id = 0\n\n[modbus_server]\n[[modbus_server.sites]]\nsite = \"ste_a\"\nunit_id = 1\n"
        );
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("modbus_server.sites[0].unit_id:"), "{p:?}");
        assert!(
            p[0].contains("site \"ste_a\" and device \"dvc_a_pv\""),
            "{p:?}"
        );
    }

    #[test]
    fn a_serial_line_takes_a_bus_rtu_keys_each_checked_by_name() {
        let base = format!("{BASE}modbus_server_unit_id = 2\n\n");
        let text = format!(
            "{base}[modbus_server]\nlisten = []\nserial = {{ path = \"/dev/ttyUSB1\", baud = 19200, parity = \"even\", stop_bits = 2 }}\n"
        );
        let c = crate::config::parse(&text).expect("valid: a serial line alone");
        let line = c.modbus_server.and_then(|s| s.serial).expect("a line");
        assert_eq!(line.path, std::path::PathBuf::from("/dev/ttyUSB1"));
        assert_eq!((line.baud, line.stop_bits, line.data_bits), (19200, 2, 8));
        assert_eq!(line.parity, crate::config::Parity::Even);

        let p = problems(&format!(
            "{base}[modbus_server]\nlisten = []\nserial = {{ path = \"\", baud = 7, stop_bits = 3, speed = 1 }}\n"
        ));
        for needle in [
            "modbus_server.serial.path: must not be empty",
            "modbus_server.serial.baud: 7 is not a serial speed",
            "modbus_server.serial.stop_bits: must be 1 or 2, found 3",
            "modbus_server.serial.speed: unknown key",
            "modbus_server.listen: at least one address is needed (or a serial line",
        ] {
            assert!(
                p.iter().any(|x| x.contains(needle)),
                "{needle} not in {p:?}"
            );
        }
        let p = problems(&format!(
            "{base}[modbus_server]\nserial = {{ path = \"/dev/ttyUSB1\", parity = \"mark\" }}\n"
        ));
        assert!(
            p.iter()
                .any(|x| x.starts_with("modbus_server.serial.parity:") && x.contains("mark")),
            "{p:?}"
        );
        // The line a bus polls on is not the server's to answer on.
        let shared = BASE.replacen(
            "tcp = \"127.0.0.1:503\"",
            "rtu = { path = \"/dev/ttyUSB1\" }",
            1,
        );
        let p = problems(&format!(
            "{shared}modbus_server_unit_id = 2\n\n[modbus_server]\nserial = {{ path = \"/dev/ttyUSB1\" }}\n"
        ));
        assert!(
            p.iter().any(|x| x.starts_with(
                "modbus_server.serial.path: /dev/ttyUSB1 is the line of bus \"lan2\""
            )),
            "{p:?}"
        );
    }
}
