//! `[eebus]`: the site's EEBus node, the Controllable System a distribution
//! operator's control box limits over LPC and LPP (§14a EnWG, EEG §9;
//! `docs/grid-operator.md`). One table, for one site: a node is one SHIP
//! device with one key.
//!
//! Data and checks only; the node's certificate is `eebus::identity`'s, and
//! nothing here opens a socket.

use std::net::SocketAddr;

use serde::Deserialize;

use super::problem::Problem;

/// The section as written.
#[derive(Debug, Deserialize)]
pub(super) struct RawEebus {
    pub site: String,
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The control box's SKI: 40 hex digits, spaces and dashes allowed.
    pub trusted_ski: String,
    /// The control box's address, dialled and kept dialled; without it the
    /// node waits for the box to dial in.
    pub box_address: Option<String>,
    #[serde(default = "default_brand")]
    pub brand: String,
    #[serde(default = "default_model")]
    pub model: String,
    pub serial: Option<String>,
    pub contractual_max_consumption_w: Option<f64>,
    pub contractual_max_production_w: Option<f64>,
    pub failsafe_consumption_w: Option<f64>,
    pub failsafe_production_w: Option<f64>,
    #[serde(default = "default_failsafe_h")]
    pub failsafe_duration_h: f64,
    /// The §14a controllable consumers behind the node; the site's
    /// batteries when not given.
    pub controllable_consumers: Option<u32>,
    /// Announce the node over mDNS (`_ship._tcp`) for the box to find.
    #[serde(default = "default_true")]
    pub mdns: bool,
    #[serde(default = "default_true")]
    pub enabled: bool,
}

fn default_listen() -> String {
    "0.0.0.0:4712".into()
}
fn default_true() -> bool {
    true
}
fn default_brand() -> String {
    "sitegate".into()
}
fn default_model() -> String {
    "sitegate-energy-manager".into()
}
fn default_failsafe_h() -> f64 {
    2.0
}

/// The site's EEBus node, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct EebusConfig {
    pub site: String,
    pub listen: SocketAddr,
    /// The box's SKI, 20 bytes.
    pub trusted_ski: [u8; 20],
    pub box_address: Option<SocketAddr>,
    pub brand: String,
    pub model: String,
    pub serial: String,
    pub contractual_max_consumption_w: f64,
    pub contractual_max_production_w: f64,
    pub failsafe_consumption_w: f64,
    pub failsafe_production_w: f64,
    pub failsafe_duration_s: u64,
    pub controllable_consumers: u32,
    /// Announce the node over mDNS.
    pub mdns: bool,
}

/// 40 hex digits, spaces, dashes and colons between them ignored.
pub fn parse_ski(s: &str) -> Result<[u8; 20], String> {
    let digits: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | ':'))
        .collect();
    let bytes = hex::decode(&digits).map_err(|_| {
        format!("{s:?} is not a SKI: 40 hex digits (spaces and dashes may separate them)")
    })?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{s:?} is not a SKI: 40 hex digits, found {}", b.len() * 2))
}

fn watts(
    key: &str,
    value: Option<f64>,
    or: Option<f64>,
    why: &str,
    problems: &mut Vec<Problem>,
) -> f64 {
    match value.or(or) {
        Some(w) if (0.0..=1e9).contains(&w) => w,
        Some(w) => {
            problems.push(Problem::new(
                format!("eebus.{key}"),
                format!("must be 0 to 1000000000 W, found {w}"),
            ));
            0.0
        }
        None => {
            problems.push(Problem::new(format!("eebus.{key}"), why.to_string()));
            0.0
        }
    }
}

/// Resolves the section; every problem at once under its path.
pub(super) fn resolve_eebus(
    raw: Option<RawEebus>,
    gateway_id: &str,
    sites: &[super::SiteConfig],
    devices: &[super::DeviceConfig],
    problems: &mut Vec<Problem>,
) -> Option<EebusConfig> {
    let r = raw?;
    let before = problems.len();
    let key = |k: &str| format!("eebus.{k}");
    let site = sites.iter().find(|s| s.reference == r.site);
    if site.is_none() {
        problems.push(Problem::new(
            key("site"),
            format!("{:?} is not a site of [[sites]]", r.site),
        ));
    }
    let listen = r
        .listen
        .parse::<SocketAddr>()
        .map_err(|_| {
            problems.push(Problem::new(
                key("listen"),
                format!("{:?} is not an address:port", r.listen),
            ))
        })
        .ok();
    let ski = parse_ski(&r.trusted_ski)
        .map_err(|e| problems.push(Problem::new(key("trusted_ski"), e)))
        .ok();
    let box_address = match &r.box_address {
        None => None,
        Some(a) => a
            .parse::<SocketAddr>()
            .map_err(|_| {
                problems.push(Problem::new(
                    key("box_address"),
                    format!("{a:?} is not an address:port (the box's IP and its SHIP port)"),
                ))
            })
            .ok(),
    };
    let limits = limits(&r, site, devices, problems);
    let serial = announced_names(&r, gateway_id, problems);
    if problems.len() > before || !r.enabled {
        return None;
    }
    Some(EebusConfig {
        site: r.site,
        listen: listen?,
        trusted_ski: ski?,
        box_address,
        brand: r.brand,
        model: r.model,
        serial,
        contractual_max_consumption_w: limits.max_consumption_w,
        contractual_max_production_w: limits.max_production_w,
        failsafe_consumption_w: limits.failsafe_consumption_w,
        failsafe_production_w: limits.failsafe_production_w,
        failsafe_duration_s: (r.failsafe_duration_h * 3600.0).round() as u64,
        controllable_consumers: limits.consumers,
        mdns: r.mdns,
    })
}

/// The node's limits as [`limits`] checks them (0 W for one with a problem).
struct Limits {
    max_consumption_w: f64,
    max_production_w: f64,
    failsafe_consumption_w: f64,
    failsafe_production_w: f64,
    consumers: u32,
}

/// The contractual maximums (the site's limits by default), the §14a
/// consumers (its batteries by default) and the failsafe limits (Pmin for
/// consumption), and the failsafe duration checked; every problem under
/// its path.
fn limits(
    r: &RawEebus,
    site: Option<&super::SiteConfig>,
    devices: &[super::DeviceConfig],
    problems: &mut Vec<Problem>,
) -> Limits {
    let key = |k: &str| format!("eebus.{k}");
    let import = site.and_then(|s| s.max_import).map(|p| p.watts());
    let export = site.and_then(|s| s.max_export).map(|p| p.watts());
    let batteries = devices
        .iter()
        .filter(|d| d.site == r.site && d.device_type == crate::model::DeviceType::Battery)
        .count();
    let max_c = watts(
        "contractual_max_consumption_w",
        r.contractual_max_consumption_w,
        import,
        "the connection's contractual maximum consumption is needed (or the site's max_import)",
        problems,
    );
    let max_p = watts(
        "contractual_max_production_w",
        r.contractual_max_production_w,
        export,
        "the connection's contractual maximum production is needed (or the site's max_export)",
        problems,
    );
    let consumers = r.controllable_consumers.unwrap_or(batteries.max(1) as u32);
    if consumers == 0 || consumers > 1000 {
        problems.push(Problem::new(
            key("controllable_consumers"),
            format!("must be 1 to 1000, found {consumers}"),
        ));
    }
    let fs_c = watts(
        "failsafe_consumption_w",
        r.failsafe_consumption_w,
        Some(super::pmin::pmin_w(consumers.max(1))),
        "the failsafe consumption limit is needed (Pmin by default)",
        problems,
    );
    let fs_p = watts(
        "failsafe_production_w",
        r.failsafe_production_w,
        None,
        "the failsafe production limit is needed: the grid operator gives it at commissioning",
        problems,
    );
    if !(2.0..=24.0).contains(&r.failsafe_duration_h) {
        problems.push(Problem::new(
            key("failsafe_duration_h"),
            format!(
                "must be 2 to 24 h (LPC/LPP-022), found {}",
                r.failsafe_duration_h
            ),
        ));
    }
    Limits {
        max_consumption_w: max_c,
        max_production_w: max_p,
        failsafe_consumption_w: fs_c,
        failsafe_production_w: fs_p,
        consumers,
    }
}

/// Checks the brand and model, and gives the serial (the gateway id by
/// default) after checking it: the names the node announces.
fn announced_names(r: &RawEebus, gateway_id: &str, problems: &mut Vec<Problem>) -> String {
    let key = |k: &str| format!("eebus.{k}");
    for (k, v) in [("brand", &r.brand), ("model", &r.model)] {
        // The SHIP TXT record's rule (SHIP §7.3.2): mDNS announces both.
        let bad = |c: char| c.is_control() || c.is_whitespace() || c == ';';
        if v.is_empty() || v.chars().count() > 32 || v.chars().any(bad) {
            problems.push(Problem::new(
                key(k),
                format!("{v:?}: 1 to 32 printable characters, no space or ';'"),
            ));
        }
    }
    let serial = r.serial.clone().unwrap_or_else(|| gateway_id.to_string());
    if serial.is_empty()
        || serial.len() > 32
        || !serial
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        problems.push(Problem::new(
            key("serial"),
            format!("{serial:?}: 1 to 32 of A-Z, a-z, 0-9, '-', '_', '.'"),
        ));
    }
    serial
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ski_is_forty_hex_digits_however_spaced() {
        let want = parse_ski("5555aaaaffff1111cccc3333eeeedddd99992222").unwrap();
        assert_eq!(
            parse_ski("5555 AAAA-FFFF 1111 CCCC 3333 EEEE DDDD 9999 2222").unwrap(),
            want
        );
        assert!(parse_ski("5555").unwrap_err().contains("found 4"));
        assert!(parse_ski("xyz").unwrap_err().contains("not a SKI"));
    }
}
