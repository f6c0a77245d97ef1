//! Which differences between the running config and a new one lower the
//! site's safety, and so need the request's explicit `allowLessSafe`:
//! a site's grid limit raised or removed (its max import or max export), a
//! grid loop switched off, a site with grid limits removed, a steerable
//! device (a battery or an inverter: what steering writes to) removed.
//!
//! Pure: a function of two configs. It must not refuse or apply anything.

use crate::config::{Config, Power, SiteConfig};
use crate::model::DeviceType;

/// Each change of `new` against `old` that lowers safety, as a sentence
/// naming its config path and values; empty when none does.
pub fn less_safe(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for o in &old.sites {
        let Some(n) = new.site(&o.reference) else {
            if o.max_import.is_some() || o.max_export.is_some() || o.grid_loop.enabled {
                out.push(format!(
                    "sites {:?} removed: its grid limits are no longer held",
                    o.reference
                ));
            }
            continue;
        };
        limit(&mut out, o, "max_import", o.max_import, n.max_import);
        limit(&mut out, o, "max_export", o.max_export, n.max_export);
        if o.grid_loop.enabled && !n.grid_loop.enabled {
            out.push(format!(
                "sites {:?}: grid_loop.enabled turned off: its grid limits are no longer held at the meter",
                o.reference
            ));
        }
    }
    for d in &old.devices {
        let steerable = matches!(d.device_type, DeviceType::Battery | DeviceType::Inverter);
        if steerable && new.device(&d.reference).is_none() {
            out.push(format!(
                "devices {:?} ({}) removed: a steerable device leaves the agent's control",
                d.reference,
                d.device_type.as_str()
            ));
        }
    }
    out
}

fn limit(
    out: &mut Vec<String>,
    site: &SiteConfig,
    key: &str,
    old: Option<Power>,
    new: Option<Power>,
) {
    let Some(o) = old else { return };
    let kw = |p: Power| format!("{} kW", p.watts() / 1000.0);
    match new {
        None => out.push(format!(
            "sites {:?}: {key} removed (was {}): the limit is lifted",
            site.reference,
            kw(o)
        )),
        Some(n) if n.watts() > o.watts() => out.push(format!(
            "sites {:?}: {key} raised from {} to {}",
            site.reference,
            kw(o),
            kw(n)
        )),
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
gateway_id = "t"
[http]
auth = "none"
listen = ["127.0.0.1:8080"]
[[sites]]
reference = "ste_a"
name = "A"
max_import = "30 kW"
max_export = "20 kW"
[[buses]]
name = "b"
tcp = "127.0.0.1:502"
[[devices]]
reference = "dvc_bat"
name = "Battery"
type = "battery"
site = "ste_a"
bus = "b"
unit_id = 1
[[devices]]
reference = "dvc_meter"
name = "Meter"
type = "meter"
site = "ste_a"
bus = "b"
unit_id = 2
"#;

    fn check(edit: impl Fn(&str) -> String, expected: &[&str]) {
        let old = crate::config::parse(BASE).expect("base");
        let new = crate::config::parse(&edit(BASE)).expect("edited");
        let found = less_safe(&old, &new);
        assert_eq!(found.len(), expected.len(), "{found:?}");
        for (f, e) in found.iter().zip(expected) {
            assert!(f.contains(e), "{f:?} lacks {e:?}");
        }
    }

    #[test]
    fn lowering_limits_or_adding_devices_is_not_less_safe() {
        check(|t| t.to_string(), &[]);
        check(|t| t.replace("\"30 kW\"", "\"25 kW\""), &[]);
        check(
            |t| t.replace("max_export = \"20 kW\"", "max_export = \"0 kW\""),
            &[],
        );
        check(
            |t| {
                format!("{t}[[devices]]\nreference = \"dvc_pv\"\nname = \"PV\"\ntype = \"inverter\"\nsite = \"ste_a\"\nbus = \"b\"\nunit_id = 3\n")
            },
            &[],
        );
        // A meter is not steered.
        check(
            |t| {
                t.split("[[devices]]\nreference = \"dvc_meter\"")
                    .next()
                    .unwrap_or("")
                    .to_string()
            },
            &[],
        );
    }

    #[test]
    fn raised_or_lifted_limits_an_idle_loop_and_a_removed_battery_are() {
        check(
            |t| t.replace("\"30 kW\"", "\"40 kW\""),
            &["max_import raised from 30 kW to 40 kW"],
        );
        check(
            |t| t.replace("max_export = \"20 kW\"\n", ""),
            &["max_export removed (was 20 kW)"],
        );
        check(
            |t| {
                t.replace(
                    "max_export = \"20 kW\"\n",
                    "max_export = \"20 kW\"\ngrid_loop = { enabled = false }\n",
                )
            },
            &["grid_loop.enabled turned off"],
        );
        check(
            |t| {
                t.replace("reference = \"dvc_bat\"\nname = \"Battery\"\ntype = \"battery\"\nsite = \"ste_a\"\nbus = \"b\"\nunit_id = 1\n", "reference = \"dvc_m2\"\nname = \"M2\"\ntype = \"meter\"\nsite = \"ste_a\"\nbus = \"b\"\nunit_id = 1\n")
            },
            &["devices \"dvc_bat\" (battery) removed"],
        );
    }
}
