//! `[[sites]]`: each site's reference, limits, control settings and grid
//! signals. Collects problems; never stops early.

use std::collections::HashSet;

use super::super::problem::Problem;
use super::super::SiteConfig;
use super::check_identifier;

/// The sites that parsed, each checked, in file order.
pub(super) fn resolve_sites(
    raw: Vec<Option<SiteConfig>>,
    declared_buses: &HashSet<String>,
    problems: &mut Vec<Problem>,
) -> Vec<SiteConfig> {
    let mut site_refs = HashSet::new();
    let mut sites = Vec::new();
    for (i, site) in raw.into_iter().enumerate() {
        let Some(site) = site else { continue };
        let path = format!("sites[{i}]");
        check_identifier(&format!("{path}.reference"), &site.reference, problems);
        if !site_refs.insert(site.reference.clone()) {
            problems.push(Problem::new(
                format!("{path}.reference"),
                format!("duplicate site reference {:?}", site.reference),
            ));
        }
        for (key, p) in [
            ("max_import", site.max_import),
            ("max_export", site.max_export),
            ("rated_production_power", site.rated_production_power),
        ] {
            if let Some(p) = p {
                if p.watts() < 0.0 {
                    problems.push(Problem::new(
                        format!("{path}.{key}"),
                        format!("must not be negative, found {} W", p.watts()),
                    ));
                }
            }
        }
        if site.control_interval_ms < 100 {
            problems.push(Problem::new(
                format!("{path}.control_interval_ms"),
                format!("must be at least 100, found {}", site.control_interval_ms),
            ));
        }
        let ramp = site.grid_loop.ramp_percent_per_s;
        if !(ramp.is_finite() && ramp > 0.0 && ramp <= 100.0) {
            problems.push(Problem::new(
                format!("{path}.grid_loop.ramp_percent_per_s"),
                format!("must be above 0 and at most 100, found {ramp}"),
            ));
        }
        for (j, g) in site.grid_signals.iter().enumerate() {
            check_grid_signal(
                &format!("{path}.grid_signals[{j}]"),
                g,
                declared_buses,
                problems,
            );
        }
        if site.revert_timeout_s < 2 {
            problems.push(Problem::new(
                format!("{path}.revert_timeout_s"),
                format!(
                    "must be 2 to 65535 seconds (setpoints are refreshed at half of it), found {}",
                    site.revert_timeout_s
                ),
            ));
        }
        sites.push(site);
    }
    sites
}

/// A grid signal: its bus exists, its inputs are located, its levels are
/// distinct values the inputs can take, each with a limit.
fn check_grid_signal(
    path: &str,
    g: &super::super::GridSignalConfig,
    buses: &HashSet<String>,
    problems: &mut Vec<Problem>,
) {
    let mut bad =
        |key: &str, msg: String| problems.push(Problem::new(format!("{path}.{key}"), msg));
    if !buses.contains(&g.bus) {
        bad(
            "bus",
            format!("unknown bus {:?} (no [[buses]] entry has that name)", g.bus),
        );
    }
    if let Some(m) = &g.module {
        if crate::register::io::module(m).is_none() {
            bad(
                "module",
                format!(
                    "unknown module {m:?}; built-in modules: {}",
                    crate::register::io::module_names()
                ),
            );
        }
    }
    let block = g.block();
    if block.is_none() && g.module.is_none() {
        bad(
            "module",
            "give a module (e.g. \"generic-di\") or table, register and inputs".into(),
        );
    }
    let inputs = block.map_or(16, |b| b.inputs);
    if !(1..=16).contains(&inputs) {
        bad("inputs", format!("must be 1 to 16, found {inputs}"));
    }
    if g.poll_interval_ms < 100 || g.poll_interval_ms > 60_000 {
        bad(
            "poll_interval_ms",
            format!("must be 100 to 60000, found {}", g.poll_interval_ms),
        );
    }
    if g.levels.is_empty() {
        bad("levels", "at least one level is needed".into());
    }
    let max_value = (1u32 << inputs.clamp(1, 16)) - 1;
    let mut seen = HashSet::new();
    for (k, l) in g.levels.iter().enumerate() {
        if u32::from(l.value) > max_value {
            bad(
                &format!("levels[{k}].value"),
                format!(
                    "{} cannot come from {inputs} inputs (at most {max_value})",
                    l.value
                ),
            );
        }
        if !seen.insert(l.value) {
            bad(
                &format!("levels[{k}].value"),
                format!("value {} is listed twice", l.value),
            );
        }
        if l.max_import.is_none() && l.max_export.is_none() && l.max_consumption.is_none() {
            bad(
                &format!("levels[{k}]"),
                "give max_import, max_export, max_consumption or several (\"100 %\" for no limit)"
                    .into(),
            );
        }
        if let Some(w) = l.max_consumption.map(|p| p.watts()) {
            if !(0.0..=1e9).contains(&w) {
                bad(
                    &format!("levels[{k}].max_consumption"),
                    format!("must be 0 to 1000000000 W, found {w} W"),
                );
            }
        }
        for (key, v) in [("max_import", l.max_import), ("max_export", l.max_export)] {
            if let Some(super::super::PowerShare::Watts(w)) = v {
                if w < 0.0 {
                    bad(
                        &format!("levels[{k}].{key}"),
                        format!("must not be negative, found {w} W"),
                    );
                }
            }
        }
    }
    if let Some(v) = g.lost_value {
        if !g.levels.iter().any(|l| l.value == v) {
            bad(
                "lost_value",
                format!("{v} is not one of the levels' values"),
            );
        }
    }
}
