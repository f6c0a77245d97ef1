//! The running agent: builds every subsystem from a validated config, starts their
//! tasks under one cancellation token, and stops them in order: the actuators
//! first (each releases its device while the bus tasks still run), then every
//! other task, then the store.
//!
//! Besides the wiring it holds the API router over the agent's parts
//! (`router.rs`) and the choice of store or temporary store. The HTTP
//! server is `http_server/`. No protocol logic and no steering decisions
//! live here.

mod clock_steps;
mod error;
mod modbus_start;
mod open_store;
mod router;
pub mod start_failures;
mod subsystems;
pub mod systemd;
mod temporary_store;
mod watchdog;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::config::live_change::restart_needed;
use crate::config::Config;
use crate::http_server::{self, Connections};
pub use crate::http_server::{
    HEAD_TIMEOUT as HTTP_HEAD_TIMEOUT, MAX_CONNECTIONS as HTTP_MAX_CONNECTIONS,
    MAX_PER_CLIENT as HTTP_MAX_PER_CLIENT, RESERVE_CONNECTIONS as HTTP_RESERVE_CONNECTIONS,
};
use crate::liveness::Pulse;
use crate::metrics::Registry;
use crate::modbus::{BusHandle, DeviceMaps};
use crate::store::StoreHandle;
use crate::telemetry::{Live, Telemetry};
use crate::uplink::{SteeringFeed, Uplink, UplinkParts};
pub use error::{StartError, EXIT_CONFIG};
use open_store::open_any_store;
use subsystems::{
    on_temporary_store, register_degraded, register_metrics, start_buses, start_events,
    start_modbus_server, start_partners, start_steering, start_uplink,
};
pub use temporary_store::TemporaryStore;

/// How long shutdown waits for tasks to finish before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A started agent. Dropping it does not stop it: call [`Agent::shutdown`].
pub struct Agent {
    config: Arc<Config>,
    live: Arc<Live>,
    telemetry: Telemetry,
    store: StoreHandle,
    /// Set while the agent runs on a temporary store.
    temporary: Option<TemporaryStore>,
    maps: Arc<DeviceMaps>,
    buses: HashMap<String, BusHandle>,
    steering: crate::steering::SteeringService,
    /// The actuators, stopped (their devices released) before everything else.
    actuators: crate::steering::ActuatorStop,
    http_addrs: Vec<SocketAddr>,
    https_addrs: Vec<SocketAddr>,
    /// The HTTPS certificate in service (SIGHUP and renewal replace it).
    https: Option<Arc<crate::https::Certs>>,
    /// The Modbus server's addresses (empty when it is off).
    modbus_addrs: Vec<SocketAddr>,
    uplink: Option<Uplink>,
    steering_feed: SteeringFeed,
    auth: Arc<crate::api::Auth>,
    metrics: Option<Registry>,
    ops: crate::ops::Ops,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl Agent {
    /// Binds the listeners first (so a taken port fails before anything runs),
    /// then starts the bus tasks and the HTTP servers.
    pub async fn start(config: Config) -> Result<Agent, StartError> {
        let config = Arc::new(config);
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();

        let (listeners, certs) = http_server::listeners(&config, &tracker, &cancel).await?;
        let modbus_bound = match &config.modbus_server {
            Some(m) => Some(crate::modbus_server::Bound::bind(m).await?),
            None => None,
        };

        let (site, outbox) = start_site(&config, &tracker, &cancel).await?;
        let (csip, grid_operator) = start_partners(
            &config,
            (&site.steering, &site.live, &site.store),
            &tracker,
            &cancel,
        );
        let modbus_server = start_modbus_server(
            &config,
            modbus_bound,
            site.modbus_server_parts(),
            &tracker,
            &cancel,
        )?;
        let events = start_events(
            &site.live,
            &site.steering,
            &site.store,
            &site.clock,
            &tracker,
            &cancel,
        );

        let api = start_api(&config, &site, certs.clone(), events, &tracker, &cancel).await;
        let (steering_feed, uplink) =
            start_uplink_and_trial(&config, &site, outbox, &api, &tracker, &cancel);
        let connections = Arc::new(Connections::new(Duration::from_millis(
            config.http.request_timeout_ms,
        )));
        let router::Api {
            router,
            auth,
            metrics,
            ops,
            ..
        } = api;
        if let Some(registry) = &metrics {
            register_metrics(
                registry,
                (csip, grid_operator),
                &connections,
                (&site.live, &site.buses, &site.clock),
                (&site.store, &site.steering),
                (modbus_server.as_ref(), uplink.as_ref()),
            );
        }
        let served = http_server::serve_router(listeners, router, &connections, &tracker, &cancel);
        let http_addrs = served.iter().filter(|a| !a.1).map(|a| a.0).collect();
        let https_addrs = served.iter().filter(|a| a.1).map(|a| a.0).collect();

        Ok(Agent {
            config,
            live: site.live,
            telemetry: site.telemetry,
            store: site.store,
            temporary: site.temporary,
            maps: site.maps,
            buses: site.buses,
            steering: site.steering,
            actuators: site.actuators,
            http_addrs,
            https_addrs,
            https: certs,
            modbus_addrs: modbus_server
                .as_ref()
                .map(|s| s.addrs().to_vec())
                .unwrap_or_default(),
            uplink,
            steering_feed,
            auth,
            metrics,
            ops,
            cancel,
            tracker,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The addresses the HTTP API actually listens on (port 0 resolved).
    pub fn http_addrs(&self) -> &[SocketAddr] {
        &self.http_addrs
    }

    /// The addresses HTTPS listens on (port 0 resolved); empty without TLS.
    pub fn https_addrs(&self) -> &[SocketAddr] {
        &self.https_addrs
    }

    /// The HTTPS certificate in service, when HTTPS is served.
    pub fn https_certificate(&self) -> Option<crate::https::Pair> {
        self.https.as_ref().map(|c| c.current())
    }

    /// Reads the HTTPS certificate and key again (SIGHUP): the configured
    /// files, or the self-signed certificate (issued again when due). A pair
    /// that cannot be used keeps the one in service; the error says why.
    /// `Ok(None)` when HTTPS is not served.
    pub async fn reload_certificate(&self) -> Result<Option<crate::https::Pair>, String> {
        let Some(certs) = &self.https else {
            return Ok(None);
        };
        let config = self.config.clone();
        let loaded = tokio::task::spawn_blocking(move || crate::https::load_for(&config))
            .await
            .map_err(|e| format!("reading the certificate failed: {e}"))?;
        match loaded {
            Some(Ok((pair, _))) => {
                certs.replace(pair.clone());
                Ok(Some(pair))
            }
            Some(Err(e)) => Err(e.to_string()),
            None => Ok(None),
        }
    }

    /// The addresses the Modbus server listens on (port 0 resolved; empty
    /// when `[modbus_server]` is off).
    pub fn modbus_addrs(&self) -> &[SocketAddr] {
        &self.modbus_addrs
    }

    pub fn live(&self) -> &Arc<Live> {
        &self.live
    }

    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    pub fn store(&self) -> &StoreHandle {
        &self.store
    }

    pub fn device_maps(&self) -> &Arc<DeviceMaps> {
        &self.maps
    }

    pub fn bus(&self, name: &str) -> Option<&BusHandle> {
        self.buses.get(name)
    }

    pub fn steering(&self) -> &crate::steering::SteeringService {
        &self.steering
    }

    /// The MQTT uplink, when `[mqtt]` is configured.
    pub fn uplink(&self) -> Option<&Uplink> {
        self.uplink.as_ref()
    }

    /// Where the steering service reports each site's state for the uplink to
    /// publish (a no-op sink without `[mqtt]`).
    pub fn steering_feed(&self) -> &SteeringFeed {
        &self.steering_feed
    }

    /// The heartbeats of the main loops: bus tasks, store writer, control
    /// loops, MQTT link.
    pub fn pulses(&self) -> Vec<Pulse> {
        let mut pulses: Vec<Pulse> = self.buses.values().map(|b| b.pulse().clone()).collect();
        pulses.push(self.store.pulse().clone());
        pulses.extend(self.steering.sites().iter().map(|s| s.heartbeat.pulse()));
        if let Some(u) = &self.uplink {
            pulses.push(u.pulse().clone());
        }
        pulses
    }

    /// Pings the systemd watchdog while every main loop beats, when systemd
    /// asked for it (`WatchdogSec=`); does nothing otherwise.
    pub fn spawn_watchdog(&self) {
        if let Some(period) = systemd::watchdog_period() {
            self.tracker.spawn(watchdog::run(
                self.pulses(),
                period,
                self.cancel.child_token(),
            ));
        }
    }

    /// What `GET /metrics` renders (`None` with `http.metrics = false`).
    pub fn metrics(&self) -> Option<&Registry> {
        self.metrics.as_ref()
    }

    /// Applies what a changed config may change while running: the API's
    /// tokens, auth mode and rate limit. (The log level is the caller's: it
    /// owns the subscriber.) Returns the sections that differ from the
    /// running config (with a change applied live) and need a restart to
    /// take effect.
    pub fn reload(&self, new: &Config) -> Vec<&'static str> {
        self.auth.reload(&new.http);
        restart_needed(&self.ops.running(), new)
    }

    /// The operations channel's service.
    pub fn ops(&self) -> &crate::ops::Ops {
        &self.ops
    }

    /// Cancelled when a `restart` operation asks the process to exit:
    /// `sitegate run` then stops and exits with [`crate::ops::EXIT_RESTART`].
    pub fn restart_requested(&self) -> CancellationToken {
        self.ops.restart_requested()
    }

    /// Resolves when shutdown was asked for by anyone holding the token.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Releases every device the agent may have left steered, while the bus
    /// tasks still run (at most [`crate::steering::RELEASE_BOUND`]), then
    /// stops every other task and waits for them (at most a grace period),
    /// then closes the store.
    pub async fn shutdown(self) {
        let bound = crate::steering::RELEASE_BOUND;
        let left = self.actuators.release_all(bound).await;
        if left > 0 {
            tracing::warn!(
                actuators = left,
                bound_ms = bound.as_millis() as u64,
                "agent stopping: some releases did not finish within the bound"
            );
        }
        self.cancel.cancel();
        self.tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                grace_s = SHUTDOWN_GRACE.as_secs(),
                "some tasks did not stop within the grace period"
            );
        }
        // After the pollers: their last samples are committed too.
        if let Err(e) = self.store.close().await {
            tracing::error!(error = %e, "closing the measurement store failed");
        }
        if let Some(t) = &self.temporary {
            t.remove();
        }
        tracing::info!("agent stopped");
    }
}

/// The parts the agent runs the site with, before anything serves them.
struct Site {
    live: Arc<Live>,
    clock: crate::clock::ClockWatch,
    store: StoreHandle,
    temporary: Option<TemporaryStore>,
    telemetry: Telemetry,
    maps: Arc<DeviceMaps>,
    buses: HashMap<String, BusHandle>,
    steering: crate::steering::SteeringService,
    actuators: crate::steering::ActuatorStop,
}

impl Site {
    /// What the Modbus server answers from.
    fn modbus_server_parts(&self) -> crate::modbus_server::Parts {
        crate::modbus_server::Parts {
            live: self.live.clone(),
            maps: self.maps.clone(),
            steering: self.steering.clone(),
            buses: self.buses.clone(),
        }
    }
}

/// The clock watch, the store (or a temporary one), the bus tasks, and
/// steering with its actuators, in that order; beside them the uplink's
/// outbox on the store (`None` without `[mqtt]`).
async fn start_site(
    config: &Arc<Config>,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> Result<(Site, Option<crate::uplink::Outbox>), StartError> {
    let live = Arc::new(Live::new(&config.devices));
    let clock = crate::clock::ClockWatch::start(&config.clock, tracker, cancel.child_token());
    let (store, outbox, temporary) = open_any_store(config, &live, &clock).await?;
    let telemetry = Telemetry::new(live.clone(), Some(store.sample_sender()));
    let maps = Arc::new(DeviceMaps::new(config.devices.len()));
    if config.modbus_server.is_some() {
        // Before the first poll: the server answers from each poll's registers.
        maps.keep_images();
    }

    let buses = start_buses(config, &telemetry, &maps, tracker, cancel);

    let (steering, actuators) = start_steering(
        config,
        (&live, &maps, &buses),
        (&store, temporary.is_some()),
        &clock,
        tracker,
        cancel,
    )
    .await;
    let site = Site {
        live,
        clock,
        store,
        temporary,
        telemetry,
        maps,
        buses,
        steering,
        actuators,
    };
    Ok((site, outbox))
}

/// The API router over the site, the HTTPS certificate in service and the
/// event list, with what `/readyz` reports as degraded.
async fn start_api(
    config: &Arc<Config>,
    site: &Site,
    https: Option<Arc<crate::https::Certs>>,
    events: Arc<crate::events::EventLog>,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> router::Api {
    let api = router::router(
        router::ApiParts {
            config: config.clone(),
            live: site.live.clone(),
            store: site.store.clone(),
            steering: site.steering.clone(),
            telemetry: site.telemetry.clone(),
            buses: site.buses.clone(),
            https,
            events,
        },
        tracker,
        cancel.child_token(),
    )
    .await;
    register_degraded(&api.readiness, &site.clock, &site.steering);
    if let Some(t) = &site.temporary {
        on_temporary_store(t, &site.store, &api.readiness, tracker, cancel);
    }
    api
}

/// The MQTT uplink when `[mqtt]` is configured, and the feed of the
/// steering states it publishes (a no-op sink without it). Then the config
/// change the last run left on trial is watched, with the uplink's
/// connection as its probe.
fn start_uplink_and_trial(
    config: &Config,
    site: &Site,
    outbox: Option<crate::uplink::Outbox>,
    api: &router::Api,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> (SteeringFeed, Option<Uplink>) {
    let steering_feed = SteeringFeed::new();
    let uplink = config.mqtt.as_ref().zip(outbox).map(|(mqtt, outbox)| {
        let parts = UplinkParts {
            config: mqtt.clone(),
            gateway_id: config.gateway_id.clone(),
            router: api.router.clone(),
            auth: api.auth.clone(),
            live: site.live.clone(),
            catalog: site.telemetry.catalog_changes(),
            outbox,
            steering: steering_feed.clone(),
            ops: Some(api.ops.clone()),
        };
        start_uplink(parts, &site.steering, &api.readiness, tracker, cancel)
    });
    api.ops.resolve_config_change(
        uplink
            .clone()
            .map(|u| Arc::new(move || u.is_connected()) as crate::ops::UplinkProbe),
    );
    (steering_feed, uplink)
}
