//! One task per steered site: once a second, the grid operators' limits in
//! force and the grid meter's reading into the tracker; each event written
//! when it opens and ends, and its extremes every [`FLUSH_EVERY_MS`] while
//! it is open (a crash loses at most that much of them). Prunes the log
//! once an hour.
//!
//! Reads the site's runtime and the live state; writes only the log.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::store::EventStore;
use super::tracker::{Event, Tracker};
use crate::model::time::now_ms;
use crate::steering::runtime::SiteRuntime;
use crate::telemetry::Live;

/// How often an open event's extremes are written.
pub const FLUSH_EVERY_MS: i64 = 60_000;
const STEP: Duration = Duration::from_secs(1);
const PRUNE_EVERY_MS: i64 = 3_600_000;

/// Follows `site` until `cancel`.
pub async fn run(
    site: Arc<SiteRuntime>,
    live: Arc<Live>,
    store: EventStore,
    opened: Arc<std::sync::atomic::AtomicU64>,
    cancel: CancellationToken,
) {
    let name = site.config.reference.clone();
    let open = match store.open(&name).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(site = %name, error = %e, "open grid events not read: they stay open in the log");
            Vec::new()
        }
    };
    let mut tracker = Tracker::new(&name, open);
    let mut flushed = now_ms();
    let mut pruned = 0;
    loop {
        let now = now_ms();
        let grid_w = site.grid_w(now, &live);
        let step = tracker.step(now, &site.grid_operator_limits(), grid_w);
        for e in step.closed {
            tracing::info!(site = %name, source = %e.source, kind = %e.kind, reference = %e.reference, limit_w = e.limit_w, failsafe = e.failsafe, max_import_w = ?e.max_import_w, max_export_w = ?e.max_export_w, "grid operator event ended");
            keep(&store, e).await;
        }
        opened.fetch_add(
            step.opened.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        for e in step.opened {
            tracing::info!(site = %name, source = %e.source, kind = %e.kind, reference = %e.reference, limit_w = e.limit_w, failsafe = e.failsafe, "grid operator event began");
            if let Some(id) = keep(&store, e.clone()).await {
                tracker.kept(&e, id);
            }
        }
        if now - flushed >= FLUSH_EVERY_MS {
            flushed = now;
            for e in tracker.open().to_vec() {
                keep(&store, e).await;
            }
        }
        if now - pruned >= PRUNE_EVERY_MS {
            pruned = now;
            if let Err(e) = store.prune(now).await {
                tracing::warn!(error = %e, "grid events not pruned");
            }
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(STEP) => {}
        }
    }
    // The events still open are written as they stand: the next start goes
    // on with them, or ends them.
    for e in tracker.open().to_vec() {
        keep(&store, e).await;
    }
}

async fn keep(store: &EventStore, e: Event) -> Option<i64> {
    match store.keep(e).await {
        Ok(id) => Some(id),
        Err(err) => {
            tracing::warn!(error = %err, "grid event not kept");
            None
        }
    }
}
