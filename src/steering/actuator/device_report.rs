//! What the actuator tells of its device: its slot in the site's reports
//! (the state `GET /sites/{s}/steering` shows, with `SiteRuntime::changed`
//! woken when it changes), the note on a battery without a rating, and the
//! audit record of a write.
//!
//! It must not block on anyone: the reports' lock is held only for a copy
//! and a compare, and a full audit queue drops the record with a warning
//! (a write is never held up by its record).

use super::Actuator;
use crate::config::DeviceConfig;
use crate::modbus::DeviceMap;
use crate::model::DeviceType;
use crate::steering::audit::{AuditEvent, AuditKind};
use crate::steering::decide::Command;
use crate::steering::report::{Desired, DeviceReport};

/// Why a battery gets 0 W when nothing gives its rating (the allocation
/// shares storage power by rating).
pub(super) fn unrated_note(device: &DeviceConfig, map: &DeviceMap, cmd: Command) -> Option<String> {
    let storage = matches!(cmd, Command::EssPower(_));
    let unrated = device.device_type == DeviceType::Battery
        && crate::steering::inputs::battery_rating(device, &map.info).is_none();
    (storage && unrated).then(|| {
        "no power rating known for this battery (the device reports none): it is held at 0 W; \
         set rated_power (or max_charge_power and max_discharge_power) on the device"
            .to_string()
    })
}

impl Actuator {
    /// The audit record of a write (or an attempt) of `d`.
    pub(super) fn record(&self, d: &Desired, at_ms: i64, error: Option<String>, confirmed: bool) {
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

    /// The reason the report gives for the device, if any.
    pub(super) fn report_error(&self) -> Option<String> {
        let reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        reports.get(self.slot).and_then(|r| r.error.clone())
    }

    /// Changes the device's report; wakes `changed` when it differs.
    pub(super) fn report(&self, f: impl FnOnce(&mut DeviceReport)) {
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
