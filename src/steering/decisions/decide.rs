//! Control decisions: from the combined signal active now, the devices' views and
//! the site's measurements to one command per device: the site plan first,
//! then the grid limits, then the fulfilment rules (`docs/steering.md`).
//!
//! Pure: the control loop gathers the inputs and applies the result. This file must
//! not read the clock, the live state or a bus.

use std::collections::BTreeSet;

use super::alloc::{allocate_ess, allocate_production, site_soc, BatteryView, InverterView};
use super::der_bounds::DerBounds;
use super::hold::{
    cap_rule, hold, Change, Held, ImportOrder, LoopMode, LoopSettings, LoopState, Meter,
    ProductionPlan, Sensed, Side, SitePlan, StoragePlan,
};
use super::limits::{in_force, GridLimits, OperatorLimits, ServerLimits};
use super::open_loop::{open_loop, Net};
use super::settle::{production_limits, storage_setpoints};
use crate::config::{CurtailmentFulfilment, EssFallback, EssFulfilment};
use crate::steering::signal::Active;
use crate::steering::sources::{Kind, OperatorSet, SourceLimit};
use crate::steering::value::{Component, EssSetting};

/// How long the grid loop expects a battery to keep charging, s.
const SUSTAINED_CHARGE_S: f64 = 120.0;

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
    /// The grid loop's settings; `None` when it is turned off.
    pub grid_loop: Option<LoopSettings>,
}

/// Site measurements.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurements {
    /// The grid meter; `None` when the site has none.
    pub meter: Option<Meter>,
    /// Sum over batteries, + discharge; `None` unless every battery reported one.
    pub battery_w: Option<f64>,
    /// Sum over inverters, + produced; `None` unless every inverter reported one.
    pub production_w: Option<f64>,
    /// Sum over the batteries that are online with a reading.
    pub online_battery_w: f64,
    /// The oldest reading among the meter and the online steered devices.
    pub readings_from_ms: i64,
    /// The latest power reading of each steered device (batteries, then
    /// inverters): when it was taken and its value; `None` while offline.
    pub readings: Vec<Option<(i64, f64)>>,
    /// Limits a grid operator's signal sets now.
    pub operator: OperatorLimits,
    /// Limits a SCADA set over the Modbus server.
    pub modbus: OperatorLimits,
    /// Limits a grid operator's utility server sets (CSIP-AUS).
    pub sources: OperatorSet,
    /// The setpoint each battery was last told, in the order of the
    /// batteries (`None`: released or not yet told; empty: not known).
    pub battery_setpoints: Vec<Option<f64>>,
}

impl Measurements {
    /// The fresh meter reading, + import.
    pub fn grid_w(&self) -> Option<f64> {
        match self.meter {
            Some(Meter::Fresh { grid_w, .. }) => Some(grid_w),
            _ => None,
        }
    }
}

/// What one device is told: the command vocabulary of `modbus::control`, whose
/// recipes turn it into register writes.
pub use crate::modbus::control::Command;

/// A target that a limit changed, for the steering state.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    pub component: Component,
    /// What the component asked for, W (`None`: released).
    pub requested_w: Option<f64>,
    /// What the site got, W (`None`: released).
    pub applied_w: Option<f64>,
    pub reason: String,
    /// The devices whose command it changed, by slot (batteries, then inverters).
    pub devices: Vec<usize>,
}

/// The grid side of a decision, for the steering state.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GridStatus {
    pub mode: LoopMode,
    pub limits: GridLimits,
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
    pub grid: GridStatus,
    /// What the grid loop keeps for the next tick.
    pub loop_state: LoopState,
}

/// Everything one decision depends on besides the signal.
pub struct Site<'a> {
    pub rules: &'a SiteRules,
    pub batteries: &'a [BatteryView],
    pub inverters: &'a [InverterView],
    pub measurements: &'a Measurements,
}

pub fn decide(
    site: &Site<'_>,
    active: &Active,
    reached: &BTreeSet<String>,
    prev: &LoopState,
    now_ms: i64,
) -> Decision {
    // The operator's bounds over the DER hold before anything is planned.
    let der = DerBounds::of(&site.measurements.sources);
    let bounded = der.batteries(site.batteries);
    let site = &Site {
        batteries: &bounded,
        ..*site
    };
    let (rules, batteries, inverters, m) = (
        site.rules,
        site.batteries,
        site.inverters,
        site.measurements,
    );
    let mgi = active
        .maximize_grid_import
        .as_ref()
        .is_some_and(|e| e.value);
    let charge_cap: f64 = batteries.iter().map(BatteryView::charge_cap).sum();

    // What the signal asks of the site, before the grid limits.
    let Asked {
        plan,
        storage_by: plan_storage_by,
        production_by: plan_production_by,
        reached: reached_now,
    } = asked(rules, active, batteries, reached, mgi, charge_cap);
    let mut plan = plan;
    let planned_by_der = der.plan(&mut plan);
    let (plan_storage_by, plan_production_by) = match &planned_by_der {
        Some(l) if matches!(l.kind, Kind::Connect | Kind::Energize) => {
            (Some(Component::GridLimit), Some(Component::GridLimit))
        }
        Some(_) => (Some(Component::GridLimit), plan_production_by),
        None => (plan_storage_by, plan_production_by),
    };

    let limits = in_force(
        rules.max_import_w,
        rules.max_export_w,
        active.grid_limit.as_ref().map(|e| &e.value),
        &m.operator,
        &m.modbus,
        &server_limits(m),
    );
    let mut held = held_at_the_grid(site, &limits, &plan, prev, now_ms, mgi);
    let clamped_by_der = der.clamp(&mut held, m.online_battery_w);

    let planned_batteries = storage_commands(rules.ess, batteries, plan.storage);
    let planned_inverters = production_commands(rules.curtailment, inverters, plan.production);
    let bats = match held_storage(&plan, &held) {
        Some((target, export)) => {
            storage_setpoints(rules.ess, batteries, &m.battery_setpoints, target, export)
                .into_iter()
                .map(Command::EssPower)
                .collect()
        }
        None => storage_commands(rules.ess, batteries, held.storage),
    };
    let invs = production_commands(rules.curtailment, inverters, held.production);

    let (storage_by, production_by) = set_by(
        &held,
        clamped_by_der.is_some(),
        mgi,
        (bats != planned_batteries, invs != planned_inverters),
        (plan_storage_by, plan_production_by),
    );
    let notes = notes(
        &held,
        (plan_storage_by, plan_production_by, storage_by),
        (&planned_batteries, &planned_inverters),
        (&bats, &invs),
        planned_by_der.as_ref().or(clamped_by_der.as_ref()),
    );
    Decision {
        batteries: bats,
        inverters: invs,
        storage_by,
        production_by,
        notes,
        reached: reached_now,
        grid: GridStatus {
            mode: held.mode,
            limits,
        },
        loop_state: held.state,
    }
}

/// What the active signal asks of the site before the grid limits, and the
/// components that ask it.
struct Asked {
    plan: SitePlan,
    storage_by: Option<Component>,
    production_by: Option<Component>,
    /// An `untilSoc` request whose target the site reached now.
    reached: Option<String>,
}

fn asked(
    rules: &SiteRules,
    active: &Active,
    batteries: &[BatteryView],
    reached: &BTreeSet<String>,
    mgi: bool,
    charge_cap: f64,
) -> Asked {
    if mgi {
        let by = Some(Component::MaximizeGridImport);
        return Asked {
            plan: SitePlan {
                storage: StoragePlan::Power(-charge_cap),
                production: ProductionPlan::Limit(0.0),
                import_order: ImportOrder::ChargeLessFirst,
            },
            storage_by: by,
            production_by: by,
            reached: None,
        };
    }
    let mut reached_now = None;
    let storage = match &active.ess {
        None => match rules.ess_fallback {
            EssFallback::Auto => StoragePlan::Release,
            EssFallback::Idle => StoragePlan::Power(0.0),
        },
        Some(entry) => {
            let (w, done) = ess_target(&entry.value, &entry.request_id, batteries, reached);
            if done {
                reached_now = Some(entry.request_id.clone());
            }
            StoragePlan::Power(w)
        }
    };
    let production = match &active.curtailment {
        None => ProductionPlan::Release,
        Some(e) => ProductionPlan::Limit(e.value.watts(rules.rated_production_w)),
    };
    Asked {
        plan: SitePlan {
            storage,
            production,
            import_order: ImportOrder::LiftCurtailmentFirst,
        },
        storage_by: active.ess.as_ref().map(|_| Component::Ess),
        production_by: active.curtailment.as_ref().map(|_| Component::Curtailment),
        reached: reached_now,
    }
}

/// The plan held within the grid limits: by the grid loop where the site has
/// one and a meter, else by the open loop's clamps.
fn held_at_the_grid(
    site: &Site<'_>,
    limits: &GridLimits,
    plan: &SitePlan,
    prev: &LoopState,
    now_ms: i64,
    mgi: bool,
) -> Held {
    let (rules, batteries, m) = (site.rules, site.batteries, site.measurements);
    match (&rules.grid_loop, &m.meter) {
        (Some(settings), Some(meter)) => {
            let sensed = Sensed {
                now_ms,
                meter: meter.clone(),
                battery_w: m.online_battery_w,
                readings_from_ms: m.readings_from_ms,
                readings: m.readings.clone(),
                // The loop counts only charging the batteries can keep up
                // for a while: one about to be full would stop at once.
                charge_cap_w: batteries
                    .iter()
                    .map(|b| b.charge_cap_for(SUSTAINED_CHARGE_S))
                    .sum(),
                discharge_cap_w: batteries.iter().map(BatteryView::discharge_cap).sum(),
            };
            hold(settings, limits, plan, site.inverters, &sensed, prev)
        }
        _ => {
            let net = Net {
                grid_w: m.grid_w(),
                battery_w: m.battery_w,
                production_w: m.production_w,
            };
            let charge_cap: f64 = batteries.iter().map(BatteryView::charge_cap).sum();
            open_loop(limits, plan, &net, mgi.then_some(charge_cap), now_ms)
        }
    }
}

/// The site storage power an ESS entry asks for now, and whether an `untilSoc`
/// target was reached in this decision (then it is idle).
fn ess_target(
    value: &EssSetting,
    request_id: &str,
    batteries: &[BatteryView],
    reached: &BTreeSet<String>,
) -> (f64, bool) {
    match value {
        EssSetting::Idle => (0.0, false),
        EssSetting::Power(p) => (p.as_watts(), false),
        EssSetting::UntilSoc { power, until_soc } => {
            let w = power.as_watts();
            if reached.contains(request_id) {
                return (0.0, false);
            }
            let done = site_soc(batteries).is_some_and(|soc| {
                (w > 0.0 && soc <= *until_soc) || (w < 0.0 && soc >= *until_soc)
            });
            if done {
                (0.0, true)
            } else {
                (w, false)
            }
        }
    }
}

/// The storage target the grid loop set in place of the plan's to hold a
/// limit, and whether it holds the export (else the import).
fn held_storage(plan: &SitePlan, held: &Held) -> Option<(f64, bool)> {
    let StoragePlan::Power(target) = held.storage else {
        return None;
    };
    if held.storage == plan.storage {
        return None;
    }
    match held.mode {
        LoopMode::HoldingExport => Some((target, true)),
        LoopMode::HoldingImport => Some((target, false)),
        _ => None,
    }
}

fn storage_commands(
    rule: EssFulfilment,
    batteries: &[BatteryView],
    s: StoragePlan,
) -> Vec<Command> {
    match s {
        StoragePlan::Release => vec![Command::EssRelease; batteries.len()],
        StoragePlan::Power(p) => allocate_ess(rule, batteries, p)
            .setpoints
            .into_iter()
            .map(Command::EssPower)
            .collect(),
    }
}

/// Per-inverter commands: a site limit spread by the curtailment rule; the
/// loop's own cap with each inverter keeping what it was told where that
/// still fits (`settle.rs`), a partner's limit exactly by the rule.
fn production_commands(
    rule: CurtailmentFulfilment,
    inverters: &[InverterView],
    p: ProductionPlan,
) -> Vec<Command> {
    let limits = match p {
        ProductionPlan::Release => return vec![Command::ProductionRelease; inverters.len()],
        ProductionPlan::Limit(l) => allocate_production(rule, inverters, l),
        ProductionPlan::Cap(c) => production_limits(cap_rule(rule), inverters, c),
    };
    limits.into_iter().map(Command::ProductionLimit).collect()
}

/// The tightest import and export the operators' servers set, with the
/// tightest consumption limit (§14a EnWG; a server's or a control box's
/// relay) made an import limit at the meter: the
/// household's own import, which the limit does not touch, plus what the
/// controllable consumers may draw. The household's import is the meter's
/// import with the batteries' charge taken out (PV's surplus counts
/// against it); without a reading of every battery it is taken as none, the
/// tighter answer.
fn server_limits(m: &Measurements) -> ServerLimits {
    let pick = |kind: Kind| m.sources.tightest(kind).map(|l| (l.value, l.source));
    let mut import = pick(Kind::Import);
    let consumption = [
        m.sources
            .tightest(Kind::Consumption)
            .map(|l| (l.value, l.source)),
        m.operator
            .max_consumption_w
            .map(|w| (w, super::limits::LimitSource::GridSignal)),
    ]
    .into_iter()
    .flatten()
    .filter(|(w, _)| w.is_finite())
    .reduce(|a, b| if b.0 < a.0 { b } else { a });
    if let Some((limit, source)) = consumption {
        let household = match (m.grid_w(), m.battery_w) {
            (Some(g), Some(b)) => (g + b).max(0.0),
            _ => 0.0,
        };
        let w = household + limit.max(0.0);
        if import.is_none_or(|(cur, _)| w < cur) {
            import = Some((w, source));
        }
    }
    ServerLimits {
        import,
        export: pick(Kind::Export),
    }
}

/// Which component the storage and the production follow now: the grid
/// loop's (`gridLimit`) where it changed what the plan gave them (or a DER
/// bound clamped the production), else the plan's. Under maximize grid
/// import the loop holds maxImport by definition: its devices stay its own.
fn set_by(
    held: &Held,
    clamped: bool,
    mgi: bool,
    (storage_moved, production_moved): (bool, bool),
    (plan_storage_by, plan_production_by): (Option<Component>, Option<Component>),
) -> (Option<Component>, Option<Component>) {
    let by_loop = |side: Side| {
        !mgi && held.mode != LoopMode::Off && held.changes.iter().any(|c| c.side == side)
    };
    let storage_by = if by_loop(Side::Storage) && storage_moved {
        Some(Component::GridLimit)
    } else {
        plan_storage_by
    };
    let production_by = if (by_loop(Side::Production) || clamped) && production_moved {
        Some(Component::GridLimit)
    } else {
        plan_production_by
    };
    (storage_by, production_by)
}

/// The notes the steering state shows: each change the grid loop made of
/// the plan (by the component it changed), the DER bound that planned or
/// clamped the site, and a storage target the batteries cannot reach with
/// no limit to blame. `by`: who planned the storage and the production, and
/// who sets the storage now.
fn notes(
    held: &Held,
    (plan_storage_by, plan_production_by, storage_by): (
        Option<Component>,
        Option<Component>,
        Option<Component>,
    ),
    (planned_batteries, planned_inverters): (&[Command], &[Command]),
    (bats, invs): (&[Command], &[Command]),
    der_limit: Option<&SourceLimit>,
) -> Vec<Note> {
    let n_bat = bats.len();
    let mut notes = Vec::new();
    for c in &held.changes {
        let (component, slots) = match c.side {
            Side::Storage => (
                plan_storage_by.unwrap_or(Component::Ess),
                changed_slots(planned_batteries, bats, 0),
            ),
            Side::Production => (
                plan_production_by.unwrap_or(Component::Curtailment),
                changed_slots(planned_inverters, invs, n_bat),
            ),
        };
        notes.push(note(component, c, slots));
    }
    if let Some(l) = der_limit {
        notes.push(der_note(l, bats, invs, n_bat));
    }
    if let (StoragePlan::Power(asked), Some(Component::Ess)) = (held.storage, storage_by) {
        let given: f64 = bats
            .iter()
            .map(|c| match c {
                Command::EssPower(w) => *w,
                _ => 0.0,
            })
            .sum();
        if (given - asked).abs() > 1.0 {
            notes.push(Note {
                component: Component::Ess,
                requested_w: Some(asked),
                applied_w: Some(given),
                reason: "beyond what the batteries can do now (power limits, SoC bounds)".into(),
                devices: (0..n_bat).collect(),
            });
        }
    }
    notes
}

fn changed_slots(before: &[Command], after: &[Command], offset: usize) -> Vec<usize> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i + offset)
        .collect()
}

/// What an operator's bound over the DER made of the devices.
fn der_note(l: &SourceLimit, bats: &[Command], invs: &[Command], n_bat: usize) -> Note {
    let sum = |cs: &[Command]| -> f64 {
        cs.iter()
            .map(|c| match c {
                Command::EssPower(w) | Command::ProductionLimit(w) => *w,
                _ => 0.0,
            })
            .sum()
    };
    let (component, applied, devices) = match l.kind {
        Kind::StorageTarget | Kind::Load => (Component::Ess, sum(bats), (0..n_bat).collect()),
        Kind::Generation => (
            Component::Curtailment,
            sum(invs),
            (n_bat..n_bat + invs.len()).collect(),
        ),
        _ => (Component::GridLimit, 0.0, (0..n_bat + invs.len()).collect()),
    };
    Note {
        component,
        requested_w: None,
        applied_w: Some(applied),
        reason: OperatorSet::describe(l),
        devices,
    }
}

fn note(component: Component, c: &Change, devices: Vec<usize>) -> Note {
    Note {
        component,
        requested_w: c.requested_w,
        applied_w: c.applied_w,
        reason: c.reason.clone(),
        devices,
    }
}

#[cfg(test)]
mod tests;
