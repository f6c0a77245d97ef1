//! `[csip_aus]`: the site's IEEE 2030.5 client for a distribution network
//! operator's utility server (CSIP-AUS, `docs/csip-aus.md`). One table for
//! one site, or `[[csip_aus]]` for several. The section's serde shape, the
//! resolved settings and their checks, the NMI's checksum and the PIN's
//! check digit.
//!
//! Data and checks only; the certificate files are read by `tls.rs`, and
//! nothing here opens a socket.

use std::path::PathBuf;

use serde::Deserialize;

pub mod identity;

use super::problem::Problem;
use identity::{check_digit_holds, with_check_digit};

/// The section as written.
#[derive(Debug, Deserialize)]
pub(super) struct RawCsip {
    pub site: String,
    /// The server's DeviceCapability: `https://host[:port]/path`.
    pub dcap_url: String,
    /// The device certificate (PEM, ECDSA P-256), its chain after it.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// The CA chain that signs the server.
    pub ca_file: PathBuf,
    /// The connection point's National Metering Identifier.
    pub nmi: String,
    /// The Registration PIN with its check digit, as the utility gave it.
    pub pin: Option<u32>,
    /// The IANA private enterprise number the mRIDs end in.
    pub pen: u32,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
    #[serde(default = "default_true")]
    pub enabled: bool,
}

fn default_timeout_s() -> u64 {
    10
}
fn default_true() -> bool {
    true
}

/// The server's address, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    pub host: String,
    pub port: u16,
    /// The DeviceCapability's path, with its query if any.
    pub path: String,
}

impl ServerUrl {
    /// `https://host[:port]/path`; nothing but https.
    pub fn parse(s: &str) -> Result<ServerUrl, String> {
        let rest = s
            .strip_prefix("https://")
            .ok_or_else(|| format!("{s:?} is not an https:// URL: 2030.5 runs over TLS only"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6
                .find(']')
                .ok_or_else(|| format!("{s:?}: an IPv6 address needs its closing ]"))?;
            let port = v6[end + 1..].strip_prefix(':');
            (v6[..end].to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        if host.is_empty() || host.contains(['@', ' ']) {
            return Err(format!("{s:?} has no host"));
        }
        let port = match port {
            None => 443,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{s:?}: {p:?} is not a port"))?,
        };
        Ok(ServerUrl {
            host,
            port,
            path: path.to_string(),
        })
    }
}

/// One site's CSIP-AUS client, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct CsipConfig {
    pub site: String,
    pub server: ServerUrl,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub ca_file: PathBuf,
    pub nmi: String,
    pub pin: Option<u32>,
    pub pen: u32,
    pub timeout_ms: u64,
}

impl CsipConfig {
    /// The TOML path of key `key` of entry `index` of `count`.
    pub fn key(index: usize, count: usize, key: &str) -> String {
        if count == 1 {
            format!("csip_aus.{key}")
        } else {
            format!("csip_aus[{index}].{key}")
        }
    }
}

/// The NMI's own check: 10 characters of A-Z (but I and O) and 0-9, with an
/// optional eleventh, AEMO's checksum of the ten.
pub fn check_nmi(nmi: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_digit() || (c.is_ascii_uppercase() && c != 'I' && c != 'O');
    if !(nmi.len() == 10 || nmi.len() == 11) || !nmi.chars().all(ok_char) {
        return Err(format!(
            "{nmi:?} is not an NMI: 10 characters of 0-9 and A-Z (not I or O), optionally its checksum digit"
        ));
    }
    if nmi.len() == 11 {
        let want = nmi_checksum(&nmi[..10]);
        let got = nmi.as_bytes()[10];
        if got != b'0' + want {
            return Err(format!(
                "{nmi:?}: its last digit should be the checksum {want} of the first ten"
            ));
        }
    }
    Ok(())
}

/// AEMO's NMI checksum: the ASCII codes from the right, every other one
/// doubled, the digits of each summed.
pub fn nmi_checksum(ten: &str) -> u8 {
    let mut sum = 0u32;
    for (i, b) in ten.bytes().rev().enumerate() {
        let mut v = u32::from(b);
        if i % 2 == 0 {
            v *= 2;
        }
        while v > 0 {
            sum += v % 10;
            v /= 10;
        }
    }
    ((10 - sum % 10) % 10) as u8
}

/// Resolves the entries; every problem at once under its path.
pub(super) fn resolve_csip(
    entries: Vec<Option<RawCsip>>,
    sites: &std::collections::HashSet<String>,
    problems: &mut Vec<Problem>,
) -> Vec<CsipConfig> {
    let count = entries.len();
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, raw) in entries.into_iter().enumerate() {
        let Some(r) = raw else { continue };
        let key = |k: &str| CsipConfig::key(i, count, k);
        let before = problems.len();
        if !sites.contains(&r.site) {
            problems.push(Problem::new(
                key("site"),
                format!("{:?} is not a site of [[sites]]", r.site),
            ));
        } else if !seen.insert(r.site.clone()) {
            problems.push(Problem::new(
                key("site"),
                format!("{:?} has a CSIP-AUS client already: one per site", r.site),
            ));
        }
        let server = ServerUrl::parse(&r.dcap_url)
            .map_err(|e| problems.push(Problem::new(key("dcap_url"), e)))
            .ok();
        if let Err(e) = check_nmi(&r.nmi) {
            problems.push(Problem::new(key("nmi"), e));
        }
        if let Some(pin) = r.pin {
            if !check_digit_holds(u64::from(pin)) {
                problems.push(Problem::new(
                    key("pin"),
                    format!(
                        "{pin}: its last digit is not its check digit; if {pin} is the PIN without it, the full PIN is {}",
                        with_check_digit(u64::from(pin))
                    ),
                ));
            }
        }
        if r.pen == 0 || r.pen > 99_999_999 {
            problems.push(Problem::new(
                key("pen"),
                format!(
                    "{} is not an IANA private enterprise number (1 to 99999999)",
                    r.pen
                ),
            ));
        }
        if !(1..=120).contains(&r.timeout_s) {
            problems.push(Problem::new(
                key("timeout_s"),
                format!("must be 1 to 120 s, found {}", r.timeout_s),
            ));
        }
        if problems.len() > before || !r.enabled {
            continue;
        }
        if let Some(server) = server {
            out.push(CsipConfig {
                site: r.site,
                server,
                cert_file: r.cert_file,
                key_file: r.key_file,
                ca_file: r.ca_file,
                nmi: r.nmi,
                pin: r.pin,
                pen: r.pen,
                timeout_ms: r.timeout_s * 1000,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_are_https_with_host_port_and_path() {
        let u = ServerUrl::parse("https://utility.example:8443/sep2/dcap").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("utility.example", 8443, "/sep2/dcap")
        );
        let u = ServerUrl::parse("https://[::1]:9443/dcap").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9443));
        assert_eq!(ServerUrl::parse("https://h").unwrap().port, 443);
        assert!(ServerUrl::parse("http://h/dcap")
            .unwrap_err()
            .contains("https://"));
        assert!(ServerUrl::parse("https://h:0/dcap").is_err());
        assert!(ServerUrl::parse("https:///dcap").is_err());
    }

    #[test]
    fn an_nmi_is_ten_characters_and_its_eleventh_is_aemos_checksum() {
        // AEMO's published examples.
        assert_eq!(nmi_checksum("2001985732"), 8);
        assert_eq!(nmi_checksum("QAAAVZZZZZ"), 3);
        assert_eq!(nmi_checksum("2001985733"), 6);
        assert!(check_nmi("2001985732").is_ok());
        assert!(check_nmi("20019857328").is_ok());
        assert!(check_nmi("20019857321").unwrap_err().contains("checksum 8"));
        assert!(check_nmi("2001O85732").is_err());
        assert!(check_nmi("12345").is_err());
    }
}
