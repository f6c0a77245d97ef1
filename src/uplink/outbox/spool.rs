//! The task that moves published samples into the outbox, batching whatever is
//! queued into one transaction.
//!
//! Interim: once the store lands, its writer appends to the outbox in the same
//! transaction as the measurements and this task goes away. It must not drop a
//! batch silently: a failed write is logged with its size.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Outbox;
use crate::model::{time::now_ms, Sample};
use crate::telemetry::Live;

/// Batches per transaction at most.
const MAX_BATCHES: usize = 512;

/// Runs until `samples` closes or `cancel` fires (then drains what is queued).
pub async fn spool(
    outbox: Outbox,
    live: Arc<Live>,
    mut samples: mpsc::Receiver<Vec<Sample>>,
    cancel: CancellationToken,
) {
    let mut pending = Vec::new();
    loop {
        let first = tokio::select! {
            b = samples.recv() => b,
            () = cancel.cancelled() => {
                samples.close();
                samples.recv().await
            }
        };
        let Some(first) = first else { break };
        pending.push(first);
        while pending.len() < MAX_BATCHES {
            match samples.try_recv() {
                Ok(b) => pending.push(b),
                Err(_) => break,
            }
        }
        let batches: Vec<_> = pending
            .drain(..)
            .filter_map(|b: Vec<Sample>| {
                let device = b.first()?.device;
                Some((live.config(device).reference.clone(), b))
            })
            .collect();
        let n = batches.len();
        if let Err(e) = outbox.append(batches, now_ms()).await {
            tracing::error!(error = %e, batches = n, "cannot write telemetry to the outbox");
        }
    }
}
