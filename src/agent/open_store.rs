//! Opening the measurement store at start: the configured one, or a
//! temporary one when it cannot be opened at all, with the telemetry
//! outbox's commit hook when `[mqtt]` is configured, and the latest values
//! restored from it. Start-up wiring only: what the store does is `store`'s.

use crate::config::{Config, StorageConfig};
use crate::store::{CommitHook, StoreError, StoreHandle};
use crate::telemetry::{Live, Reading};
use crate::uplink::outbox::{self, Cap, Outbox};

use super::{StartError, TemporaryStore};

/// Opens the configured store, or when it cannot be opened at all a
/// temporary one (`temporary_store.rs`): no failure of the store stops the
/// agent from holding the grid limits. With `[mqtt]`, the store writes the
/// telemetry outbox in its sample commits.
pub(super) async fn open_any_store(
    config: &Config,
    live: &Live,
    clock: &crate::clock::ClockWatch,
) -> Result<(StoreHandle, Option<Outbox>, Option<TemporaryStore>), StartError> {
    let e = match open_with_outbox(config, &config.storage, live, clock).await {
        Ok((store, outbox)) => return Ok((store, outbox, None)),
        Err(e) => e,
    };
    let why = match crate::store::diagnose::cause(&config.storage.path) {
        Some(cause) => format!("{e} ({cause})"),
        None => e.to_string(),
    };
    let least_mb =
        crate::config::size_floor::floor(config).map_or(1, |f| f.needed_mb.ceil() as u64);
    let temporary = TemporaryStore::new(&config.storage, least_mb, why);
    tracing::error!(
        error = %temporary.why,
        temporary = %temporary.storage.path.display(),
        "the measurement store cannot be opened: running on a temporary store, every site at its fallback"
    );
    let (store, outbox) = open_with_outbox(config, &temporary.storage, live, clock).await?;
    Ok((store, outbox, Some(temporary)))
}

async fn open_with_outbox(
    config: &Config,
    storage: &StorageConfig,
    live: &Live,
    clock: &crate::clock::ClockWatch,
) -> Result<(StoreHandle, Option<Outbox>), StartError> {
    match &config.mqtt {
        Some(mqtt) => {
            let (sink, state) = outbox::sink(Cap::from_config(mqtt));
            let sink = sink.marking_clock(clock.clone());
            let store = open_store(config, storage, live, Some(Box::new(sink))).await?;
            let outbox = Outbox::new(store.clone(), state);
            Ok((store, Some(outbox)))
        }
        None => Ok((open_store(config, storage, live, None).await?, None)),
    }
}

/// Opens the store at `storage` (migrations run on a blocking thread) with
/// the commit hook, if any, and fills the latest values from it, so a
/// restarted agent answers before its first poll.
async fn open_store(
    config: &Config,
    storage: &StorageConfig,
    live: &Live,
    hook: Option<Box<dyn CommitHook>>,
) -> Result<StoreHandle, StartError> {
    let storage = storage.clone();
    let path = storage.path.display().to_string();
    let devices = config.devices.iter().map(|d| d.reference.clone()).collect();
    let fail = |source| StartError::Store {
        path: path.clone(),
        source,
    };
    let store =
        tokio::task::spawn_blocking(move || StoreHandle::open_with_hook(&storage, devices, hook))
            .await
            .map_err(|e| fail(StoreError::OpenAborted(e)))?
            .map_err(fail)?;
    let latest = store.latest().await.map_err(fail)?;
    let mut restored = 0usize;
    for l in latest {
        if let Some(id) = live.find(&l.device) {
            let reading = Reading {
                ts_ms: l.ts_ms,
                value: l.value,
            };
            live.restore(id, l.property, reading);
            restored += 1;
        }
    }
    tracing::info!(path = %path, restored, "measurement store open");
    Ok(store)
}
