//! A site's runtime state: its config, devices, signal, the grid loop's memory,
//! the last evaluation's status and the channels to its actuators. Below the
//! tasks that share it (the control loop, the grid-signal readers, the
//! actuators) and the views that read it: it imports none of them.
//!
//! Plain state behind short locks; it starts no task and does no I/O.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

use super::decide::{decide, Command, Decision, GridStatus, Note, Site};
use super::hold::LoopState;
use super::inputs::{gather, Context, SiteDevices};
use super::limits::OperatorLimits;
use super::operator::{combine, SignalStatus};
use super::report::{Desired, DeviceReport};
use super::request::ConfiguredLimits;
use super::signal::SiteSignal;
use super::sources::{OperatorSet, Server, SourceStatus};
use super::stats::WriteCounters;
use super::value::Component;
use crate::config::SiteConfig;
use crate::liveness::Heartbeat;
use crate::model::DeviceId;
use crate::telemetry::Live;

/// What the last evaluation found, for the steering state.
#[derive(Clone, Debug, Default)]
pub struct LoopStatus {
    pub notes: Vec<Note>,
    /// `untilSoc` requests whose target was reached (idle for the rest of them).
    pub reached: BTreeSet<String>,
    pub evaluated_at_ms: Option<i64>,
    /// The grid loop's mode and the limits in force.
    pub grid: GridStatus,
    /// Times the grid meter was lost (the safe state entered) after it had
    /// answered.
    pub meter_lost_total: u64,
    /// Whether the grid loop has had a reading of the meter since start.
    pub meter_seen: bool,
}

/// One site: config, devices, signal, and the channels to its actuators.
pub struct SiteRuntime {
    /// The site's config at start; its grid limits may change since
    /// ([`SiteRuntime::limits`]).
    pub config: SiteConfig,
    /// The site's configured grid limits now: `config`'s at start, a
    /// config change's once applied live.
    limits: Mutex<ConfiguredLimits>,
    pub devices: SiteDevices,
    /// Locked across the store commit of a change, so that changes reach memory in
    /// the order they reached the disk (an `Arc` so that a change in progress
    /// can own the lock).
    pub signal: Arc<tokio::sync::Mutex<SiteSignal>>,
    /// Changes committed to `signal` since start, counted under its lock.
    committed: AtomicU64,
    pub wake: Notify,
    /// Notified when what `GET /sites/{s}/steering` shows may have changed (an
    /// evaluation, which every committed change wakes; a device report); `feed`
    /// checks.
    pub changed: Arc<Notify>,
    /// Batteries, then inverters, in config order (the order of `steered`).
    pub reports: Arc<Mutex<Vec<DeviceReport>>>,
    pub status: Mutex<LoopStatus>,
    /// Write counters, by the same slot as `reports`.
    pub writes: Arc<[WriteCounters]>,
    /// The control loop's heartbeat, for the watchdog.
    pub heartbeat: Heartbeat,
    /// How long the control loop's ticks take, and how late timed ones wake.
    pub ticks: super::stats::TickStats,
    /// What each grid operator's signal says now (written by `grid_signal::run`).
    pub signals: Mutex<Vec<SignalStatus>>,
    /// Limits a SCADA set over the Modbus server (only ever tightening).
    modbus: Mutex<OperatorLimits>,
    /// Limits the grid operators' servers set: the utility server over
    /// CSIP-AUS (written by the `csip` client), the control box over EEBus
    /// (written by the `eebus` node), by [`Server`].
    servers: [Mutex<OperatorSet>; 2],
    /// How each of them is doing (`None`: the site has none).
    server_status: [Mutex<Option<SourceStatus>>; 2],
    /// What the grid loop keeps from one tick to the next.
    loop_state: Mutex<LoopState>,
    /// The count of committed changes (`committed`) the last evaluation saw;
    /// `None` before the first. Callers wait on it for their change.
    evaluated: watch::Sender<Option<u64>>,
    desired: Vec<watch::Sender<Option<Desired>>>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data; keep serving it after a panic elsewhere.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SiteRuntime {
    pub fn new(config: SiteConfig, devices: SiteDevices, signal: SiteSignal, live: &Live) -> Self {
        let steered = devices.batteries.iter().chain(&devices.inverters);
        let reports = steered
            .clone()
            .map(|id| DeviceReport::new(&live.config(*id).reference))
            .collect();
        let writes = steered.clone().map(|_| WriteCounters::default()).collect();
        let heartbeat = Heartbeat::new(format!("control loop {}", config.reference));
        let desired = steered.map(|_| watch::channel(None).0).collect();
        let signals = config
            .grid_signals
            .iter()
            .map(|g| SignalStatus {
                name: g.name.clone(),
                ..SignalStatus::default()
            })
            .collect();
        let limits = Mutex::new(ConfiguredLimits::of(config.max_import, config.max_export));
        Self {
            config,
            limits,
            devices,
            signal: Arc::new(tokio::sync::Mutex::new(signal)),
            committed: AtomicU64::new(0),
            wake: Notify::new(),
            changed: Arc::new(Notify::new()),
            reports: Arc::new(Mutex::new(reports)),
            status: Mutex::new(LoopStatus::default()),
            writes,
            heartbeat,
            ticks: super::stats::TickStats::default(),
            signals: Mutex::new(signals),
            modbus: Mutex::new(OperatorLimits::default()),
            servers: Default::default(),
            server_status: Default::default(),
            loop_state: Mutex::new(LoopState::default()),
            desired,
            evaluated: watch::channel(None).0,
        }
    }

    /// Steered devices (batteries, then inverters) with their report slot.
    pub fn steered(&self) -> impl Iterator<Item = (usize, DeviceId)> + '_ {
        self.devices
            .batteries
            .iter()
            .chain(&self.devices.inverters)
            .copied()
            .enumerate()
    }

    /// A receiver of the desired setpoint of the device in `slot`.
    pub fn subscribe(&self, slot: usize) -> Option<watch::Receiver<Option<Desired>>> {
        self.desired.get(slot).map(watch::Sender::subscribe)
    }

    /// What each steered device was told, by slot. A setpoint the control
    /// loop has decided and the device's actuator has not taken up yet shows
    /// as that setpoint, pending: never one the loop has moved on from.
    pub fn reports(&self) -> Vec<DeviceReport> {
        let mut reports = lock(&self.reports).clone();
        for (report, tx) in reports.iter_mut().zip(&self.desired) {
            if let Some(want) = tx.borrow().as_ref() {
                if report.desired.as_ref() != Some(want) {
                    report.decided(want);
                }
            }
        }
        reports
    }

    pub fn status(&self) -> LoopStatus {
        lock(&self.status).clone()
    }

    /// Counts a change committed to the signal and wakes the control loop;
    /// returns its revision (see [`SiteRuntime::evaluated`]). Called with the
    /// signal's lock held, after the change is in memory.
    pub fn committed_change(&self) -> u64 {
        let revision = self.committed.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake.notify_one();
        revision
    }

    /// Waits until the control loop has evaluated the change of `revision`
    /// (its setpoints are then published to the devices' actuators), at most
    /// `within`; false when it has not.
    pub async fn evaluated(&self, revision: u64, within: std::time::Duration) -> bool {
        let mut rx = self.evaluated.subscribe();
        tokio::time::timeout(within, rx.wait_for(|r| r.is_some_and(|r| r >= revision)))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Says that an evaluation saw every change up to `revision`.
    pub(super) fn mark_evaluated(&self, revision: u64) {
        self.evaluated.send_replace(Some(revision));
    }

    /// Whether the last evaluation saw every committed change. Read with the
    /// signal's lock held, so no change can slip in between.
    pub fn evaluated_every_change(&self) -> bool {
        *self.evaluated.borrow() == Some(self.committed.load(Ordering::SeqCst))
    }

    /// What each steered device was last told, W, in the order of
    /// `desired` (batteries, then inverters): a storage setpoint or a
    /// production limit (`None`: released or not yet told).
    fn told_w(&self) -> Vec<Option<f64>> {
        self.desired
            .iter()
            .map(|tx| match tx.borrow().as_ref().map(|d| d.command) {
                Some(Command::EssPower(w) | Command::ProductionLimit(w)) => Some(w),
                _ => None,
            })
            .collect()
    }

    /// The site's configured grid limits now.
    pub fn limits(&self) -> ConfiguredLimits {
        *lock(&self.limits)
    }

    /// New configured grid limits (a config change applied live): the
    /// control loop is woken and holds them from its next tick on.
    pub fn set_limits(&self, limits: ConfiguredLimits) {
        *lock(&self.limits) = limits;
        self.wake.notify_one();
    }

    /// What the site's inputs are now, as the control loop sees them.
    pub fn inputs(&self, now: i64, live: &Live) -> super::inputs::Inputs {
        let told = self.told_w();
        let (setpoints, limits) = told.split_at(self.devices.batteries.len());
        let ctx = Context {
            now_ms: now,
            inverter_limits: limits,
            battery_setpoints: setpoints,
            operator: combine(&lock(&self.signals)),
            modbus: *lock(&self.modbus),
            sources: self.server_limits(),
            configured: self.limits(),
        };
        gather(live, &self.config, &self.devices, &ctx)
    }

    /// Changes the status of grid signal `index`; returns what `f` returns.
    pub fn update_signal<R>(
        &self,
        index: usize,
        f: impl FnOnce(&mut SignalStatus) -> R,
    ) -> Option<R> {
        lock(&self.signals).get_mut(index).map(f)
    }

    /// A SCADA's limits over the Modbus server, in force from the control
    /// loop's next tick (woken now); `OperatorLimits::default()` ends them.
    pub fn set_modbus_limits(&self, limits: OperatorLimits) {
        let changed = {
            let mut m = lock(&self.modbus);
            let changed = *m != limits;
            *m = limits;
            changed
        };
        if changed {
            tracing::info!(
                site = %self.config.reference,
                max_import_w = ?limits.max_import_w,
                max_export_w = ?limits.max_export_w,
                "limits over Modbus changed"
            );
            self.wake.notify_one();
            self.changed.notify_one();
        }
    }

    /// The limits `server` sets, in force from the control loop's next tick
    /// (woken now when they changed).
    pub fn set_server_limits(&self, server: Server, set: OperatorSet) {
        let changed = {
            let mut cur = lock(&self.servers[server as usize]);
            let changed = *cur != set;
            *cur = set;
            changed
        };
        if changed {
            self.wake.notify_one();
            self.changed.notify_one();
        }
    }

    /// The limits `server` sets now.
    pub fn limits_of(&self, server: Server) -> OperatorSet {
        lock(&self.servers[server as usize]).clone()
    }

    /// What the site's grid meter reads now (+ import), as the grid loop
    /// would take it; `None` without a fresh reading.
    pub fn grid_w(&self, now: i64, live: &Live) -> Option<f64> {
        match super::inputs::meter(live, &self.devices.meters, now) {
            Some(super::hold::Meter::Fresh { grid_w, .. }) => Some(grid_w),
            _ => None,
        }
    }

    /// Every grid operator's limit in force now, one entry per source, kind
    /// and reference: the relay signals (by name), the SCADA over Modbus,
    /// and the servers' (not the contractual maxima, which are the
    /// connection's, not an event). What the evidence log follows.
    pub fn grid_operator_limits(&self) -> Vec<super::sources::SourceLimit> {
        use super::limits::LimitSource;
        use super::sources::{Kind, SourceLimit, CONTRACT_REFERENCE};
        let mut out = Vec::new();
        let mut push = |source, l: &OperatorLimits, failsafe, reference: Option<String>| {
            for (kind, w) in [
                (Kind::Import, l.max_import_w),
                (Kind::Export, l.max_export_w),
                (Kind::Consumption, l.max_consumption_w),
            ] {
                if let Some(value) = w {
                    out.push(SourceLimit {
                        source,
                        kind,
                        value,
                        until_ms: None,
                        failsafe,
                        since_ms: 0,
                        reference: reference.clone(),
                    });
                }
            }
        };
        for s in lock(&self.signals).iter() {
            push(
                LimitSource::GridSignal,
                &s.limits,
                s.failsafe,
                Some(s.name.clone()),
            );
        }
        push(LimitSource::Modbus, &lock(&self.modbus), false, None);
        out.extend(
            self.server_limits()
                .limits
                .into_iter()
                .filter(|l| l.reference.as_deref() != Some(CONTRACT_REFERENCE)),
        );
        out
    }

    /// Every limit the operators' servers set now, CSIP-AUS's first.
    pub fn server_limits(&self) -> OperatorSet {
        let mut all = OperatorSet::default();
        for slot in &self.servers {
            all.limits.extend(lock(slot).limits.iter().cloned());
        }
        all
    }

    /// How `server`'s client is doing; the state shows it. Its last contact
    /// alone moving is no change of the state's (the feed would publish the
    /// state on every poll).
    pub fn set_server_status(&self, server: Server, status: SourceStatus) {
        let changed = {
            let mut cur = lock(&self.server_status[server as usize]);
            let changed = cur.as_ref().map(|c| SourceStatus {
                last_contact_ms: status.last_contact_ms,
                ..c.clone()
            }) != Some(status.clone());
            *cur = Some(status);
            changed
        };
        if changed {
            self.changed.notify_one();
        }
    }

    pub fn server_status(&self, server: Server) -> Option<SourceStatus> {
        lock(&self.server_status[server as usize]).clone()
    }

    /// What each grid signal says now.
    pub fn signal_statuses(&self) -> Vec<SignalStatus> {
        lock(&self.signals).clone()
    }

    /// What `signal` would make of the site now (the grid loop's memory is read,
    /// not changed: the control loop keeps what it decides).
    pub fn evaluate(&self, signal: &SiteSignal, now: i64, live: &Live) -> Decision {
        let inputs = self.inputs(now, live);
        let reached = lock(&self.status).reached.clone();
        let prev = lock(&self.loop_state).clone();
        let site = Site {
            rules: &inputs.rules,
            batteries: &inputs.batteries,
            inverters: &inputs.inverters,
            measurements: &inputs.measurements,
        };
        decide(&site, &signal.active(now), &reached, &prev, now)
    }

    /// What each steered device gets from a decision (batteries, then inverters).
    pub fn desired_of(&self, d: &Decision) -> Vec<Desired> {
        let bat = d.batteries.iter().map(|c| Desired {
            command: *c,
            component: d.storage_by,
            shown: d.storage_by.unwrap_or(Component::Ess),
        });
        let inv = d.inverters.iter().map(|c| Desired {
            command: *c,
            component: d.production_by,
            shown: d.production_by.unwrap_or(Component::Curtailment),
        });
        bat.chain(inv).collect()
    }

    /// Hands each actuator its device's desired setpoint.
    pub(super) fn publish(&self, d: &Decision) {
        for (tx, want) in self.desired.iter().zip(self.desired_of(d)) {
            tx.send_if_modified(|cur| {
                if cur.as_ref() == Some(&want) {
                    false
                } else {
                    *cur = Some(want);
                    true
                }
            });
        }
    }

    /// The count of changes committed so far.
    pub(super) fn committed_count(&self) -> u64 {
        self.committed.load(Ordering::SeqCst)
    }

    /// Keeps what the grid loop decided for its next tick.
    pub(super) fn keep_loop_state(&self, state: LoopState) {
        *lock(&self.loop_state) = state;
    }
}
