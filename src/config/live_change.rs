//! Which configuration changes a running agent can take without a restart:
//! a pure decision over the running config and a new one
//! (`docs/operations.md`, "What applies live").
//!
//! Live: the API's tokens, auth mode and rate limit, the log level (what
//! SIGHUP reloads), and new meters appended to the devices on a bus that
//! already runs, at a site that holds no grid limit and has no grid signal.
//! Everything else needs a restart. A new inverter or battery needs one
//! because steering must own every steerable device from its first poll
//! (partner signals, fallbacks, the grid loop); a meter at a site with a
//! grid limit because the grid loop picks its meter at start; a device on a
//! new bus because the bus tasks, the watchdog and the metrics are set up at
//! start. It must not read, write or apply anything.

use super::{Config, DeviceConfig};
use crate::model::DeviceType;

/// How a new config can be applied.
#[derive(Clone, Debug, PartialEq)]
pub enum Apply {
    /// Without a restart: reload what SIGHUP reloads and add these devices.
    Live { added: Vec<DeviceConfig> },
    /// Only by a restart, for these reasons (one per difference).
    Restart(Vec<String>),
}

/// The sections of `new` that differ from `old` in ways only a restart
/// applies, the devices aside (everything but the API's tokens, auth mode
/// and rate limit, and the log level).
pub fn restart_needed(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut changed = sections_but_devices(old, new);
    if old.devices != new.devices {
        changed.push("devices");
    }
    changed
}

fn sections_but_devices(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut check = |name: &'static str, same: bool| {
        if !same {
            changed.push(name);
        }
    };
    check("gateway_id", old.gateway_id == new.gateway_id);
    check("http.listen", old.http.listen == new.http.listen);
    check("http.metrics", old.http.metrics == new.http.metrics);
    check(
        "http.request_timeout_ms",
        old.http.request_timeout_ms == new.http.request_timeout_ms,
    );
    check("storage", old.storage == new.storage);
    check("polling", old.polling == new.polling);
    check("clock", old.clock == new.clock);
    check("logging.format", old.logging.format == new.logging.format);
    check("sites", old.sites == new.sites);
    check("buses", old.buses == new.buses);
    check("mqtt", old.mqtt == new.mqtt);
    check("profiles_dir", old.profiles_dir == new.profiles_dir);
    changed
}

/// Whether `new` can replace `old` in a running agent, and how.
pub fn decide(old: &Config, new: &Config) -> Apply {
    let mut reasons: Vec<String> = sections_but_devices(old, new)
        .into_iter()
        .map(|s| format!("{s} changed"))
        .collect();
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
            added: added.to_vec(),
        }
    } else {
        Apply::Restart(reasons)
    }
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
mod tests {
    use super::*;

    const BASE: &str = r#"
gateway_id = "t"
[http]
auth = "none"
listen = ["127.0.0.1:0"]
[logging]
level = "info"
[[sites]]
reference = "ste_limited"
name = "Limited"
max_import = "30 kW"
[[sites]]
reference = "ste_free"
name = "Free"
[[buses]]
name = "a"
tcp = "127.0.0.1:1502"
[[devices]]
reference = "dvc_inv"
name = "Inverter"
type = "inverter"
site = "ste_limited"
bus = "a"
unit_id = 1
[[devices]]
reference = "dvc_m0"
name = "Meter 0"
type = "meter"
site = "ste_free"
bus = "a"
unit_id = 2
"#;

    fn device(reference: &str, kind: &str, site: &str, bus: &str, unit: u8) -> String {
        format!(
            "\n[[devices]]\nreference = \"{reference}\"\nname = \"{reference}\"\ntype = \"{kind}\"\nsite = \"{site}\"\nbus = \"{bus}\"\nunit_id = {unit}\n"
        )
    }

    const BUS_B: &str = "\n[[buses]]\nname = \"b\"\ntcp = \"127.0.0.1:1503\"\n";

    fn parse(text: &str) -> Config {
        crate::config::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn restart_reasons(apply: Apply) -> Vec<String> {
        match apply {
            Apply::Restart(r) => r,
            Apply::Live { added } => panic!("live, adding {added:?}"),
        }
    }

    /// What, the new text, and live (the references added) or a piece of
    /// every restart reason.
    type Case = (
        &'static str,
        String,
        Result<Vec<&'static str>, Vec<&'static str>>,
    );

    #[test]
    fn decides_live_or_restart() {
        let old = parse(BASE);
        let meter = device("dvc_m1", "meter", "ste_free", "a", 3);
        let cases: Vec<Case> = vec![
            ("nothing", BASE.into(), Ok(vec![])),
            (
                "log level and auth",
                BASE.replace("level = \"info\"", "level = \"debug\""),
                Ok(vec![]),
            ),
            (
                "a meter on a running bus, free site",
                format!("{BASE}{meter}"),
                Ok(vec!["dvc_m1"]),
            ),
            (
                "two meters and a new log level",
                format!(
                    "{BASE}{meter}{}",
                    device("dvc_m2", "meter", "ste_free", "a", 4)
                )
                .replace("level = \"info\"", "level = \"warn\""),
                Ok(vec!["dvc_m1", "dvc_m2"]),
            ),
            (
                "an inverter",
                format!("{BASE}{}", device("dvc_i2", "inverter", "ste_free", "a", 3)),
                Err(vec!["new device dvc_i2: a new inverter is steerable"]),
            ),
            (
                "a battery",
                format!("{BASE}{}", device("dvc_b", "battery", "ste_free", "a", 3)),
                Err(vec!["new device dvc_b: a new battery is steerable"]),
            ),
            (
                "a meter at a site with a grid limit",
                format!("{BASE}{}", device("dvc_g", "meter", "ste_limited", "a", 3)),
                Err(vec!["its site ste_limited holds a grid limit"]),
            ),
            (
                "a meter on a new bus",
                format!(
                    "{BASE}{BUS_B}{}",
                    device("dvc_m1", "meter", "ste_free", "b", 1)
                ),
                Err(vec!["buses changed", "its bus b does not run yet"]),
            ),
            (
                "a meter inserted before the others",
                BASE.replacen("\n[[devices]]", &format!("{meter}\n[[devices]]"), 1),
                Err(vec!["reordered"]),
            ),
            (
                "a device removed",
                BASE[..BASE.rfind("[[devices]]").unwrap_or(0)].to_string(),
                Err(vec!["devices removed"]),
            ),
            (
                "a device changed",
                BASE.replace("unit_id = 2", "unit_id = 7"),
                Err(vec!["devices changed"]),
            ),
            (
                "a meter and a grid limit",
                format!("{BASE}{meter}")
                    .replace("name = \"Free\"", "name = \"Free\"\nmax_export = \"5 kW\""),
                Err(vec!["sites changed", "holds a grid limit"]),
            ),
            (
                "the ops window",
                format!("{BASE}\n[ops]\nrollback_after_s = 30\n"),
                Err(vec!["ops changed"]),
            ),
            (
                "the gateway id",
                BASE.replace("gateway_id = \"t\"", "gateway_id = \"u\""),
                Err(vec!["gateway_id changed"]),
            ),
        ];
        for (what, text, expected) in cases {
            let got = decide(&old, &parse(&text));
            match expected {
                Ok(refs) => match got {
                    Apply::Live { added } => assert_eq!(
                        added
                            .iter()
                            .map(|d| d.reference.as_str())
                            .collect::<Vec<_>>(),
                        refs,
                        "{what}"
                    ),
                    Apply::Restart(r) => panic!("{what}: restart for {r:?}"),
                },
                Err(pieces) => {
                    let reasons = restart_reasons(got);
                    for p in pieces {
                        assert!(
                            reasons.iter().any(|r| r.contains(p)),
                            "{what}: {p:?} not in {reasons:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn only_tokens_auth_rate_and_level_reload_without_a_restart() {
        let text = include_str!("../../config/demo.toml");
        let old = crate::config::parse(text).expect("demo config");
        let mut new = old.clone();
        new.http.tokens.clear();
        new.http.rate_limit.burst += 1;
        new.logging.level = "debug".into();
        assert!(restart_needed(&old, &new).is_empty());
        new.http.request_timeout_ms += 1;
        new.storage.flush_interval_ms += 1;
        new.devices[0].poll_interval_ms += 1;
        assert_eq!(
            restart_needed(&old, &new),
            vec!["http.request_timeout_ms", "storage", "devices"]
        );
    }
}
