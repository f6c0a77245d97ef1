//! One step of the actuator: the plan of the desired command (a release
//! writes back the registers as first found), whether it is due
//! (`report::due`), the writes (after a confirmed one, only the words that
//! changed, or for a refresh the first write alone: `WritePlan::narrowed`)
//! and their read-back in one bus transaction,
//! the word-for-word check, and the bookkeeping of the result (`Last`, the
//! failure count the backoff reads, the write counters, the steered mark).
//! The first write after contact is logged register by register, old and
//! new word.
//!
//! It runs plans; it must not build register writes of its own (they are
//! `modbus::control`'s) nor decide when to write (`report::due` does).

use super::contact::Calibrated;
use super::device_report::unrated_note;
use super::Actuator;
use crate::modbus::commands::write_and_read_back;
use crate::modbus::control::{changes, restore, verify, Mismatch, Originals, WritePlan};
use crate::modbus::{DeviceMap, ModbusError};
use crate::model::time::now_ms;
use crate::register::plan::Image;
use crate::steering::decide::Command;
use crate::steering::report::{due, Desired, Due, Last, MAX_BACKOFF_MS};

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

impl WriteFailure {
    /// The device said no (an exception) or took another word: not a
    /// failure to reach it.
    fn refused(&self) -> bool {
        matches!(
            self,
            WriteFailure::Bus(ModbusError::Exception(_)) | WriteFailure::ReadBack(_)
        )
    }
}

impl Actuator {
    /// Writes if due; returns when to look again (`Now` after a write).
    pub(super) async fn step(
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
        let plan = match c.recipe.plan(d.command, self.revert_s, c.image()) {
            Ok(p) => p,
            Err(e) => {
                let e = e.to_string();
                self.report(|r| r.update(d, Err(&e), last.as_ref()));
                return Due::At(now + MAX_BACKOFF_MS);
            }
        };
        // A release writes back what the registers held when first found.
        let restoring = !d.command.is_control() && !self.restore_refused;
        let plan = match &self.found {
            Some(f) if restoring => restore(&plan, &f.originals),
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
        let map = c.map.clone();
        // Since a confirmed write on this contact, only what differs is sent
        // (a refresh: the first write alone); the read-back is the whole plan's.
        let sent = match last.as_ref() {
            Some(l) if l.ok && c.logged => plan.narrowed(&l.writes),
            _ => plan.clone(),
        };
        if !c.logged {
            self.log_first_write(&plan, &c.current, d.command);
        }
        if d.command.is_control() {
            self.mark_steered(true);
        }
        let result = self.write(&sent, &map).await;
        let at = now_ms();
        let failures = match last.as_ref() {
            Some(l) if !changed && !l.ok => l.failures,
            _ => 0,
        };
        let failure = match result {
            Ok(read) => verify(&plan, &read).err().map(WriteFailure::from),
            Err(e) => Some(WriteFailure::from(e)),
        };
        let ok = failure.is_none();
        let error = failure.as_ref().map(ToString::to_string);
        if restoring && matches!(failure, Some(WriteFailure::Bus(ModbusError::Exception(_)))) {
            self.stop_restoring(error.as_deref());
        }
        if let Some(c) = cal.as_mut() {
            c.logged = true;
        }
        if failure.as_ref().is_some_and(WriteFailure::refused) {
            self.refresh_statics(&map).await;
        }
        if ok && !d.command.is_control() {
            self.mark_steered(false);
        }
        self.count(changed, ok, error.as_deref());
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

    /// The device refused the registers as they were first found: its
    /// releases write the profile's own values from now on.
    fn stop_restoring(&mut self, error: Option<&str>) {
        tracing::warn!(device = %self.device.reference, error = error.unwrap_or(""),
            "the device refused the registers as found: its releases write the profile's own values");
        self.restore_refused = true;
    }

    /// Counts a write (a change or a refresh, confirmed or not) and logs it.
    fn count(&self, changed: bool, ok: bool, error: Option<&str>) {
        if let Some(c) = self.writes.get(self.slot) {
            c.record(changed, ok);
        }
        if ok {
            tracing::debug!(device = %self.device.reference, change = changed, "setpoint written and confirmed");
        } else {
            tracing::warn!(device = %self.device.reference, error = error.unwrap_or(""), "steering write failed");
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
    /// returns what was read back.
    async fn write(&self, plan: &WritePlan, map: &DeviceMap) -> Result<Image, ModbusError> {
        let device = &self.device;
        write_and_read_back(&self.bus, device.unit_id, &device.reference, plan, map).await
    }
}
