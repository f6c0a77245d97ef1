//! Site steering: partners' site-level signals turned into per-device setpoints
//! that the devices follow (`docs/steering.md`).
//!
//! Pure core: `timeline`, `signal` (the combined signal), `request` (the typed
//! request), `alloc` (fulfilment rules), `decide` (what each device should get now),
//! `report` (when to write, what to report). The registers a command becomes
//! are `modbus::control`'s. I/O at the edges: `actuator` (one task per steered device, the only
//! writer of its setpoints), `control` (one loop per site), `service` (the handle
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
pub mod alloc;
pub mod audit;
pub mod control;
pub mod decide;
pub mod feed;
pub mod grid_signal;
pub mod hold;
pub mod inputs;
pub mod limits;
pub mod open_loop;
pub mod operator;
pub mod persist;
pub mod report;
pub mod request;
pub mod runtime;
pub mod service;
pub mod signal;
pub mod sqlite;
mod stats;
pub mod timeline;
pub mod value;
pub mod view;

pub use feed::{follow_states, Publish};
pub use persist::{MemoryStore, PersistError, SteeringStore};
pub use request::{Answer, Context, RawBody, SteeringRequest};
pub use service::{Change, Origin, SteeringError, SteeringService};
pub use signal::{Active, SiteSignal, StoredEntry};
pub use sqlite::SqliteSteeringStore;
pub use timeline::{Entry, Timeline};
pub use value::{Component, ComponentValue, CurtailmentValue, EssSetting, GridLimit};
pub use view::{Allocation, SiteState, SiteView};

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::modbus::{BusHandle, DeviceMaps};
use crate::model::time::now_ms;
use crate::telemetry::Live;
use audit::AuditEvent;
use inputs::SiteDevices;
use runtime::SiteRuntime;

/// Device-write records queued for the store at most; beyond that they are
/// dropped with a warning (a write is never held up by its record).
pub const AUDIT_QUEUE: usize = 1024;

/// Restores the stored timelines (dropping what expired while the agent was
/// down), then starts one control loop per site, one actuator per steered device
/// and the audit writer. Returns the handle for the API.
pub async fn start(
    config: &Config,
    live: Arc<Live>,
    maps: Arc<DeviceMaps>,
    buses: &HashMap<String, BusHandle>,
    store: Arc<dyn SteeringStore>,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> Result<SteeringService, PersistError> {
    let now = now_ms();
    let mut stored: HashMap<String, Vec<StoredEntry>> = HashMap::new();
    for (site, entry) in store.load().await? {
        stored.entry(site).or_default().push(entry);
    }
    let (audit_tx, audit_rx) = mpsc::channel(AUDIT_QUEUE);
    tracker.spawn(write_audit(store.clone(), audit_rx));

    let mut sites = Vec::new();
    for cfg in &config.sites {
        let signal = SiteSignal::restore(stored.remove(&cfg.reference).unwrap_or_default(), now);
        let active = signal.active(now);
        if active != Active::default() || !signal.scheduled(now).is_empty() {
            tracing::info!(site = %cfg.reference, "steering signal restored");
        }
        let devices = SiteDevices::of(&cfg.reference, live.devices());
        let site = Arc::new(SiteRuntime::new(cfg.clone(), devices, signal, &live));
        for (slot, id) in site.steered() {
            let device = live.config(id).clone();
            let (Some(bus), Some(desired)) = (buses.get(&device.bus), site.subscribe(slot)) else {
                continue;
            };
            let a = actuator::Actuator {
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
            tracker.spawn(a.run(cancel.child_token()));
        }
        let rated = site.inputs(now, &live).rules.rated_production_w;
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
        tracker.spawn(control::run(
            site.clone(),
            live.clone(),
            cancel.child_token(),
        ));
        sites.push(site);
    }
    Ok(SteeringService::new(sites, store, live))
}

/// Drains device-write records into the store, in batches.
async fn write_audit(store: Arc<dyn SteeringStore>, mut rx: mpsc::Receiver<AuditEvent>) {
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, 256).await > 0 {
        if let Err(e) = store.record(std::mem::take(&mut batch)).await {
            tracing::warn!(error = %e, "steering audit records lost");
        }
    }
}
