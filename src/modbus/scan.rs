//! Finding SunSpec devices on a bus: every unit id of a range is asked for the
//! "SunS" marker; where it answers, the model chain is walked and each logical
//! device (one per Common model) read for its nameplate. A unit that answers
//! without a SunSpec map is offered to the built-in profiles that can
//! recognise their device (`identify`). [`snippet`] turns the result into
//! `[[buses]]` and `[[devices]]` config blocks.
//!
//! Reads only; never writes to a device. One unit at a time, each bounded by
//! the port's timeout.

use std::fmt::Write as _;

mod identify;

pub use identify::{candidates, Identified};

use super::link::{Port, UnitReader};
use super::sunspec::{self, ModelBlock};
use crate::config::{Parity, Transport};
use crate::model::DeviceType;
use crate::telemetry::DeviceInfo;

/// One logical device found behind a unit id.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundDevice {
    pub models: Vec<u16>,
    pub kind: Option<DeviceType>,
    pub info: DeviceInfo,
}

/// A unit id that answered with a SunSpec map.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub unit: u8,
    pub base: u16,
    pub devices: Vec<FoundDevice>,
}

/// What a scan reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress<'a> {
    /// About to ask this unit id.
    Asking(u8),
    /// The unit id could not be asked (no answer, connection refused, ...).
    Failed(u8, &'a str),
    /// The unit id answers but holds no SunSpec map at any base (a device for
    /// a register-map profile, or a map where discovery does not look).
    NotSunspec(u8),
    /// A unit without SunSpec recognised by a profile's identification register.
    Identified(&'a Identified),
}

/// Everything a scan found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    /// Units with a SunSpec map.
    pub sunspec: Vec<Found>,
    /// Units recognised by a register-map profile.
    pub profiles: Vec<Identified>,
}

impl Scan {
    pub fn is_empty(&self) -> bool {
        self.sunspec.is_empty() && self.profiles.is_empty()
    }
}

/// Scans `units` in order for SunSpec maps only, telling `progress` what
/// happens.
pub async fn scan(port: &mut Port, units: &[u8], progress: impl FnMut(Progress<'_>)) -> Vec<Found> {
    scan_units(port, units, &[], progress).await.sunspec
}

/// Scans `units` in order for SunSpec maps, and offers the units without one
/// to the built-in profiles that can recognise their device.
pub async fn scan_all(port: &mut Port, units: &[u8], progress: impl FnMut(Progress<'_>)) -> Scan {
    scan_units(port, units, &candidates(), progress).await
}

async fn scan_units(
    port: &mut Port,
    units: &[u8],
    candidates: &[std::sync::Arc<crate::profile::Profile>],
    mut progress: impl FnMut(Progress<'_>),
) -> Scan {
    let mut found = Vec::new();
    let mut profiles = Vec::new();
    for &unit in units {
        progress(Progress::Asking(unit));
        let mut r = UnitReader {
            port: &mut *port,
            unit,
        };
        match probe(&mut r).await {
            Ok(Some(f)) => found.push(Found { unit, ..f }),
            Ok(None) => match identify::identify(port, unit, candidates).await {
                Some(id) => {
                    progress(Progress::Identified(&id));
                    profiles.push(id);
                }
                None => progress(Progress::NotSunspec(unit)),
            },
            Err(e) => progress(Progress::Failed(unit, &e)),
        }
    }
    Scan {
        sunspec: found,
        profiles,
    }
}

async fn probe(r: &mut UnitReader<'_>) -> Result<Option<Found>, String> {
    let base = match sunspec::find_base(r).await {
        Ok(b) => b,
        Err(sunspec::DiscoveryError::NotSunspec) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let chain = sunspec::walk_chain(r, base)
        .await
        .map_err(|e| e.to_string())?;
    let mut devices = Vec::new();
    for logical in sunspec::logical_devices(&chain) {
        let info = sunspec::read_info(r, &logical)
            .await
            .map_err(|e| e.to_string())?;
        devices.push(found_device(&logical, info));
    }
    Ok(Some(Found {
        unit: r.unit,
        base,
        devices,
    }))
}

fn found_device(blocks: &[ModelBlock], info: DeviceInfo) -> FoundDevice {
    let models: Vec<u16> = blocks.iter().map(|b| b.id).collect();
    FoundDevice {
        kind: sunspec::kind_of(&models),
        models,
        info,
    }
}

/// Printable ASCII only, quoted as a TOML basic string.
fn quoted(s: &str) -> String {
    let clean: String = s
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .collect();
    format!("\"{}\"", clean.replace('\\', "\\\\").replace('"', "\\\""))
}

fn parity(p: Parity) -> &'static str {
    match p {
        Parity::None => "none",
        Parity::Even => "even",
        Parity::Odd => "odd",
    }
}

/// What one found device is, on one line.
pub fn describe(d: &FoundDevice) -> String {
    let or = |s: &Option<String>| s.clone().unwrap_or_else(|| "?".into());
    let models: Vec<String> = d.models.iter().map(u16::to_string).collect();
    format!(
        "{} {} (serial {}, version {}), {}, SunSpec models {}",
        or(&d.info.manufacturer),
        or(&d.info.model),
        or(&d.info.serial),
        or(&d.info.version),
        d.kind.map_or("unknown kind", DeviceType::as_str),
        models.join(", ")
    )
}

/// What a recognised profile device is, on one line.
pub fn describe_identified(d: &Identified) -> String {
    let or = |s: &Option<String>| s.clone().unwrap_or_else(|| "?".into());
    let variant = d
        .variant
        .as_ref()
        .map_or(String::new(), |v| format!(", variant {v}"));
    format!(
        "{} {} ({} register {} = {:?}), {}, profile {}{variant}",
        or(&d.manufacturer),
        or(&d.model),
        d.profile,
        d.register,
        d.evidence,
        d.device_type.map_or("unknown kind", DeviceType::as_str),
        d.profile
    )
}

/// Config blocks for SunSpec devices a scan found: the bus, then one device
/// per unit id (the first logical device whose models say what it is; the
/// others are listed in comments, since a unit id takes one device).
pub fn snippet(
    bus: &str,
    transport: &Transport,
    timeout_ms: u64,
    found: &[Found],
    site: &str,
) -> String {
    let scan = Scan {
        sunspec: found.to_vec(),
        profiles: Vec::new(),
    };
    snippet_all(bus, transport, timeout_ms, &scan, site)
}

/// The name a scanned bus gets unless one is given: what was scanned,
/// `tcp-<host>-<port>` or `rtu-<serial device>`, with every character
/// but letters, digits, `-` and `_` made `-`. Two scans of two lines give
/// two names, so their outputs paste into one config.
pub fn bus_name_of(transport: &Transport) -> String {
    let raw = match transport {
        Transport::Tcp { host, port } => format!("tcp-{host}-{port}"),
        Transport::Rtu(r) => {
            let path = r.path.to_string_lossy();
            let device = path.rsplit('/').find(|p| !p.is_empty()).unwrap_or("line");
            format!("rtu-{device}")
        }
    };
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Config blocks for everything a scan found: the bus, the SunSpec devices
/// as in [`snippet`], then the devices recognised by a profile.
pub fn snippet_all(
    bus: &str,
    transport: &Transport,
    timeout_ms: u64,
    scan: &Scan,
    site: &str,
) -> String {
    let found = &scan.sunspec;
    let mut out = String::new();
    let _ = writeln!(out, "[[buses]]\nname = {}", quoted(bus));
    match transport {
        Transport::Tcp { host, port } => {
            let addr = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            let _ = writeln!(out, "tcp = {}", quoted(&addr));
        }
        Transport::Rtu(r) => {
            let _ = writeln!(
                out,
                "rtu = {{ path = {}, baud = {}, parity = \"{}\", data_bits = {}, stop_bits = {} }}",
                quoted(&r.path.to_string_lossy()),
                r.baud,
                parity(r.parity),
                r.data_bits,
                r.stop_bits
            );
        }
    }
    let _ = writeln!(out, "timeout_ms = {timeout_ms}");
    for f in found {
        let pick = f.devices.iter().position(|d| d.kind.is_some());
        for (i, d) in f.devices.iter().enumerate() {
            if Some(i) != pick {
                let _ = writeln!(out, "\n# unit {}, not configured: {}", f.unit, describe(d));
            }
        }
        let Some(d) = pick.map(|i| &f.devices[i]) else {
            continue;
        };
        let Some(kind) = d.kind else { continue };
        let model = d.info.model.clone().unwrap_or_else(|| kind.as_str().into());
        let _ = writeln!(out, "\n# {}", describe(d));
        let _ = writeln!(out, "[[devices]]");
        let _ = writeln!(
            out,
            "name = {}",
            quoted(&format!("{model} unit {}", f.unit))
        );
        let _ = writeln!(out, "type = \"{}\"", kind.as_str());
        let _ = writeln!(out, "site = {}", quoted(site));
        let _ = writeln!(out, "bus = {}", quoted(bus));
        let _ = writeln!(out, "unit_id = {}", f.unit);
        let _ = writeln!(out, "profile = \"sunspec\"");
        if let Some(w) = d.info.rated_power_w {
            let _ = writeln!(out, "# rated_power = \"{w} W\"   (the device reports it)");
        }
    }
    for d in &scan.profiles {
        let Some(kind) = d.device_type else { continue };
        let model = d.model.clone().unwrap_or_else(|| d.profile.clone());
        let _ = writeln!(out, "\n# {}", describe_identified(d));
        let _ = writeln!(out, "[[devices]]");
        let _ = writeln!(
            out,
            "name = {}",
            quoted(&format!("{model} unit {}", d.unit))
        );
        let _ = writeln!(out, "type = \"{}\"", kind.as_str());
        let _ = writeln!(out, "site = {}", quoted(site));
        let _ = writeln!(out, "bus = {}", quoted(bus));
        let _ = writeln!(out, "unit_id = {}", d.unit);
        let _ = writeln!(out, "profile = {}", quoted(&d.profile));
        match (&d.variant, &d.variant_problem) {
            (Some(v), _) => {
                let _ = writeln!(out, "variant = {}", quoted(v));
            }
            (None, Some(why)) => {
                let _ = writeln!(out, "# variant = \"...\"   ({why})");
            }
            (None, None) => {}
        }
        if kind != DeviceType::Meter {
            let _ = writeln!(
                out,
                "# rated_power = \"... kW\"   (profiles read no rating: set it for steering)"
            );
        }
    }
    out
}

/// Parses `1-247`, `3` or `1,2,5-7` into unit ids in order.
pub fn parse_units(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let num = |x: &str| {
            x.parse::<u8>()
                .ok()
                .filter(|u| (1..=247).contains(u))
                .ok_or_else(|| format!("{x:?} is not a unit id (1 to 247)"))
        };
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo > hi {
            return Err(format!("{part:?}: {lo} is above {hi}"));
        }
        out.extend(lo..=hi);
    }
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bus_is_named_after_what_was_scanned() {
        let tcp = |host: &str, port| Transport::Tcp {
            host: host.into(),
            port,
        };
        assert_eq!(
            bus_name_of(&tcp("192.168.1.20", 502)),
            "tcp-192-168-1-20-502"
        );
        assert_eq!(bus_name_of(&tcp("fe80::1", 1502)), "tcp-fe80--1-1502");
        let rtu = Transport::Rtu(crate::config::RtuConfig {
            path: "/dev/ttyUSB0".into(),
            baud: 9600,
            parity: crate::config::Parity::None,
            data_bits: 8,
            stop_bits: 1,
        });
        assert_eq!(bus_name_of(&rtu), "rtu-ttyUSB0");
    }

    #[test]
    fn unit_ranges() {
        assert_eq!(parse_units("1-3").unwrap(), [1, 2, 3]);
        assert_eq!(parse_units("5, 1-2").unwrap(), [5, 1, 2]);
        assert!(parse_units("0-3").is_err());
        assert!(parse_units("248").is_err());
        assert!(parse_units("9-2").is_err());
    }
}
