//! The outbox's upkeep task: applies the age cap every minute (also when no
//! samples are committed), keeps evicting while a transaction stopped at its
//! chunk limit, and makes sure acknowledged rows are deleted within a second
//! when no sample commit takes them along.
//!
//! It only asks the store for transactions; the sink decides what they do.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Outbox;
use crate::model::time::now_ms;

/// How often the age cap is checked without other reasons.
const CHECK_EVERY: Duration = Duration::from_secs(60);
/// How long acknowledged rows may wait for a sample commit to delete them.
const REMOVE_DELAY: Duration = Duration::from_secs(1);

impl Outbox {
    /// Runs until `cancel`, then deletes what was acknowledged.
    pub async fn run_upkeep(self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = tick.tick() => self.cap_now().await,
                () = self.shared.wake.notified() => {
                    if self.shared.more_to_evict.load(Ordering::Relaxed) {
                        self.cap_now().await;
                        continue;
                    }
                    tokio::select! {
                        () = cancel.cancelled() => break,
                        () = tokio::time::sleep(REMOVE_DELAY) => {}
                    }
                    if let Err(e) = self.commit_removals().await {
                        tracing::warn!(error = %e, "cannot delete acknowledged outbox rows; they are sent again");
                    }
                }
            }
        }
        if let Err(e) = self.commit_removals().await {
            tracing::warn!(error = %e, "cannot delete acknowledged outbox rows at shutdown");
        }
    }

    async fn cap_now(&self) {
        if let Err(e) = self.enforce_cap(now_ms()).await {
            tracing::warn!(error = %e, "outbox cap check failed");
        }
    }
}
