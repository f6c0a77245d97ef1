//! `[[devices]]`: each device's reference (explicit or derived), its site,
//! bus and unit id, its profile (a named variant, ratings a profile battery
//! needs). Collects problems; never stops early.

use std::collections::{HashMap, HashSet};

use super::super::problem::Problem;
use super::super::raw::RawDevice;
use super::super::{DeviceConfig, ProfileRef};
use super::{check_identifier, derive_reference};
use crate::model::DeviceId;

/// What the other sections declared, for the devices' cross-references.
pub(super) struct Declared<'a> {
    /// Site references and bus names written in the file, including those of
    /// entries that failed to parse.
    pub sites: &'a HashSet<String>,
    pub buses: &'a HashSet<String>,
    /// Whether each bus that resolved is TCP, by name.
    pub bus_kinds: &'a HashMap<String, bool>,
}

/// The devices that parsed, in file order (a device's index is its
/// `DeviceId`), and each one's TOML path (`devices[i]`, by `DeviceId`).
pub(super) fn resolve_devices(
    raw: Vec<Option<RawDevice>>,
    declared: &Declared<'_>,
    profiles: &mut super::super::profiles::Resolver,
    problems: &mut Vec<Problem>,
) -> (Vec<DeviceConfig>, Vec<String>) {
    let mut devices = Vec::new();
    let mut paths = Vec::new();
    let mut device_refs = HashSet::new();
    let mut addresses = HashSet::new();
    for (i, dev) in raw.into_iter().enumerate() {
        let Some(dev) = dev else { continue };
        let path = format!("devices[{i}]");
        let reference = dev
            .reference
            .clone()
            .unwrap_or_else(|| derive_reference(&dev.site, &dev.name));
        check_identifier(&format!("{path}.reference"), &reference, problems);
        if !device_refs.insert(reference.clone()) {
            problems.push(Problem::new(
                format!("{path}.reference"),
                format!("duplicate device reference {reference:?}"),
            ));
        }
        if dev.name.trim().is_empty() {
            problems.push(Problem::new(format!("{path}.name"), "must not be empty"));
        }
        // Declared names include those of valid entries: one set answers both.
        if !declared.sites.contains(&dev.site) {
            problems.push(Problem::new(
                format!("{path}.site"),
                format!(
                    "unknown site {:?} (no [[sites]] entry has that reference)",
                    dev.site
                ),
            ));
        }
        // `None` for a bus whose entry has problems of its own (reported there).
        let is_tcp = declared.bus_kinds.get(&dev.bus).copied();
        if !declared.buses.contains(&dev.bus) {
            problems.push(Problem::new(
                format!("{path}.bus"),
                format!(
                    "unknown bus {:?} (no [[buses]] entry has that name)",
                    dev.bus
                ),
            ));
        } else {
            let valid =
                (1..=247).contains(&dev.unit_id) || (is_tcp != Some(false) && dev.unit_id == 255);
            if !valid {
                problems.push(Problem::new(
                    format!("{path}.unit_id"),
                    format!(
                        "{} is not a device address (1 to 247{})",
                        dev.unit_id,
                        if is_tcp == Some(false) {
                            ""
                        } else {
                            ", or 255 on TCP"
                        }
                    ),
                ));
            }
            if !addresses.insert((dev.bus.clone(), dev.unit_id)) {
                problems.push(Problem::new(
                    format!("{path}.unit_id"),
                    format!("unit id {} is used twice on bus {:?}", dev.unit_id, dev.bus),
                ));
            }
        }
        let device = resolve_device(&path, devices.len(), reference, dev, profiles, problems);
        devices.push(device);
        paths.push(path);
    }
    (devices, paths)
}

fn resolve_device(
    path: &str,
    index: usize,
    reference: String,
    d: RawDevice,
    profiles: &mut super::super::profiles::Resolver,
    problems: &mut Vec<Problem>,
) -> DeviceConfig {
    if d.poll_interval_ms < 100 || d.poll_interval_ms > 3_600_000 {
        problems.push(Problem::new(
            format!("{path}.poll_interval_ms"),
            format!("must be 100 to 3600000, found {}", d.poll_interval_ms),
        ));
    }
    let profile = match d.profile.as_str() {
        "sunspec" => ProfileRef::Sunspec,
        "" => {
            problems.push(Problem::new(format!("{path}.profile"), "must not be empty"));
            ProfileRef::Sunspec
        }
        name => resolve_profile(
            &format!("{path}.profile"),
            name,
            d.device_type,
            profiles,
            problems,
        ),
    };
    let profile = named_variant(path, d.variant.as_deref(), profile, problems);
    unrated_profile_battery(path, &d, &profile, problems);
    check_ratings(path, &d, problems);
    DeviceConfig {
        id: DeviceId(index as u16),
        reference,
        name: d.name,
        device_type: d.device_type,
        site: d.site,
        bus: d.bus,
        unit_id: d.unit_id,
        profile,
        poll_interval_ms: d.poll_interval_ms,
        invert_power: d.invert_power,
        rated_power_w: d.rated_power.map(|p| p.watts()),
        capacity_wh: d.capacity.map(|e| e.watt_hours()),
        soc_min: d.soc_min,
        soc_max: d.soc_max,
        max_charge_power_w: d.max_charge_power.map(|p| p.watts()),
        report_lag_ms: d
            .report_lag_ms
            .unwrap_or(super::super::DEFAULT_REPORT_LAG_MS),
        max_discharge_power_w: d.max_discharge_power.map(|p| p.watts()),
        priority: d.priority,
        modbus_server_unit_id: d.modbus_server_unit_id,
        modbus_server_forward_reads: d.modbus_server_forward_reads,
        modbus_server_forward_writes: d.modbus_server_forward_writes,
    }
}

/// The device's state-of-charge bounds (percentages, the lower below the
/// upper), its powers and capacity (not negative) and its report lag (a
/// meter's, at most a minute).
fn check_ratings(path: &str, d: &RawDevice, problems: &mut Vec<Problem>) {
    for (key, v) in [("soc_min", d.soc_min), ("soc_max", d.soc_max)] {
        if let Some(v) = v {
            if !(0.0..=100.0).contains(&v) {
                problems.push(Problem::new(
                    format!("{path}.{key}"),
                    format!("must be a percentage from 0 to 100, found {v}"),
                ));
            }
        }
    }
    if let (Some(lo), Some(hi)) = (d.soc_min, d.soc_max) {
        if lo >= hi {
            problems.push(Problem::new(
                format!("{path}.soc_min"),
                format!("soc_min ({lo}) must be below soc_max ({hi})"),
            ));
        }
    }
    for (key, p) in [
        ("rated_power", d.rated_power.map(|p| p.watts())),
        ("capacity", d.capacity.map(|e| e.watt_hours())),
        ("max_charge_power", d.max_charge_power.map(|p| p.watts())),
        (
            "max_discharge_power",
            d.max_discharge_power.map(|p| p.watts()),
        ),
    ] {
        if let Some(v) = p {
            if v < 0.0 {
                problems.push(Problem::new(
                    format!("{path}.{key}"),
                    format!("must not be negative, found {v}"),
                ));
            }
        }
    }
    match d.report_lag_ms {
        Some(_) if d.device_type != crate::model::DeviceType::Meter => problems.push(Problem::new(
            format!("{path}.report_lag_ms"),
            "applies to meters only",
        )),
        Some(v) if v > 60_000 => problems.push(Problem::new(
            format!("{path}.report_lag_ms"),
            format!("must be 0 to 60000, found {v}"),
        )),
        _ => {}
    }
}

/// The concrete profile of the variant the device names (`variant = "..."`);
/// without one, a family's variant is told from the device at first contact.
fn named_variant(
    path: &str,
    variant: Option<&str>,
    profile: ProfileRef,
    problems: &mut Vec<Problem>,
) -> ProfileRef {
    let Some(name) = variant else {
        return profile;
    };
    match &profile {
        ProfileRef::Sunspec => {
            problems.push(Problem::new(
                format!("{path}.variant"),
                format!("{name:?}: a variant belongs to a register-map profile, not to sunspec"),
            ));
            profile
        }
        ProfileRef::Registers(p) => match p.with_variant(name) {
            Ok(concrete) => ProfileRef::Registers(std::sync::Arc::new(concrete)),
            Err(e) => {
                problems.push(Problem::new(format!("{path}.variant"), e.to_string()));
                profile
            }
        },
    }
}

/// A battery steered through a profile's `ess_power` needs a rating from the
/// config: profiles read none, and steering shares storage power by rating, so
/// without one every setpoint would be 0 W.
fn unrated_profile_battery(
    path: &str,
    d: &RawDevice,
    profile: &ProfileRef,
    problems: &mut Vec<Problem>,
) {
    let ProfileRef::Registers(p) = profile else {
        return;
    };
    let steered =
        d.device_type == crate::model::DeviceType::Battery && p.controls.ess_power.is_some();
    let rated =
        d.rated_power.is_some() || d.max_charge_power.is_some() || d.max_discharge_power.is_some();
    if steered && !rated {
        problems.push(Problem::new(
            format!("{path}.rated_power"),
            format!(
                "required for a battery steered through profile {:?}, which reads no rating: \
                 without it every setpoint would be 0 W (or give max_charge_power and \
                 max_discharge_power)",
                p.name
            ),
        ));
    }
}

/// A named or path profile, or the problems that make it unusable (each with the
/// profile file's own path inside it). On failure the device falls back to
/// SunSpec so that checking goes on; the config is refused anyway.
fn resolve_profile(
    path: &str,
    name: &str,
    device_type: crate::model::DeviceType,
    profiles: &mut super::super::profiles::Resolver,
    problems: &mut Vec<Problem>,
) -> ProfileRef {
    use crate::profile::ProfileError;
    match profiles.resolve(name) {
        Ok(p) => {
            if !p.device_types.is_empty() && !p.device_types.contains(&device_type) {
                let types: Vec<&str> = p.device_types.iter().map(|t| t.as_str()).collect();
                problems.push(Problem::new(
                    path,
                    format!(
                        "profile {name:?} is written for {} devices, not {}",
                        types.join(", "),
                        device_type.as_str()
                    ),
                ));
            }
            ProfileRef::Registers(p)
        }
        Err(ProfileError::Invalid {
            origin,
            problems: found,
        }) => {
            for f in found {
                problems.push(Problem::new(path, format!("profile {origin}: {f}")));
            }
            ProfileRef::Sunspec
        }
        Err(e) => {
            problems.push(Problem::new(path, e.to_string()));
            ProfileRef::Sunspec
        }
    }
}
