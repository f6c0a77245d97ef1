//! Site steering: partners' site-level signals turned into per-device setpoints
//! that the devices follow (`docs/steering.md`).
//!
//! Pure core: `decisions/` (what each device should get now, the grid loop,
//! the fulfilment rules, when to write), and the typed data it works on:
//! `timeline`, `signal` (the combined signal), `request` (the typed
//! request), `value`, `sources`. The registers a command becomes
//! are `modbus::control`'s. I/O at the edges: `actuator` (one task per steered device, the only
//! writer of its setpoints; at a clean stop it releases its device, `stop`
//! deciding and `stop_signal` asking), `control` (one loop per site), `service` (the handle
//! the API uses), `view` (what the API and the uplink render), `persist`
//! (timelines, audit, idempotency keys; SQLite or memory).
//!
//! Steering speaks in typed values and knows no wire format: the API parses
//! requests and renders views; only the SQLite adapter (`sqlite/rows.rs`)
//! writes its rows as JSON text.
//!
//! Nothing here may command a device beyond its limits or the site's grid limits,
//! or leave a device steered after its signal's validity ended.

pub mod actuator;
pub mod audit;
pub mod control;
pub mod decisions;
pub mod durable;
pub mod feed;
pub mod grid_signal;
pub mod inputs;
pub mod persist;
pub mod request;
pub mod runtime;
pub mod service;
pub mod signal;
pub mod sources;
pub mod sqlite;
pub mod stats;
pub mod stop;
pub mod stop_signal;
pub mod timeline;
pub mod value;
pub mod view;

// The decisions by their own names too: `steering::hold`, as everywhere.
pub use decisions::{alloc, decide, der_bounds, hold, limits, open_loop, operator, report, settle};
pub use durable::mark_changes_lost;
pub use feed::{follow_states, Publish};
pub use persist::{MemoryStore, PersistError, SteeringStore};
pub use request::{Answer, Context, RawBody, SteeringRequest};
pub use service::{Change, Origin, SteeringError, SteeringService};
pub use signal::{Active, SiteSignal, StoredEntry};
pub use sqlite::SqliteSteeringStore;
pub use stop::RELEASE_BOUND;
pub use stop_signal::ActuatorStop;
pub use timeline::{Entry, Timeline};
pub use value::{Component, ComponentValue, CurtailmentValue, EssSetting, GridLimit};
pub use view::{Allocation, SiteState, SiteView};

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::modbus::{BusHandle, DeviceMaps};
use crate::model::time::now_ms;
use crate::telemetry::Live;
use audit::AuditEvent;
use durable::Durable;
use inputs::SiteDevices;
use runtime::SiteRuntime;

/// Device-write records queued for the store at most: four per configured
/// device, at least 1,024; beyond that they are dropped with a warning (a
/// write is never held up by its record). At start every steered device is
/// written at once, while the store may be busy: a 1,000-device site behind
/// a size cap it had passed dropped 65 of its first records with 1,024.
pub fn audit_queue(devices: usize) -> usize {
    (4 * devices).max(1024)
}

/// Restores the stored timelines (dropping what expired while the agent was
/// down), then starts one control loop per site, one actuator per steered device,
/// the audit writer and the writer of changes (`durable.rs`, its marker file at
/// `marker`). Returns the handle for the API, and the actuators' own stop:
/// the agent releases the devices through it before `cancel` stops the bus
/// tasks (the actuators are not on `tracker`).
///
/// A store that cannot be read, or a marker that says the last run lost
/// changes it could not write, starts every site at its fallback: the grid
/// limits are held whatever the store does.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    config: &Config,
    live: Arc<Live>,
    maps: Arc<DeviceMaps>,
    buses: &HashMap<String, BusHandle>,
    store: Arc<dyn SteeringStore>,
    marker: Option<&std::path::Path>,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> (SteeringService, ActuatorStop) {
    let now = now_ms();
    let actuators = ActuatorStop::new();
    let durable = Arc::new(Durable::new(marker));
    let mut stored = stored_signals(config, store.as_ref(), &durable, now).await;
    tracker.spawn(durable.clone().run(store.clone(), cancel.child_token()));
    let mut found = match store.found_registers().await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "the devices' registers as first found cannot be read: they are read again at first contact");
            HashMap::new()
        }
    };
    let (audit_tx, audit_rx) = mpsc::channel(audit_queue(config.devices.len()));
    tracker.spawn(write_audit(store.clone(), audit_rx, cancel.child_token()));

    let mut sites = Vec::new();
    for cfg in &config.sites {
        let signal = SiteSignal::restore(stored.remove(&cfg.reference).unwrap_or_default(), now);
        let active = signal.active(now);
        if active != Active::default() || !signal.scheduled(now).is_empty() {
            tracing::info!(site = %cfg.reference, "steering signal restored");
        }
        let devices = SiteDevices::of(&cfg.reference, &live.devices());
        let site = Arc::new(SiteRuntime::new(cfg.clone(), devices, signal, &live));
        for (slot, id) in site.steered() {
            let device = live.config(id).clone();
            let (Some(bus), Some(desired)) = (buses.get(&device.bus), site.subscribe(slot)) else {
                continue;
            };
            let (keep_found, kept) = watch::channel(None);
            tracker.spawn(keep_found_registers(
                store.clone(),
                device.reference.clone(),
                kept,
            ));
            let a = actuator::Actuator {
                found: found.remove(&device.reference),
                keep_found,
                restore_refused: false,
                found_note: None,
                site: cfg.reference.clone(),
                device,
                bus: bus.clone(),
                maps: maps.clone(),
                desired,
                revert_s: cfg.revert_timeout_s,
                reports: site.reports.clone(),
                slot,
                writes: site.writes.clone(),
                changed: site.changed.clone(),
                audit: audit_tx.clone(),
            };
            actuators.spawn(a.run(actuators.signal(), cancel.child_token()));
        }
        let rated = site.inputs(now, &live).rules.rated_production_w;
        spawn_grid_signals(&site, rated, buses, tracker, &cancel);
        tracker.spawn(control::run(
            site.clone(),
            live.clone(),
            cancel.child_token(),
        ));
        sites.push(site);
    }
    (
        SteeringService::new(sites, store, durable, live, audit_tx),
        actuators,
    )
}

/// The stored signals by site, to restore: none when the last run kept
/// changes it could not write (every site then starts at its fallback, and
/// that start is queued as the agent's own change) or the store cannot be
/// read.
async fn stored_signals(
    config: &Config,
    store: &dyn SteeringStore,
    durable: &Durable,
    now: i64,
) -> HashMap<String, Vec<StoredEntry>> {
    let mut stored: HashMap<String, Vec<StoredEntry>> = HashMap::new();
    if durable.found_lost() {
        tracing::error!("the last run kept steering changes it could not write: the stored signals may be stale, so every site starts at its fallback");
        for cfg in &config.sites {
            durable.enqueue(fallback_commit(&cfg.reference, now));
        }
        return stored;
    }
    match store.load().await {
        Ok(entries) => {
            for (site, entry) in entries {
                stored.entry(site).or_default().push(entry);
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "stored steering signals cannot be read: every site starts at its fallback");
        }
    }
    stored
}

/// One task per grid-operator signal of `site`, on its bus.
fn spawn_grid_signals(
    site: &Arc<SiteRuntime>,
    rated: f64,
    buses: &HashMap<String, BusHandle>,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) {
    let cfg = &site.config;
    for (index, g) in cfg.grid_signals.iter().enumerate() {
        let Some(bus) = buses.get(&g.bus) else {
            tracing::warn!(site = %cfg.reference, signal = %g.name, bus = %g.bus, "grid signal's bus is not running");
            continue;
        };
        tracker.spawn(grid_signal::run(
            site.clone(),
            index,
            g.clone(),
            bus.clone(),
            rated,
            cancel.child_token(),
        ));
    }
}

/// Ends every component of `site` (the agent's own change at start).
fn fallback_commit(site: &str, now: i64) -> persist::Commit {
    persist::Commit {
        site: site.to_string(),
        components: Component::ALL.to_vec(),
        entries: Vec::new(),
        audit: AuditEvent {
            site: site.to_string(),
            at_ms: now,
            kind: audit::AuditKind::Request {
                source: "agent".into(),
                token: "agent".into(),
                action: "start: changes of the last run were lost, fallback".into(),
                body: audit::RequestBody::Ended(None),
                request_id: None,
            },
        },
        idempotency: None,
    }
}

/// Keeps a device's registers as first found in the store, the latest state
/// each time (a write that fails is logged; the next change tries again).
async fn keep_found_registers(
    store: Arc<dyn SteeringStore>,
    device: String,
    mut kept: watch::Receiver<Option<persist::FoundRegisters>>,
) {
    while kept.changed().await.is_ok() {
        let Some(found) = kept.borrow_and_update().clone() else {
            continue;
        };
        if let Err(e) = store.keep_found(device.clone(), found).await {
            tracing::warn!(%device, error = %e, "the device's registers as first found were not stored");
        }
    }
}

/// Drains audit records (device writes, the Modbus server's) into the
/// store, in batches, until every sender is gone or `cancel`; at `cancel`
/// what is queued is written still (the service holds a sender for as long
/// as the agent runs, so the end of the senders alone would come too late).
async fn write_audit(
    store: Arc<dyn SteeringStore>,
    mut rx: mpsc::Receiver<AuditEvent>,
    cancel: CancellationToken,
) {
    let mut batch = Vec::new();
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, 256) => n,
            () = cancel.cancelled() => break,
        };
        if n == 0 {
            return;
        }
        if let Err(e) = store.record(std::mem::take(&mut batch)).await {
            tracing::warn!(error = %e, "steering audit records lost");
        }
    }
    while let Ok(e) = rx.try_recv() {
        batch.push(e);
    }
    if !batch.is_empty() {
        if let Err(e) = store.record(batch).await {
            tracing::warn!(error = %e, "steering audit records lost at stop");
        }
    }
}
