//! Typed views of sites and of a site's steering state: what `GET /sites`,
//! `GET /sites/{s}`, `GET /sites/{s}/steering` and a dry run show (their
//! schemas in `src/api/openapi.json`). The API and the uplink render them; a view holds
//! exactly what is shown (powers in whole watts), so two views are equal when
//! their renderings are. Read-only; nothing here changes state or knows a wire
//! format.

use super::decide::{Command, Decision, GridStatus};
use super::limits::{GridLimits, Limit};
use super::operator::SignalStatus;
use super::report::{DeviceReport, State};
use super::runtime::SiteRuntime;
use super::signal::{Active, SiteSignal, StoredEntry};
use super::sources::{Server, SourceLimit, SourceStatus};
use super::value::Component;
use crate::config::{CurtailmentFulfilment, EssFallback, EssFulfilment};
use crate::telemetry::Live;

/// A device setpoint as shown: whole watts for a storage power or a
/// production limit, `None` for a release.
pub fn setpoint_w(c: Command) -> Option<f64> {
    match c {
        Command::EssPower(w) | Command::ProductionLimit(w) => Some(w.round()),
        Command::EssRelease | Command::ProductionRelease => None,
    }
}

/// `GET /sites/{s}`: a site's configuration as partners see it.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteView {
    pub reference: String,
    pub name: String,
    /// References of the site's devices, in config order.
    pub devices: Vec<String>,
    pub max_import_w: Option<f64>,
    pub max_export_w: Option<f64>,
    pub rated_production_w: f64,
    pub ess_fulfilment: EssFulfilment,
    pub curtailment_fulfilment: CurtailmentFulfilment,
    pub ess_fallback: EssFallback,
    pub control_interval_ms: u64,
    pub revert_timeout_s: u16,
}

impl SiteView {
    pub fn of(site: &SiteRuntime, live: &Live) -> SiteView {
        let c = &site.config;
        let limits = site.limits();
        let devices = live
            .devices()
            .iter()
            .filter(|d| d.site == c.reference)
            .map(|d| d.reference.clone())
            .collect();
        let rated = site
            .inputs(crate::model::time::now_ms(), live)
            .rules
            .rated_production_w;
        SiteView {
            reference: c.reference.clone(),
            name: c.name.clone(),
            devices,
            max_import_w: limits.max_import_w,
            max_export_w: limits.max_export_w,
            rated_production_w: rated,
            ess_fulfilment: c.ess_fulfilment,
            curtailment_fulfilment: c.curtailment_fulfilment,
            ess_fallback: c.ess_fallback,
            control_interval_ms: c.control_interval_ms,
            revert_timeout_s: c.revert_timeout_s,
        }
    }
}

/// What the state shows for one steered device.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceState {
    pub device: String,
    /// The component shown for it; `None` before the control loop first decided.
    pub component: Option<Component>,
    pub setpoint_w: Option<f64>,
    pub state: State,
    pub written_at_ms: Option<i64>,
    pub confirmed: bool,
    /// The write's error, else why the device is told what it is told.
    pub error: Option<String>,
}

impl DeviceState {
    pub fn of(r: &DeviceReport) -> DeviceState {
        DeviceState {
            device: r.device.clone(),
            component: r.desired.as_ref().map(|d| d.shown),
            setpoint_w: r.desired.as_ref().and_then(|d| setpoint_w(d.command)),
            state: r.state,
            written_at_ms: r.written_at_ms,
            confirmed: r.confirmed,
            error: r.error.clone().or_else(|| r.note.clone()),
        }
    }
}

/// A target that a limit changed.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitNote {
    pub component: Component,
    /// What the component asked for, whole W (`None`: released).
    pub requested_w: Option<f64>,
    /// What the site got, whole W (`None`: released).
    pub applied_w: Option<f64>,
    pub reason: String,
    /// References of the devices whose command it changed.
    pub devices: Vec<String>,
}

/// What one grid operator's signal says now.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalState {
    pub name: String,
    /// The inputs last read, input 1 in bit 0.
    pub inputs: Option<u16>,
    pub online: bool,
    /// The failsafe holds (the module cannot be read, or was not yet).
    pub failsafe: bool,
    pub error: Option<String>,
}

/// The grid loop's mode and the limits in force (whole W), with their sources.
#[derive(Clone, Debug, PartialEq)]
pub struct GridLoopState {
    pub grid: GridStatus,
    pub signals: Vec<SignalState>,
    /// Every limit a grid operator's server sets now (whole W).
    pub sources: Vec<SourceLimit>,
    /// How the site's CSIP-AUS client is doing; `None` without one.
    pub csip: Option<SourceStatus>,
    /// How the site's EEBus node is doing; `None` without one.
    pub eebus: Option<SourceStatus>,
}

/// `GET /sites/{s}/steering`: the combined signal at one instant, what is
/// scheduled, what the devices were told, and where a limit changed a target.
///
/// Equal states render equally; the feed compares states with
/// `evaluated_at_ms` left out, which moves on every evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteState {
    pub site: String,
    /// The entries active now; `None` is the component's fallback.
    pub active: Active,
    /// The active ESS entry is an `untilSoc` request whose target was reached.
    pub until_soc_reached: bool,
    /// Entries that start later, by start time.
    pub scheduled: Vec<StoredEntry>,
    pub devices: Vec<DeviceState>,
    pub limits: Vec<LimitNote>,
    pub grid_loop: GridLoopState,
    /// When the control loop last evaluated the site.
    pub evaluated_at_ms: Option<i64>,
    /// Every change of the site is written to the store (false while one
    /// waits for the disk: it is in effect all the same).
    pub durable: bool,
}

impl SiteState {
    /// The state of `site` with `signal` at `now`; `durable`: no change of it
    /// waits to be written.
    pub fn of(site: &SiteRuntime, signal: &SiteSignal, now: i64, durable: bool) -> SiteState {
        let active = signal.active(now);
        let status = site.status();
        let reports = site.reports();
        let until_soc_reached = active
            .ess
            .as_ref()
            .is_some_and(|e| status.reached.contains(&e.request_id));
        let limits = status
            .notes
            .iter()
            .map(|n| LimitNote {
                component: n.component,
                requested_w: n.requested_w.map(f64::round),
                applied_w: n.applied_w.map(f64::round),
                reason: n.reason.clone(),
                devices: n
                    .devices
                    .iter()
                    .filter_map(|i| reports.get(*i))
                    .map(|r| r.device.clone())
                    .collect(),
            })
            .collect();
        SiteState {
            site: site.config.reference.clone(),
            scheduled: signal.scheduled(now),
            active,
            until_soc_reached,
            devices: reports.iter().map(DeviceState::of).collect(),
            limits,
            grid_loop: GridLoopState {
                grid: GridStatus {
                    mode: status.grid.mode,
                    limits: whole_watts(status.grid.limits),
                },
                signals: site.signal_statuses().iter().map(signal_state).collect(),
                sources: site
                    .server_limits()
                    .limits
                    .into_iter()
                    .map(|l| SourceLimit {
                        value: l.value.round(),
                        ..l
                    })
                    .collect(),
                csip: site.server_status(Server::Csip),
                eebus: site.server_status(Server::Eebus),
            },
            evaluated_at_ms: status.evaluated_at_ms,
            durable,
        }
    }

    /// The state without the evaluation clock: what a change is measured by.
    pub fn without_clock(&self) -> SiteState {
        let mut s = SiteState {
            evaluated_at_ms: None,
            ..self.clone()
        };
        // A utility server's last contact moves on every poll: no change.
        for c in [&mut s.grid_loop.csip, &mut s.grid_loop.eebus]
            .into_iter()
            .flatten()
        {
            c.last_contact_ms = None;
        }
        s
    }
}

fn whole_watts(l: GridLimits) -> GridLimits {
    let round = |l: Option<Limit>| {
        l.map(|l| Limit {
            w: l.w.round(),
            ..l
        })
    };
    GridLimits {
        import: round(l.import),
        export: round(l.export),
    }
}

fn signal_state(s: &SignalStatus) -> SignalState {
    SignalState {
        name: s.name.clone(),
        inputs: s.value,
        online: s.online,
        failsafe: s.failsafe,
        error: s.error.clone(),
    }
}

/// One device's setpoint in a dry run.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub device: String,
    /// The component that decided it, or the device's own one at fallback.
    pub component: Component,
    pub setpoint_w: Option<f64>,
    /// The setpoint is the component's fallback.
    pub fallback: bool,
}

impl Allocation {
    /// Each steered device's setpoint in `d`, as a dry run shows them.
    pub fn of(site: &SiteRuntime, d: &Decision, live: &Live) -> Vec<Allocation> {
        site.steered()
            .zip(site.desired_of(d))
            .map(|((_, id), want)| Allocation {
                device: live.config(id).reference.clone(),
                component: want.shown,
                setpoint_w: setpoint_w(want.command),
                fallback: want.component.is_none(),
            })
            .collect()
    }
}
