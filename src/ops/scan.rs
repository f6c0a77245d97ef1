//! The `scan` operation: a configured Modbus TCP bus asked again for the
//! devices behind it (`modbus::scan`, what `sitegate scan` runs), answered
//! with ready config blocks that are **not applied**.
//!
//! It opens a connection of its own to the bus's address (Modbus TCP servers
//! and gateways take several), so the bus task's connection is never
//! touched. A serial bus is refused: its port is the bus task's alone.

use std::time::Duration;

use super::error::OpsError;
use super::operation::{OpRequest, Outcome, SCAN_UNITS_MAX};
use crate::config::{Config, Transport};
use crate::modbus::link::Port;
use crate::modbus::scan::{self, Progress};

/// Checks a scan request against the config before it is accepted.
pub fn check(config: &Config, request: &OpRequest) -> Result<(), OpsError> {
    let OpRequest::Scan {
        bus,
        units,
        timeout_ms,
        site,
    } = request
    else {
        return Ok(());
    };
    let Some(b) = config.buses.iter().find(|b| &b.name == bus) else {
        let names: Vec<&str> = config.buses.iter().map(|b| b.name.as_str()).collect();
        return Err(OpsError::Invalid {
            field: "bus",
            detail: format!("no bus {bus:?} in the config (buses: {})", names.join(", ")),
        });
    };
    if let Transport::Rtu(r) = &b.transport {
        return Err(OpsError::Invalid {
            field: "bus",
            detail: format!(
                "bus {bus:?} is the serial line {}, which the agent's bus task holds open: stop the agent and run `sitegate scan --rtu` on site",
                r.path.display()
            ),
        });
    }
    let parsed = scan::parse_units(units).map_err(|detail| OpsError::Invalid {
        field: "units",
        detail,
    })?;
    if parsed.len() > SCAN_UNITS_MAX {
        return Err(OpsError::Invalid {
            field: "units",
            detail: format!(
                "{units:?} names {} unit ids; at most {SCAN_UNITS_MAX}",
                parsed.len()
            ),
        });
    }
    if !(1..=5_000).contains(timeout_ms) {
        return Err(OpsError::Invalid {
            field: "timeoutMs",
            detail: format!("{timeout_ms} is not 1 to 5000 ms"),
        });
    }
    if let Some(site) = site {
        if config.site(site).is_none() {
            return Err(OpsError::Invalid {
                field: "site",
                detail: format!("no site {site:?} in the config"),
            });
        }
    }
    Ok(())
}

/// Runs a checked scan request.
pub async fn run(config: &Config, request: &OpRequest) -> Result<Outcome, String> {
    let OpRequest::Scan {
        bus,
        units,
        timeout_ms,
        site,
    } = request
    else {
        return Err("not a scan request".into());
    };
    let b = config
        .buses
        .iter()
        .find(|b| &b.name == bus)
        .ok_or_else(|| format!("bus {bus:?} is no longer in the config"))?;
    let units = scan::parse_units(units)?;
    let site = site
        .clone()
        .or_else(|| config.devices_on_bus(bus).next().map(|d| d.site.clone()))
        .or_else(|| config.sites.first().map(|s| s.reference.clone()))
        .unwrap_or_else(|| "ste_site".into());
    let mut port = Port::new(b.transport.clone(), Duration::from_millis(*timeout_ms));
    let mut notes = Vec::new();
    let found = scan::scan_all(&mut port, &units, |p| match p {
        Progress::NotSunspec(u) => notes.push(format!(
            "unit {u}: answers, but holds no SunSpec map and no profile recognises it"
        )),
        Progress::Identified(d) => {
            if let Some(why) = &d.variant_problem {
                notes.push(format!("unit {}: profile {}: {why}", d.unit, d.profile));
            }
        }
        Progress::Asking(_) | Progress::Failed(..) => {}
    })
    .await;
    port.close().await;
    let count = found.sunspec.len() + found.profiles.len();
    let config_text = if found.is_empty() {
        String::new()
    } else {
        scan::snippet_all(bus, &b.transport, b.timeout_ms, &found, &site)
    };
    Ok(Outcome::Scan {
        bus: bus.clone(),
        found: count,
        config: config_text,
        notes,
    })
}
