//! The actuator: one task per steered device, sole writer of its setpoints. It
//! watches what the control loop wants for the device, writes through the
//! device's bus task (ahead of polls), reads back, retries with backoff, refreshes
//! before the device's revert timer fires, and reports the device's state.
//!
//! At first contact it reads every register the device's recipe may write
//! and keeps what they held (the store, `found_registers`); a release writes
//! that back, so a device is left as the installer left it. The first write
//! after start is logged register by register, old and new word.
//!
//! At a clean stop of the agent it writes the device's release once more,
//! unless the device is known released (`stop.rs`), before the bus tasks
//! stop, and gives up at the stop's deadline (`stop_signal.rs`).
//!
//! Decisions (what to write, when) are the pure functions of `report.rs`, and
//! the registers are `modbus::control`'s recipes; this file only runs them. It
//! never decides setpoints.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

use super::audit::{AuditEvent, AuditKind};
use super::decide::Command;
use super::persist::FoundRegisters;
use super::report::{due, Desired, DeviceReport, Due, Last};
use super::stats::WriteCounters;
use super::stop::{may_be_steered, release_at_stop, RELEASE_BOUND};
use super::stop_signal::StopSignal;
use crate::config::DeviceConfig;
use crate::modbus::control::{
    changes, footprint, restore, verify, Mismatch, Originals, Recipe, WriteError, WritePlan,
};
use crate::modbus::{BusHandle, DeviceMap, DeviceMaps, ModbusError, Op, OpOutput};
use crate::model::time::now_ms;
use crate::model::DeviceType;
use crate::register::plan::{Image, Span};

/// How often to look again for a device that is not discovered yet.
const UNDISCOVERED_RETRY_MS: i64 = 1000;
/// How soon to read the calibration registers again after a failed read.
const CALIBRATION_RETRY_MS: i64 = 1000;

/// Everything one actuator needs.
pub struct Actuator {
    pub site: String,
    pub device: DeviceConfig,
    pub bus: BusHandle,
    pub maps: Arc<DeviceMaps>,
    pub desired: watch::Receiver<Option<Desired>>,
    pub revert_s: u16,
    pub reports: Arc<Mutex<Vec<DeviceReport>>>,
    /// This device's slot in `reports`.
    pub slot: usize,
    /// The site's write counters (by slot, like `reports`).
    pub writes: Arc<[WriteCounters]>,
    /// The site's `SiteRuntime::changed`: notified when the report changes.
    pub changed: Arc<Notify>,
    pub audit: mpsc::Sender<AuditEvent>,
    /// The device's registers as first found (from the store at start), and
    /// where to keep them when that changes (the latest wins).
    pub found: Option<FoundRegisters>,
    pub keep_found: watch::Sender<Option<FoundRegisters>>,
    /// The device answered an exception to the registers as found (a word it
    /// reports but does not take): releases write the profile's own values.
    pub restore_refused: bool,
    /// What the state says of the registers as found (a limit the device had
    /// switched on itself).
    pub found_note: Option<String>,
}

/// Why a battery gets 0 W when nothing gives its rating (the allocation
/// shares storage power by rating).
fn unrated_note(device: &DeviceConfig, map: &DeviceMap, cmd: Command) -> Option<String> {
    let storage = matches!(cmd, Command::EssPower(_));
    let unrated = device.device_type == DeviceType::Battery
        && super::inputs::battery_rating(device, &map.info).is_none();
    (storage && unrated).then(|| {
        "no power rating known for this battery (the device reports none): it is held at 0 W; \
         set rated_power (or max_charge_power and max_discharge_power) on the device"
            .to_string()
    })
}

/// The words of each read of a transaction, in order.
fn words_of(out: Vec<OpOutput>) -> Vec<Vec<u16>> {
    out.into_iter()
        .filter_map(|o| match o {
            OpOutput::Words(w) => Some(w),
            OpOutput::Written => None,
        })
        .collect()
}

/// The reads of `spans` (in order) as an image.
fn image_of(spans: &[Span], reads: Vec<Vec<u16>>) -> Image {
    let mut img = Image::new();
    for (span, words) in spans.iter().zip(reads) {
        img.insert(*span, words);
    }
    img
}

/// Why no write can be planned yet; the actuator reports it as the device's
/// pending reason and looks again after [`NotReady::retry_ms`].
#[derive(Debug, thiserror::Error)]
enum NotReady {
    #[error("device not discovered yet (no answer to polls)")]
    Undiscovered,
    /// The device's map offers no recipe for its type (a configuration or
    /// device problem: looked at again only after the longest backoff).
    #[error(transparent)]
    NoRecipe(#[from] WriteError),
    #[error("reading the control registers: {0}")]
    Calibration(ModbusError),
}

impl NotReady {
    fn retry_ms(&self) -> i64 {
        match self {
            NotReady::Undiscovered => UNDISCOVERED_RETRY_MS,
            NotReady::NoRecipe(_) => super::report::MAX_BACKOFF_MS,
            NotReady::Calibration(_) => CALIBRATION_RETRY_MS,
        }
    }
}

/// Why a write was not confirmed: the bus transaction failed, or the
/// read-back shows other words than were written. Its text is what the
/// device's report, the log and the audit record show.
#[derive(Debug, thiserror::Error)]
enum WriteFailure {
    #[error(transparent)]
    Bus(#[from] ModbusError),
    #[error(transparent)]
    ReadBack(#[from] Mismatch),
}

/// The device's recipe and the last read of its calibration registers.
struct Calibrated {
    map: Arc<DeviceMap>,
    recipe: Recipe,
    image: Image,
    /// What the recipe's registers held when this map was first contacted,
    /// for the log of the first write.
    current: Originals,
    /// The first write since contact was logged.
    logged: bool,
}

impl Actuator {
    /// Follows the desired setpoint until the agent stops. At a clean stop
    /// (`stop`) the device is released before the task ends, by the
    /// deadline the stop gives; `cancel` (the agent's own, whose bus tasks
    /// are gone with it) ends the task without writing.
    pub async fn run(mut self, mut stop: StopSignal, cancel: CancellationToken) {
        let mut cal: Option<Calibrated> = None;
        let mut last: Option<Last> = None;
        let mut stepping = false;
        // A step in progress at stop is dropped: its bus transaction, if it
        // was sent, still runs ahead of the release, and `last` does not
        // show it (`stepping` stays set).
        let deadline = tokio::select! {
            () = self.follow(&mut cal, &mut last, &mut stepping) => return,
            () = cancel.cancelled() => return,
            at = stop.requested() => at,
        };
        self.release_at_stop(cal, last, stepping, deadline).await;
    }

    /// Writes what the control loop wants, when due, until its channel
    /// closes; `stepping` is set while a step runs.
    async fn follow(
        &mut self,
        cal: &mut Option<Calibrated>,
        last: &mut Option<Last>,
        stepping: &mut bool,
    ) {
        let refresh_ms = self.refresh_ms();
        loop {
            let desired = self.desired.borrow_and_update().clone();
            let wake_at = match desired {
                None => None,
                Some(d) => {
                    *stepping = true;
                    let due = self.step(&d, cal, last, refresh_ms).await;
                    *stepping = false;
                    match due {
                        Due::Now => continue,
                        Due::At(t) => Some(t),
                        Due::Never => None,
                    }
                }
            };
            let sleep = async {
                match wake_at {
                    Some(t) => {
                        let ms = (t - now_ms()).max(0) as u64;
                        tokio::time::sleep(Duration::from_millis(ms)).await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = self.desired.changed() => if changed.is_err() { return },
                () = sleep => {}
            }
        }
    }

    fn refresh_ms(&self) -> i64 {
        i64::from(self.revert_s) * 1000 / 2
    }

    /// At a clean stop: writes the device's release (the registers as first
    /// found) unless it is known released (`stop.rs`), and gives up at
    /// `deadline`. The write is recorded as any release is (audit, the
    /// store's steered mark, the report); what did not succeed is logged
    /// with the device and the reason.
    async fn release_at_stop(
        &mut self,
        mut cal: Option<Calibrated>,
        last: Option<Last>,
        interrupted: bool,
        deadline: tokio::time::Instant,
    ) {
        let device = self.device.reference.clone();
        let kept = self.found.as_ref().map(|f| f.steered);
        if !may_be_steered(last.as_ref(), interrupted, kept) {
            tracing::debug!(%device, "agent stopping: device released already");
            return;
        }
        let d = release_at_stop(self.device.device_type);
        // Due whatever this run wrote before (a retry waiting out its backoff too).
        let mut attempt: Option<Last> = None;
        let refresh_ms = self.refresh_ms();
        let step = self.step(&d, &mut cal, &mut attempt, refresh_ms);
        if tokio::time::timeout_at(deadline, step).await.is_err() {
            let bound_ms = RELEASE_BOUND.as_millis();
            let error = format!("no answer within the agent's stop bound ({bound_ms} ms)");
            tracing::error!(%device, %error, "agent stopping: the device was not released; it stays as it is until its own revert timer, if it has one, or the agent's next start");
            self.record(&d, now_ms(), Some(error), false);
            return;
        }
        match attempt {
            Some(l) if l.ok => {
                tracing::info!(%device, command = ?d.command, "agent stopping: device released");
            }
            Some(l) => {
                let error = l.error.unwrap_or_default();
                tracing::error!(%device, %error, "agent stopping: the release failed; the device stays as it is until its own revert timer, if it has one, or the agent's next start");
            }
            None => {
                let error = self.report_error().unwrap_or_default();
                tracing::warn!(%device, %error, "agent stopping: no release could be written");
            }
        }
    }

    /// Writes if due; returns when to look again (`Now` after a write).
    async fn step(
        &mut self,
        d: &Desired,
        cal: &mut Option<Calibrated>,
        last: &mut Option<Last>,
        refresh_ms: i64,
    ) -> Due {
        let now = now_ms();
        let c = match self.calibrate(cal).await {
            Ok(c) => c,
            Err(why) => {
                self.report(|r| r.waiting(d, why.to_string()));
                return Due::At(now + why.retry_ms());
            }
        };
        let note = unrated_note(&self.device, &c.map, d.command).or(self.found_note.clone());
        self.report(|r| r.note = note);
        let plan = match c.recipe.plan(d.command, self.revert_s, &c.image) {
            Ok(p) => p,
            Err(e) => {
                let e = e.to_string();
                self.report(|r| r.update(d, Err(&e), last.as_ref()));
                return Due::At(now + super::report::MAX_BACKOFF_MS);
            }
        };
        // A release writes back what the registers held when first found.
        let restoring = !d.command.is_control() && !self.restore_refused;
        let plan = match &self.found {
            Some(f) if restoring => restore(&plan, &f.originals, c.recipe.calibration()),
            _ => plan,
        };
        match due(&plan, d.command, last.as_ref(), refresh_ms) {
            Due::Now => {}
            Due::At(t) if t <= now => {}
            other => {
                self.report(|r| r.update(d, Ok(&plan), last.as_ref()));
                return other;
            }
        }
        let changed = last.as_ref().is_none_or(|l| l.writes != plan.writes);
        // The calibration registers, when the plan reads them back anyway.
        let cal_spans = c.recipe.calibration();
        let recal = !cal_spans.is_empty() && cal_spans.iter().all(|s| plan.read_back.contains(s));
        if !c.logged {
            self.log_first_write(&plan, &c.current, d.command);
        }
        if d.command.is_control() {
            self.mark_steered(true);
        }
        let result = self.write(&plan).await;
        let at = now_ms();
        let failures = match last.as_ref() {
            Some(l) if !changed && !l.ok => l.failures,
            _ => 0,
        };
        let (failure, reads) = match result {
            Ok(reads) => match verify(&plan, &reads) {
                Ok(()) => (None, Some(reads)),
                Err(e) => (Some(WriteFailure::from(e)), Some(reads)),
            },
            Err(e) => (Some(WriteFailure::from(e)), None),
        };
        let ok = failure.is_none();
        let error = failure.as_ref().map(ToString::to_string);
        if restoring && matches!(failure, Some(WriteFailure::Bus(ModbusError::Exception(_)))) {
            tracing::warn!(device = %self.device.reference, error = error.as_deref().unwrap_or(""),
                "the device refused the registers as found: its releases write the profile's own values");
            self.restore_refused = true;
        }
        if let Some(c) = cal.as_mut() {
            c.logged = true;
        }
        if let (Some(reads), true, Some(c)) = (reads, recal, cal.as_mut()) {
            c.image = image_of(&plan.read_back, reads);
        }
        if ok && !d.command.is_control() {
            self.mark_steered(false);
        }
        if let Some(c) = self.writes.get(self.slot) {
            c.record(changed, ok);
        }
        if ok {
            tracing::debug!(device = %self.device.reference, change = changed, "setpoint written and confirmed");
        } else {
            tracing::warn!(device = %self.device.reference, error = error.as_deref().unwrap_or(""), "steering write failed");
        }
        let prev_written = last.as_ref().and_then(|l| l.written_at_ms);
        *last = Some(Last {
            writes: plan.writes.clone(),
            command: d.command,
            at_ms: at,
            ok,
            failures: if ok { 0 } else { failures + 1 },
            written_at_ms: if ok { Some(at) } else { prev_written },
            error: error.clone(),
        });
        self.report(|r| r.update(d, Ok(&plan), last.as_ref()));
        // Refreshes that succeed are not worth a record; changes and failures are.
        if changed || !ok {
            self.record(d, at, error, ok);
        }
        due(&plan, d.command, last.as_ref(), refresh_ms)
    }

    /// The audit record of a write (or an attempt) of `d`.
    fn record(&self, d: &Desired, at_ms: i64, error: Option<String>, confirmed: bool) {
        let event = AuditEvent {
            site: self.site.clone(),
            at_ms,
            kind: AuditKind::Write {
                device: self.device.reference.clone(),
                component: d.component,
                command: d.command,
                error,
                confirmed,
            },
        };
        if self.audit.try_send(event).is_err() {
            tracing::warn!(device = %self.device.reference, "audit queue full: a write record was dropped");
        }
    }

    /// The device's recipe and a fresh enough read of its calibration registers.
    async fn calibrate<'a>(
        &mut self,
        cal: &'a mut Option<Calibrated>,
    ) -> Result<&'a Calibrated, NotReady> {
        let Some(map) = self.maps.get(self.device.id) else {
            *cal = None;
            return Err(NotReady::Undiscovered);
        };
        let current = match cal.take() {
            Some(c) if Arc::ptr_eq(&c.map, &map) => c,
            _ => {
                let recipe =
                    Recipe::for_device(self.device.device_type, self.device.rated_power_w, &map)?;
                let spans = recipe.calibration();
                let image = if spans.is_empty() {
                    Image::new()
                } else {
                    let ops = spans.iter().map(|s| Op::Read(*s)).collect();
                    let out = self
                        .bus
                        .transact(self.device.unit_id, ops)
                        .await
                        .map_err(NotReady::Calibration)?;
                    image_of(&spans, words_of(out))
                };
                let current = self
                    .read_found(&recipe, &image)
                    .await
                    .map_err(NotReady::Calibration)?;
                Calibrated {
                    map,
                    recipe,
                    image,
                    current,
                    logged: false,
                }
            }
        };
        Ok(cal.insert(current))
    }

    /// Reads every register the recipe may write (each point on its own when
    /// the device refuses them together) and settles what the device held
    /// before the agent wrote anything: what it holds now, unless an earlier
    /// run left its own values there (then the words kept from before).
    /// Returns what it holds now; an unreachable device is an error (looked
    /// at again), never a record of nothing found.
    async fn read_found(&mut self, recipe: &Recipe, cal: &Image) -> Result<Originals, ModbusError> {
        let spans = footprint(recipe, self.revert_s, cal);
        if spans.is_empty() {
            return Ok(Originals::default());
        }
        let unit = self.device.unit_id;
        let ops = spans.iter().map(|s| Op::Read(*s)).collect();
        let reads = match self.bus.transact(unit, ops).await {
            Ok(out) => words_of(out),
            Err(e) if !matches!(e, ModbusError::Exception(_)) => return Err(e),
            Err(_) => {
                let mut reads = Vec::new();
                for s in &spans {
                    let words = match self.bus.transact(unit, vec![Op::Read(*s)]).await {
                        Ok(out) => words_of(out).pop().unwrap_or_default(),
                        Err(ModbusError::Exception(_)) => Vec::new(),
                        Err(e) => return Err(e),
                    };
                    reads.push(words);
                }
                reads
            }
        };
        let current = Originals::from_reads(&spans, &reads);
        let device = self.device.reference.clone();
        let kept = self
            .found
            .clone()
            .filter(|f| f.steered && f.originals.spans() == spans);
        let limited = recipe.found_limit(kept.as_ref().map_or(&current, |f| &f.originals), cal);
        self.found_note = limited.map(|pct| {
            tracing::info!(%device, limit_pct = pct, "device found limited by its own setting: a release returns it to that limit");
            format!("found limited to {pct} % of its rating by its own setting: a release returns it to that limit")
        });
        match kept {
            Some(f) => {
                tracing::info!(%device, found_ms = f.found_ms, registers = %f.originals.describe(), now = %current.describe(),
                    "device still holds setpoints of an earlier run: the registers as first found are written back at release");
            }
            _ => {
                if current.points.len() < spans.len() {
                    tracing::warn!(%device, readable = current.points.len(), of = spans.len(),
                        "some control registers could not be read: a release writes the profile's own values there");
                }
                tracing::info!(%device, registers = %current.describe(),
                    "control registers as found: written back at every release");
                let found = FoundRegisters {
                    originals: current.clone(),
                    found_ms: now_ms(),
                    steered: false,
                };
                self.found = Some(found.clone());
                self.keep_found.send_replace(Some(found));
            }
        }
        Ok(current)
    }

    /// Notes that the agent's own values are (or are no longer) in the
    /// device's registers, for a start after a crash; kept in the background.
    fn mark_steered(&mut self, steered: bool) {
        if let Some(f) = self.found.as_mut().filter(|f| f.steered != steered) {
            f.steered = steered;
            self.keep_found.send_replace(Some(f.clone()));
        }
    }

    /// The first write after contact, register by register: what it changes.
    fn log_first_write(&self, plan: &WritePlan, current: &Originals, cmd: Command) {
        let device = &self.device.reference;
        let changed = changes(plan, current);
        if changed.is_empty() {
            tracing::info!(%device, command = ?cmd, "first write: the device's registers already hold it");
        }
        for (addr, old, new) in changed {
            let old = old.map_or("unread".to_string(), |w| w.to_string());
            tracing::info!(%device, register = addr, %old, %new, command = ?cmd, "first write changes a register");
        }
    }

    /// Runs the writes, then the plan's read-back, in one bus transaction;
    /// returns the words of each read-back span.
    async fn write(&self, plan: &WritePlan) -> Result<Vec<Vec<u16>>, ModbusError> {
        let ops: Vec<Op> = plan
            .writes
            .iter()
            .map(|w| Op::Write {
                addr: w.addr,
                values: w.values.clone(),
            })
            .chain(plan.read_back.iter().map(|s| Op::Read(*s)))
            .collect();
        let out = self.bus.transact(self.device.unit_id, ops).await?;
        Ok(words_of(out))
    }

    /// The reason the report gives for the device, if any.
    fn report_error(&self) -> Option<String> {
        let reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        reports.get(self.slot).and_then(|r| r.error.clone())
    }

    fn report(&self, f: impl FnOnce(&mut DeviceReport)) {
        // Plain data; keep serving it after a panic elsewhere.
        let mut reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = reports.get_mut(self.slot) {
            let before = r.clone();
            f(r);
            if *r != before {
                self.changed.notify_one();
            }
        }
    }
}
