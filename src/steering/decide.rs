//! Control decisions: from the combined signal active now, the devices' views and
//! the site's measurements to one command per device (`steering.md`, "Precedence
//! at fulfilment").
//!
//! Pure: the control loop gathers the inputs and applies the result. This file must
//! not read the clock, the live state or a bus.

use std::collections::BTreeSet;

use super::alloc::{allocate_ess, allocate_production, site_soc, BatteryView, InverterView};
use super::signal::Active;
use super::value::{Component, EssSetting};
use crate::config::{CurtailmentFulfilment, EssFallback, EssFulfilment};

/// Maximize grid import aims this fraction below `maxImport`, so that a load step
/// between two control ticks does not push the import over the limit.
pub const MGI_MARGIN: f64 = 0.02;

/// The site's fixed rules, from config.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteRules {
    pub ess: EssFulfilment,
    pub curtailment: CurtailmentFulfilment,
    pub ess_fallback: EssFallback,
    pub max_import_w: Option<f64>,
    pub max_export_w: Option<f64>,
    /// The 100 % of percentage curtailment.
    pub rated_production_w: f64,
}

/// Site measurements; each is `None` when not every device involved reported one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measurements {
    /// Grid meter, + import.
    pub grid_w: Option<f64>,
    /// Sum over batteries, + discharge.
    pub battery_w: Option<f64>,
    /// Sum over inverters, + produced.
    pub production_w: Option<f64>,
}

/// What one device is told.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Command {
    /// Exact storage power (W, + discharge); 0 is idle.
    EssPower(f64),
    /// Remote control released: the storage runs its own logic.
    EssRelease,
    /// Production limit (W).
    ProductionLimit(f64),
    /// No production limit.
    ProductionRelease,
}

impl Command {
    /// True for commands that hold a device under remote control (and so need
    /// refreshing before the device's revert timer fires).
    pub const fn is_control(self) -> bool {
        matches!(self, Command::EssPower(_) | Command::ProductionLimit(_))
    }
}

/// A target that a limit changed, for the steering state.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    pub component: Component,
    pub requested_w: f64,
    pub applied_w: f64,
    pub reason: String,
}

/// One command per battery and per inverter, in the order of the views given.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub batteries: Vec<Command>,
    pub inverters: Vec<Command>,
    /// The component that decided the batteries' commands; `None` at fallback.
    pub storage_by: Option<Component>,
    /// The component that decided the inverters' commands; `None` at fallback.
    pub production_by: Option<Component>,
    pub notes: Vec<Note>,
    /// An `untilSoc` request whose target the site reached in this decision.
    pub reached: Option<String>,
}

pub fn decide(
    rules: &SiteRules,
    active: &Active,
    batteries: &[BatteryView],
    inverters: &[InverterView],
    m: &Measurements,
    reached: &BTreeSet<String>,
) -> Decision {
    let mut d = Decision {
        batteries: Vec::new(),
        inverters: Vec::new(),
        storage_by: None,
        production_by: None,
        notes: Vec::new(),
        reached: None,
    };
    if active
        .maximize_grid_import
        .as_ref()
        .is_some_and(|e| e.value)
    {
        maximize_import(rules, batteries, inverters, m, &mut d);
        return d;
    }
    storage(rules, active, batteries, m, reached, &mut d);
    production(rules, active, inverters, &mut d);
    d
}

fn storage(
    rules: &SiteRules,
    active: &Active,
    batteries: &[BatteryView],
    m: &Measurements,
    reached: &BTreeSet<String>,
    d: &mut Decision,
) {
    let Some(entry) = &active.ess else {
        let c = match rules.ess_fallback {
            EssFallback::Auto => Command::EssRelease,
            EssFallback::Idle => Command::EssPower(0.0),
        };
        d.batteries = vec![c; batteries.len()];
        return;
    };
    d.storage_by = Some(Component::Ess);
    let requested = match &entry.value {
        EssSetting::Idle => 0.0,
        EssSetting::Power(p) => p.as_watts(),
        EssSetting::UntilSoc { power, until_soc } => {
            let w = power.as_watts();
            let done = reached.contains(&entry.request_id)
                || site_soc(batteries).is_some_and(|soc| {
                    (w > 0.0 && soc <= *until_soc) || (w < 0.0 && soc >= *until_soc)
                });
            if done {
                if !reached.contains(&entry.request_id) {
                    d.reached = Some(entry.request_id.clone());
                }
                0.0
            } else {
                w
            }
        }
    };
    let (target, reason) = grid_clamp(rules, m, requested);
    let a = allocate_ess(rules.ess, batteries, target);
    if let Some(reason) = reason {
        d.notes
            .push(note(Component::Ess, requested, a.target_w, reason));
    } else if (a.target_w - requested).abs() > 1.0 {
        d.notes.push(note(
            Component::Ess,
            requested,
            a.target_w,
            "beyond what the batteries can do now (power limits, SoC bounds)".into(),
        ));
    }
    d.batteries = a.setpoints.into_iter().map(Command::EssPower).collect();
}

/// The storage may not push the grid beyond its limits: a discharge is cut so the
/// export stays within `maxExport`, a charge so the import stays within
/// `maxImport`. It only reduces the magnitude; it never turns idle into action.
fn grid_clamp(rules: &SiteRules, m: &Measurements, p: f64) -> (f64, Option<String>) {
    // The site's net import without the storage, when measured; else the storage
    // alone must stay within the limits.
    let net = match (m.grid_w, m.battery_w) {
        (Some(g), Some(b)) => g + b,
        _ => 0.0,
    };
    if p > 0.0 {
        if let Some(max) = rules.max_export_w {
            let hi = (net + max).max(0.0);
            if p > hi {
                return (hi, Some(format!("site maxExport {max} W")));
            }
        }
    } else if p < 0.0 {
        if let Some(max) = rules.max_import_w {
            let lo = (net - max).min(0.0);
            if p < lo {
                return (lo, Some(format!("site maxImport {max} W")));
            }
        }
    }
    (p, None)
}

fn production(rules: &SiteRules, active: &Active, inverters: &[InverterView], d: &mut Decision) {
    let Some(entry) = &active.curtailment else {
        d.inverters = vec![Command::ProductionRelease; inverters.len()];
        return;
    };
    d.production_by = Some(Component::Curtailment);
    let limit = entry.value.watts(rules.rated_production_w);
    let limits = allocate_production(rules.curtailment, inverters, limit);
    d.inverters = limits.into_iter().map(Command::ProductionLimit).collect();
}

/// Storage charges as much as it can and production is held back, while the
/// import stays below `maxImport` (closed loop on the grid meter).
fn maximize_import(
    rules: &SiteRules,
    batteries: &[BatteryView],
    inverters: &[InverterView],
    m: &Measurements,
    d: &mut Decision,
) {
    d.storage_by = Some(Component::MaximizeGridImport);
    d.production_by = Some(Component::MaximizeGridImport);
    let can_charge: f64 = batteries.iter().map(BatteryView::charge_cap).sum();
    let cap = rules.max_import_w.map(|w| w * (1.0 - MGI_MARGIN));
    let (charge, release_production) = match (cap, m.grid_w, m.battery_w, m.production_w) {
        (None, ..) => (can_charge, false),
        (Some(cap), Some(g), Some(b), Some(pv)) => {
            // The consumption the site has whatever the storage and PV do.
            let load = g + b + pv;
            let charge = (cap - load).clamp(0.0, can_charge);
            // With the load alone over the limit, production helps: let it run.
            (charge, load > cap)
        }
        (Some(cap), ..) => {
            d.notes.push(note(
                Component::MaximizeGridImport,
                -can_charge,
                -can_charge.min(cap),
                "no complete grid, storage and production measurements: charging held to maxImport alone".into(),
            ));
            (can_charge.min(cap), false)
        }
    };
    let a = allocate_ess(rules.ess, batteries, -charge);
    d.batteries = a.setpoints.into_iter().map(Command::EssPower).collect();
    d.inverters = if release_production {
        vec![Command::ProductionRelease; inverters.len()]
    } else {
        vec![Command::ProductionLimit(0.0); inverters.len()]
    };
}

fn note(component: Component, requested_w: f64, applied_w: f64, reason: String) -> Note {
    Note {
        component,
        requested_w,
        applied_w,
        reason,
    }
}

#[cfg(test)]
mod tests;
