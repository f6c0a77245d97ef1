//! The actuator: one task per steered device, sole writer of its setpoints. It
//! watches what the control loop wants for the device, writes through the
//! device's bus task (ahead of polls), reads back, retries with backoff, refreshes
//! before the device's revert timer fires, and reports the device's state.
//!
//! This file holds the task and its loop; each part it runs is a file of its own:
//! - `contact.rs`: first contact: the device's recipe over its static points
//!   (read again after a refused write), and the registers its recipe may
//!   write as first found (kept in the store, `found_registers`), with the
//!   store's steered mark;
//! - `write.rs`: one step: plan, the write with its read-back in one bus
//!   transaction, the check, the retry bookkeeping, the first write logged
//!   register by register;
//! - `release.rs`: the release at a clean stop of the agent (unless the device
//!   is known released, `stop.rs`), before the bus tasks stop and by the
//!   stop's deadline (`stop_signal.rs`);
//! - `device_report.rs`: what it tells of the device: its slot in the site's
//!   reports (and the wake of `SiteRuntime::changed`) and the audit record of
//!   a write.
//!
//! A release writes back the registers as first found, so a device is left as
//! the installer left it.
//!
//! It must not decide setpoints or hold register knowledge: what to write and
//! when are the pure functions of `report.rs` and `decide`, the registers are
//! `modbus::control`'s recipes; these files only run them.

mod contact;
mod device_report;
mod release;
mod write;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

use super::audit::AuditEvent;
use super::persist::FoundRegisters;
use super::report::{Desired, DeviceReport, Due, Last};
use super::stats::WriteCounters;
use super::stop_signal::StopSignal;
use crate::config::DeviceConfig;
use crate::modbus::{BusHandle, DeviceMaps};
use crate::model::time::now_ms;
use contact::Calibrated;

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

    /// How often a setpoint is written again (`report::refresh_ms`).
    fn refresh_ms(&self) -> i64 {
        super::report::refresh_ms(self.revert_s)
    }
}
