//! Which configuration changes a running agent can take without a restart:
//! a pure decision over the running config and a new one
//! (`docs/operations.md`, "What applies live").
//!
//! Live: the API's tokens, auth mode and rate limit, the log level (what
//! SIGHUP reloads), new meters appended to the devices on a bus that
//! already runs, at a site that holds no grid limit and has no grid signal,
//! and new values of a site's grid limits (`max_import`, `max_export`) where
//! the site holds a grid limit before and after (its control loop reads them
//! at its next tick). Everything else needs a restart. A new inverter or
//! battery needs one because steering must own every steerable device from
//! its first poll (partner signals, fallbacks, the grid loop); a meter at a
//! site with a grid limit because the grid loop picks its meter at start; a
//! site's first grid limit, or its last one removed, because the site may
//! have a meter added live that its grid loop lacks; a device on a new bus
//! because the bus tasks, the watchdog and the metrics are set up at start.
//! Whether a change lowers safety is not decided here (`ops::safety`). It
//! must not read, write or apply anything.

use super::{Config, DeviceConfig, Power, SiteConfig};
use crate::model::DeviceType;

/// How a new config can be applied.
#[derive(Clone, Debug, PartialEq)]
pub enum Apply {
    /// Without a restart: reload what SIGHUP reloads, give these sites
    /// their new grid limits and add these devices.
    Live {
        limits: Vec<SiteLimits>,
        added: Vec<DeviceConfig>,
    },
    /// Only by a restart, for these reasons (one per difference).
    Restart(Vec<String>),
}

/// A site's grid limits in a new config (`None`: no limit that way).
#[derive(Clone, Debug, PartialEq)]
pub struct SiteLimits {
    pub site: String,
    pub max_import: Option<Power>,
    pub max_export: Option<Power>,
}

/// The sections of `new` that differ from `old` in ways only a restart
/// applies, the devices aside (everything but the API's tokens, auth mode
/// and rate limit, and the log level).
pub fn restart_needed(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut changed = sections_but_devices_and_sites(old, new);
    if old.sites != new.sites {
        changed.push("sites");
    }
    if old.devices != new.devices {
        changed.push("devices");
    }
    changed
}

fn sections_but_devices_and_sites(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut check = |name: &'static str, same: bool| {
        if !same {
            changed.push(name);
        }
    };
    check("gateway_id", old.gateway_id == new.gateway_id);
    check("http.listen", old.http.listen == new.http.listen);
    check(
        "http.https_listen",
        old.http.https_listen == new.http.https_listen,
    );
    check("http.tls", old.http.tls == new.http.tls);
    check(
        "http.allow_plain_tokens",
        old.http.allow_plain_tokens == new.http.allow_plain_tokens,
    );
    check("http.metrics", old.http.metrics == new.http.metrics);
    check(
        "http.request_timeout_ms",
        old.http.request_timeout_ms == new.http.request_timeout_ms,
    );
    check("storage", old.storage == new.storage);
    check("polling", old.polling == new.polling);
    check("clock", old.clock == new.clock);
    check("logging.format", old.logging.format == new.logging.format);
    check("buses", old.buses == new.buses);
    check("mqtt", old.mqtt == new.mqtt);
    check("modbus_server", old.modbus_server == new.modbus_server);
    check("csip_aus", old.csip == new.csip);
    check("eebus", old.eebus == new.eebus);
    check("profiles_dir", old.profiles_dir == new.profiles_dir);
    changed
}

/// Whether `new` can replace `old` in a running agent, and how.
pub fn decide(old: &Config, new: &Config) -> Apply {
    let mut reasons: Vec<String> = sections_but_devices_and_sites(old, new)
        .into_iter()
        .map(|s| format!("{s} changed"))
        .collect();
    let limits = match new_limits(old, new) {
        Ok(limits) => limits,
        Err(why) => {
            reasons.push(why);
            Vec::new()
        }
    };
    // `[ops]` is read by the running operations: a new window applies at
    // the next start.
    if old.ops != new.ops {
        reasons.push("ops changed".into());
    }
    let kept = old.devices.len().min(new.devices.len());
    if new.devices.len() < old.devices.len() {
        reasons.push("devices removed".into());
    }
    if old.devices[..kept] != new.devices[..kept] {
        reasons.push(
            "devices changed or reordered (only devices appended at the end apply live)".into(),
        );
    }
    let added = &new.devices[kept..];
    for d in added {
        if let Some(why) = not_addable(new, d, old) {
            reasons.push(format!("new device {}: {why}", d.reference));
        }
    }
    if reasons.is_empty() {
        Apply::Live {
            limits,
            added: added.to_vec(),
        }
    } else {
        Apply::Restart(reasons)
    }
}

/// The sites whose grid limits change, when nothing else of the sites
/// does; `Err` says why the sites need a restart.
fn new_limits(old: &Config, new: &Config) -> Result<Vec<SiteLimits>, String> {
    if old.sites == new.sites {
        return Ok(Vec::new());
    }
    let refs = |c: &Config| {
        c.sites
            .iter()
            .map(|s| s.reference.clone())
            .collect::<Vec<_>>()
    };
    if refs(old) != refs(new) {
        return Err("sites changed (added, removed or reordered)".into());
    }
    let mut out = Vec::new();
    for (o, n) in old.sites.iter().zip(&new.sites) {
        if o == n {
            continue;
        }
        let same_but_limits = SiteConfig {
            max_import: o.max_import,
            max_export: o.max_export,
            ..n.clone()
        };
        if &same_but_limits != o {
            return Err(format!(
                "sites {:?} changed beyond its grid limits (max_import, max_export)",
                o.reference
            ));
        }
        let holds = |s: &SiteConfig| s.max_import.is_some() || s.max_export.is_some();
        if !holds(o) || !holds(n) {
            return Err(format!(
                "sites {:?}: a first grid limit or the last one removed (the grid loop takes its meters at start)",
                o.reference
            ));
        }
        out.push(SiteLimits {
            site: n.reference.clone(),
            max_import: n.max_import,
            max_export: n.max_export,
        });
    }
    Ok(out)
}

/// Why `d` (a device of `new`) cannot be added to a running agent on `old`.
fn not_addable(new: &Config, d: &DeviceConfig, old: &Config) -> Option<String> {
    if d.device_type != DeviceType::Meter {
        return Some(format!(
            "a new {} is steerable: steering takes it at the next start",
            d.device_type.as_str()
        ));
    }
    if !old.buses.iter().any(|b| b.name == d.bus) {
        return Some(format!("its bus {} does not run yet", d.bus));
    }
    match new.site(&d.site) {
        Some(s) if s.max_import.is_some() || s.max_export.is_some() => Some(format!(
            "its site {} holds a grid limit: the grid loop picks its meter at start",
            d.site
        )),
        Some(s) if !s.grid_signals.is_empty() => Some(format!(
            "its site {} has grid signals: steering takes its meter at start",
            d.site
        )),
        Some(_) => None,
        None => Some(format!("its site {} is not configured", d.site)),
    }
}

#[cfg(test)]
mod tests;
