//! `[modbus_server]`: listen addresses, the serial line, the clients
//! allowed, the bounds, and the unit id of every device and site it serves
//! (unique on the server).
//! Collects problems; never stops early.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::super::modbus_server::{
    Cidr, ModbusServerConfig, RawModbusServer, Served, ServedSite, ServedUnit,
};
use super::super::problem::Problem;
use super::super::{BusConfig, DeviceConfig, RtuConfig, SiteConfig, Transport};

/// A site not listed under `[[modbus_server.sites]]` is served at this unit
/// id plus its index among the sites.
pub const SITE_UNIT_BASE: u8 = 200;

/// `None` when the section is absent or `enabled = false`. `device_paths`
/// holds each device's TOML path (`devices[i]`), by `DeviceId`.
pub(super) fn resolve_modbus_server(
    raw: Option<RawModbusServer>,
    devices: &[DeviceConfig],
    device_paths: &[String],
    sites: &[SiteConfig],
    buses: &[BusConfig],
    problems: &mut Vec<Problem>,
) -> Option<ModbusServerConfig> {
    let mut raw = raw?;
    let serial = raw
        .serial
        .take()
        .and_then(|rtu| serial_line(rtu, buses, problems));
    let mut listen = Vec::new();
    for (i, addr) in raw.listen.iter().enumerate() {
        match addr.parse::<SocketAddr>() {
            Ok(a) => listen.push(a),
            Err(_) => problems.push(Problem::new(
                format!("modbus_server.listen[{i}]"),
                format!("{addr:?} is not an IP address with a port, e.g. \"0.0.0.0:502\""),
            )),
        }
    }
    if raw.enabled && raw.listen.is_empty() && serial.is_none() {
        problems.push(Problem::new(
            "modbus_server.listen",
            "at least one address is needed (or a serial line, modbus_server.serial)",
        ));
    }
    let mut allow = Vec::new();
    for (i, a) in raw.allow.iter().enumerate() {
        match a.parse::<Cidr>() {
            Ok(c) => allow.push(c),
            Err(e) => problems.push(Problem::new(format!("modbus_server.allow[{i}]"), e)),
        }
    }
    bounds(&raw, problems);
    if !raw.enabled {
        // Unit ids matter only to a running server: a clash is not held
        // against a config that keeps the server off.
        return None;
    }
    let units = unit_ids(&raw, devices, device_paths, sites, problems);
    Some(ModbusServerConfig {
        listen,
        allow,
        max_connections: raw.max_connections,
        max_connections_per_client: raw.max_connections_per_client,
        requests_per_s: raw.requests_per_s,
        burst: raw.burst,
        idle_timeout_s: raw.idle_timeout_s,
        stale_after_polls: raw.stale_after_polls,
        forward_cache_ms: raw.forward_cache_ms,
        units,
        serial,
    })
}

/// The serial line, checked as a bus's `rtu` is; a line a bus polls on
/// cannot be answered on too (one owner per port).
fn serial_line(
    rtu: super::super::raw::RawRtu,
    buses: &[BusConfig],
    problems: &mut Vec<Problem>,
) -> Option<RtuConfig> {
    let line = super::buses::check_rtu("modbus_server.serial", rtu, problems)?;
    for b in buses {
        if matches!(&b.transport, Transport::Rtu(r) if r.path == line.path) {
            problems.push(Problem::new(
                "modbus_server.serial.path",
                format!(
                    "{} is the line of bus {:?}: the server needs a serial port of its own",
                    line.path.display(),
                    b.name
                ),
            ));
            return None;
        }
    }
    Some(line)
}

fn bounds(raw: &RawModbusServer, problems: &mut Vec<Problem>) {
    let mut range = |key: &str, value: u64, lo: u64, hi: u64| {
        if !(lo..=hi).contains(&value) {
            problems.push(Problem::new(
                format!("modbus_server.{key}"),
                format!("must be {lo} to {hi}, found {value}"),
            ));
        }
    };
    range("max_connections", raw.max_connections as u64, 1, 1024);
    range(
        "max_connections_per_client",
        raw.max_connections_per_client as u64,
        1,
        raw.max_connections.clamp(1, 1024) as u64,
    );
    range("burst", u64::from(raw.burst), 1, 100_000);
    range("idle_timeout_s", raw.idle_timeout_s, 1, 86_400);
    range(
        "stale_after_polls",
        u64::from(raw.stale_after_polls),
        1,
        100,
    );
    range("forward_cache_ms", raw.forward_cache_ms, 0, 60_000);
    if !(raw.requests_per_s.is_finite()
        && raw.requests_per_s > 0.0
        && raw.requests_per_s <= 100_000.0)
    {
        problems.push(Problem::new(
            "modbus_server.requests_per_s",
            format!(
                "must be above 0 and at most 100000, found {}",
                raw.requests_per_s
            ),
        ));
    }
}

/// Each `[[modbus_server.sites]]` entry: a known site, listed once, its
/// heartbeat and failsafe export within bounds.
fn check_site_entries(raw: &RawModbusServer, sites: &[SiteConfig], problems: &mut Vec<Problem>) {
    for (i, entry) in raw.sites.iter().enumerate() {
        if !sites.iter().any(|s| s.reference == entry.site) {
            problems.push(Problem::new(
                format!("modbus_server.sites[{i}].site"),
                format!(
                    "unknown site {:?} (no [[sites]] entry has that reference)",
                    entry.site
                ),
            ));
        }
        if raw.sites[..i].iter().any(|e| e.site == entry.site) {
            problems.push(Problem::new(
                format!("modbus_server.sites[{i}].site"),
                format!("site {:?} is listed twice", entry.site),
            ));
        }
        if !(1..=3600).contains(&entry.heartbeat_s) {
            problems.push(Problem::new(
                format!("modbus_server.sites[{i}].heartbeat_s"),
                format!("must be 1 to 3600, found {}", entry.heartbeat_s),
            ));
        }
        if let Some(super::super::PowerShare::Watts(w)) = entry.failsafe_export {
            if w < 0.0 {
                problems.push(Problem::new(
                    format!("modbus_server.sites[{i}].failsafe_export"),
                    format!("must not be negative, found {w} W"),
                ));
            }
        }
    }
}

/// Every unit id and what it serves; a unit id claimed twice is reported
/// with both claimants.
fn unit_ids(
    raw: &RawModbusServer,
    devices: &[DeviceConfig],
    device_paths: &[String],
    sites: &[SiteConfig],
    problems: &mut Vec<Problem>,
) -> Vec<ServedUnit> {
    // unit id -> (what, the key that set it, its description)
    let mut taken: BTreeMap<u8, (Served, String, String)> = BTreeMap::new();
    let mut claim = |unit: u8,
                     served: Served,
                     key: String,
                     who: String,
                     problems: &mut Vec<Problem>| {
        if !(1..=247).contains(&unit) {
            problems.push(Problem::new(
                key,
                format!("{who}: unit id {unit} cannot be served (1 to 247); set another"),
            ));
            return;
        }
        match taken.get(&unit) {
            Some((_, other_key, other)) => problems.push(Problem::new(
                key.clone(),
                format!(
                    "{who} and {other} ({other_key}) would both answer as unit id {unit} on the Modbus server: give one of them a unit id of its own (a device: modbus_server_unit_id, 0 to not serve it; a site: unit_id in [[modbus_server.sites]])"
                ),
            )),
            None => {
                taken.insert(unit, (served, key, who));
            }
        }
    };
    for d in devices {
        let path = device_paths
            .get(d.id.index())
            .cloned()
            .unwrap_or_else(|| format!("devices[{}]", d.id.index()));
        let (unit, key) = match d.modbus_server_unit_id {
            Some(0) => continue,
            Some(u) => (u, format!("{path}.modbus_server_unit_id")),
            None => (d.unit_id, format!("{path}.unit_id")),
        };
        let who = format!(
            "device {:?} (unit id {} on bus {:?})",
            d.reference, d.unit_id, d.bus
        );
        claim(unit, Served::Device(d.id), key, who, problems);
    }
    check_site_entries(raw, sites, problems);
    for (i, site) in sites.iter().enumerate() {
        let listed = raw.sites.iter().position(|e| e.site == site.reference);
        let entry = listed.map(|at| &raw.sites[at]);
        let (unit, key) = match entry.and_then(|e| e.unit_id).zip(listed) {
            Some((u, at)) => (u, format!("modbus_server.sites[{at}].unit_id")),
            None => (
                SITE_UNIT_BASE.saturating_add(i.min(47) as u8),
                match listed {
                    Some(at) => format!("modbus_server.sites[{at}].unit_id"),
                    None => "modbus_server.sites".to_string(),
                },
            ),
        };
        let served = Served::Site(ServedSite {
            site: site.reference.clone(),
            control: entry.is_some_and(|e| e.control),
            heartbeat_s: entry.map_or(60, |e| e.heartbeat_s),
            failsafe_export: entry.and_then(|e| e.failsafe_export),
        });
        let who = format!("site {:?}", site.reference);
        claim(unit, served, key, who, problems);
    }
    taken
        .into_iter()
        .map(|(unit_id, (served, _, _))| ServedUnit { unit_id, served })
        .collect()
}
