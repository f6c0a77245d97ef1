//! The start of each subsystem the agent wires: the bus tasks, steering and
//! its clock watch, the grid operators' clients, the event list, the Modbus
//! server, the uplink, and what `/readyz` and `/metrics` report of them.
//! `Agent::start` (`mod.rs`) calls them in order.
//!
//! Wiring only: each subsystem's work is in its own module.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{clock_steps, StartError, TemporaryStore};
use crate::config::Config;
use crate::http_server::Connections;
use crate::modbus::stats::BusCollector;
use crate::modbus::{BusHandle, BusTask, DeviceMaps};
use crate::store::StoreHandle;
use crate::telemetry::{Live, Telemetry};
use crate::uplink::{Uplink, UplinkParts};

/// The grid operators' clients: one CSIP-AUS task per `[csip_aus]` table,
/// the EEBus node, and one evidence log task per site; the CSIP statuses and
/// the evidence logs' counters for `/metrics`.
pub(super) fn start_partners(
    config: &Config,
    (steering, live, store): (&crate::steering::SteeringService, &Arc<Live>, &StoreHandle),
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> (
    crate::csip::status::Statuses,
    crate::grid_events::metrics::GridOperatorMetrics,
) {
    let csip = crate::csip::start(
        config,
        steering,
        live,
        crate::csip::store::CsipStore::new(store.clone()),
        tracker,
        cancel,
    );

    crate::eebus::start(
        config,
        steering,
        crate::eebus::store::EebusStore::new(store.clone()),
        tracker,
        cancel,
    );
    let mut grid_operator = crate::grid_events::metrics::GridOperatorMetrics { sites: Vec::new() };
    for site in steering.sites() {
        let opened = Arc::new(std::sync::atomic::AtomicU64::new(0));
        grid_operator.sites.push((site.clone(), opened.clone()));
        tracker.spawn(crate::grid_events::task::run(
            site.clone(),
            live.clone(),
            crate::grid_events::store::EventStore::new(store.clone()),
            opened,
            cancel.child_token(),
        ));
    }
    (csip, grid_operator)
}

/// The event list and its task, which looks once a second.
pub(super) fn start_events(
    live: &Arc<Live>,
    steering: &crate::steering::SteeringService,
    store: &StoreHandle,
    clock: &crate::clock::ClockWatch,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> Arc<crate::events::EventLog> {
    let events = Arc::new(crate::events::EventLog::default());
    tracker.spawn(crate::events::task::run(
        crate::events::task::Sources {
            live: live.clone(),
            steering: Some(steering.clone()),
            store: Some(store.clone()),
            clock: Some(clock.clone()),
        },
        events.clone(),
        cancel.child_token(),
    ));
    events
}

/// One task per bus, each the only owner of its connection; their handles
/// by bus name.
pub(super) fn start_buses(
    config: &Config,
    telemetry: &Telemetry,
    maps: &Arc<DeviceMaps>,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> HashMap<String, BusHandle> {
    let mut buses = HashMap::new();
    for bus in &config.buses {
        let devices = config.devices_on_bus(&bus.name).cloned().collect();
        let (task, handle) = BusTask::new(
            bus,
            devices,
            config.polling.clone(),
            telemetry.clone(),
            maps.clone(),
        );
        tracker.spawn(task.run(cancel.child_token()));
        buses.insert(bus.name.clone(), handle);
    }
    buses
}

/// The steering service and its actuators, restored from the store, with
/// the clock watched for steps. On a temporary store (`temporary`) the
/// configured one's marker is kept by `keep_configured_marker`; the
/// temporary one needs none (it is gone at the next start).
pub(super) async fn start_steering(
    config: &Arc<Config>,
    (live, maps, buses): (&Arc<Live>, &Arc<DeviceMaps>, &HashMap<String, BusHandle>),
    (store, temporary): (&StoreHandle, bool),
    clock: &crate::clock::ClockWatch,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> (
    crate::steering::SteeringService,
    crate::steering::ActuatorStop,
) {
    let steering_store: Arc<dyn crate::steering::SteeringStore> =
        Arc::new(crate::steering::SqliteSteeringStore::new(store.clone()));
    let marker = config.storage.path.with_extension("steering-pending");
    let (steering, actuators) = crate::steering::start(
        config,
        live.clone(),
        maps.clone(),
        buses,
        steering_store,
        (!temporary).then_some(marker.as_path()),
        tracker,
        cancel.child_token(),
    )
    .await;
    steering.watch_clock(clock.clone());
    tracker.spawn(clock_steps::run(
        clock.clone(),
        store.clone(),
        cancel.child_token(),
    ));
    (steering, actuators)
}

/// What `/readyz` reports as degraded, not unready: a clock that is not
/// synchronised or steps, and steering changes in effect that wait for the
/// disk.
pub(super) fn register_degraded(
    readiness: &crate::api::Readiness,
    clock: &crate::clock::ClockWatch,
    steering: &crate::steering::SteeringService,
) {
    let probe = clock.clone();
    readiness.register_degraded("clock", move || probe.problem().map_or(Ok(()), Err));
    let durable = steering.durable().clone();
    readiness.register_degraded("steering", move || match durable.problem() {
        None => Ok(()),
        Some(why) => Err(format!(
            "{} changes in effect wait to be written: {why}",
            durable.len()
        )),
    });
}

/// The Modbus server on its bound listeners, when `[modbus_server]` is on.
pub(super) fn start_modbus_server(
    config: &Config,
    bound: Option<crate::modbus_server::Bound>,
    parts: crate::modbus_server::Parts,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> Result<Option<crate::modbus_server::ModbusServer>, StartError> {
    let (Some(m), Some(bound)) = (&config.modbus_server, bound) else {
        return Ok(None);
    };
    crate::modbus_server::ModbusServer::start(
        m.clone(),
        bound,
        parts,
        tracker,
        cancel.child_token(),
    )
    .map(Some)
    .map_err(|source| StartError::Bind {
        addr: m
            .listen
            .first()
            .copied()
            .unwrap_or(([0, 0, 0, 0], 0).into()),
        source,
    })
}

/// Every part's metrics on the registry `/metrics` renders, the grid
/// operators' clients first.
pub(super) fn register_metrics(
    registry: &crate::metrics::Registry,
    (csip, grid_operator): (
        crate::csip::status::Statuses,
        crate::grid_events::metrics::GridOperatorMetrics,
    ),
    connections: &Arc<Connections>,
    (live, buses, clock): (
        &Arc<Live>,
        &HashMap<String, BusHandle>,
        &crate::clock::ClockWatch,
    ),
    (store, steering): (&StoreHandle, &crate::steering::SteeringService),
    (modbus_server, uplink): (Option<&crate::modbus_server::ModbusServer>, Option<&Uplink>),
) {
    registry.register(Arc::new(csip));
    registry.register(Arc::new(grid_operator));
    registry.register(connections.clone());
    registry.register(live.clone());
    registry.register(Arc::new(BusCollector(
        buses.values().map(|b| b.stats().clone()).collect(),
    )));
    registry.register(Arc::new(store.clone()));
    registry.register(Arc::new(steering.clone()));
    registry.register(Arc::new(clock.clone()));
    if let Some(server) = modbus_server {
        registry.register(server.collector());
    }
    if let Some(uplink) = uplink {
        registry.register(Arc::new(uplink.clone()));
    }
}

/// Running on a temporary store: said on `/readyz` and `/metrics`, and the
/// configured store's steering marker set as soon as its folder takes it.
pub(super) fn on_temporary_store(
    t: &TemporaryStore,
    store: &StoreHandle,
    readiness: &crate::api::Readiness,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) {
    store.stats().mark_temporary();
    let notice = t.notice();
    readiness.register_degraded("store", move || Err(notice.clone()));
    tracker.spawn(t.clone().keep_configured_marker(cancel.child_token()));
}

/// The MQTT uplink, with every site's steering state followed into its feed;
/// unready while it cannot be set up (its TLS files), and why.
pub(super) fn start_uplink(
    parts: UplinkParts,
    steering: &crate::steering::SteeringService,
    readiness: &crate::api::Readiness,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> Uplink {
    let feed = parts.steering.clone();
    crate::steering::follow_states(
        steering,
        Arc::new(move |site: &str, state| feed.publish_steering_state(site, state)),
        tracker,
        cancel.child_token(),
    );
    let uplink = Uplink::start(parts, tracker, cancel.child_token());
    let probe = uplink.clone();
    readiness.register("mqtt", move || probe.setup_problem().map_or(Ok(()), Err));
    uplink
}
