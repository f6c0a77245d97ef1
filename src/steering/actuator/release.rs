//! The actuator's release at a clean stop of the agent: once the stop is
//! asked for (`stop_signal.rs`), the device gets its release (the registers
//! as first found) through one more step, unless it is known released
//! (`stop.rs` decides), and the attempt gives up at the stop's deadline.
//! What did not succeed is logged with the device and the reason and
//! recorded as any failed write is.
//!
//! It must not wait past the deadline, and it must not decide what a release
//! is or whether one is needed (`stop.rs`'s pure functions do).

use super::contact::Calibrated;
use super::Actuator;
use crate::model::time::now_ms;
use crate::steering::report::Last;
use crate::steering::stop::{may_be_steered, release_at_stop, RELEASE_BOUND};

impl Actuator {
    /// At a clean stop: writes the device's release (the registers as first
    /// found) unless it is known released (`stop.rs`), and gives up at
    /// `deadline`. The write is recorded as any release is (audit, the
    /// store's steered mark, the report); what did not succeed is logged
    /// with the device and the reason.
    pub(super) async fn release_at_stop(
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
}
