//! After a step of the wall clock, the samples its epoch stamped are moved to
//! the times they were taken, where `clock::epoch::correction` says so: the
//! store moves those written since the epoch's mark (`store/restamp.rs`).
//!
//! Wiring only: the decision is the clock's, the moving the store's.

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::clock::epoch::correction;
use crate::clock::{step::describe, ClockWatch};
use crate::store::{Restamp, StoreHandle};

/// How often the clock's synchronisation is passed on to the store.
const HOLD_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Follows the clock's steps (and its synchronisation, for the store's
/// retention by age) until `cancel`.
pub async fn run(clock: ClockWatch, store: StoreHandle, cancel: CancellationToken) {
    let mut steps = clock.steps();
    let mut hold = tokio::time::interval(HOLD_EVERY);
    // Chunks above the mark were written in the current epoch. Without one,
    // nothing is moved (a mark too low would move other runs' samples).
    let mut mark = mark_now(&store).await;
    loop {
        let event = tokio::select! {
            () = cancel.cancelled() => return,
            e = steps.recv() => e,
            _ = hold.tick() => {
                hold_age_retention(&clock, &store);
                continue;
            }
        };
        let e = match event {
            Ok(e) => e,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "clock steps came faster than their samples could be moved: those epochs keep their stamps");
                mark = mark_now(&store).await;
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let c = match correction(&e) {
            Ok(c) => c,
            Err(why) => {
                tracing::info!(step = %describe(e.step.size_ms), why, "samples stamped before the clock step are not moved");
                mark = mark_now(&store).await;
                continue;
            }
        };
        let Some(after_chunk) = mark else {
            tracing::warn!("samples stamped before the clock step are not moved: the store's mark of the epoch is not known");
            mark = mark_now(&store).await;
            continue;
        };
        let r = Restamp {
            after_chunk,
            from_ms: c.from_ms,
            to_ms: c.to_ms,
            shift_ms: c.shift_ms,
        };
        match store.restamp(r).await {
            Ok(done) => {
                tracing::info!(
                    samples = done.samples,
                    series = done.series,
                    shift = %describe(c.shift_ms),
                    "samples stamped before the clock step moved to the times they were taken"
                );
                mark = Some(done.chunk_mark);
            }
            Err(err) => {
                tracing::error!(error = %err, "samples stamped before the clock step could not be moved: they keep their stamps");
                mark = mark_now(&store).await;
            }
        }
    }
}

/// Retention by age waits while the clock is known not to be synchronised:
/// a clock 30 days ahead would delete a month of samples that are not old.
fn hold_age_retention(clock: &ClockWatch, store: &StoreHandle) {
    let held = clock.sync().is_unsynchronised();
    if store.stats().hold_age_retention(held) {
        if held {
            tracing::info!("retention by age waits until the clock is synchronised (the size bound still applies)");
        } else {
            tracing::info!("retention by age runs again: the clock is synchronised");
        }
    }
}

async fn mark_now(store: &StoreHandle) -> Option<i64> {
    match store.chunk_mark().await {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(error = %e, "the store's chunk mark cannot be read");
            None
        }
    }
}
