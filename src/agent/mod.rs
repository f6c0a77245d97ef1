//! The running agent: builds every subsystem from a validated config, starts their
//! tasks under one cancellation token, and stops them in order: the actuators
//! first (each releases its device while the bus tasks still run), then every
//! other task, then the store.
//!
//! This is wiring only: no protocol logic and no decisions live here.

mod clock_steps;
mod connections;
mod head_errors;
mod http;
pub mod start_failures;
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
use crate::config::{Config, StorageConfig};
use crate::liveness::Pulse;
use crate::metrics::Registry;
use crate::modbus::stats::BusCollector;
use crate::modbus::{BusHandle, BusTask, DeviceMaps};
use crate::store::{CommitHook, StoreError, StoreHandle};
use crate::telemetry::{Live, Reading, Telemetry};
use crate::uplink::outbox::{self, Cap, Outbox};
use crate::uplink::{SteeringFeed, Uplink, UplinkParts};
use connections::Connections;
pub use connections::{
    MAX_CONNECTIONS as HTTP_MAX_CONNECTIONS, MAX_PER_CLIENT as HTTP_MAX_PER_CLIENT,
    RESERVE_CONNECTIONS as HTTP_RESERVE_CONNECTIONS,
};
pub use temporary_store::TemporaryStore;

/// How long shutdown waits for tasks to finish before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot open the measurement store {path}: {source}")]
    Store { path: String, source: StoreError },
    #[error("cannot restore the steering signals: {0}")]
    Steering(#[from] crate::steering::PersistError),
}

/// EX_CONFIG from sysexits.h.
pub const EXIT_CONFIG: u8 = 78;

impl StartError {
    /// The process's exit code for this failure: [`EXIT_CONFIG`] for what a
    /// restart cannot cure (the unit does not restart after it:
    /// `RestartPreventExitStatus`), 1 for the rest, which a restart may cure
    /// (`start_failures.rs` spaces the attempts). A store that cannot be
    /// opened is not among them: the agent runs on a temporary one.
    pub fn exit_code(&self) -> u8 {
        match self {
            // A port below 1024 without the capability: the config's to fix.
            StartError::Bind { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                EXIT_CONFIG
            }
            _ => 1,
        }
    }
}

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

        let listeners = http::bind(&config.http.listen).await?;

        let live = Arc::new(Live::new(&config.devices));
        let clock = crate::clock::ClockWatch::start(&config.clock, &tracker, cancel.child_token());
        let (store, outbox, temporary) = open_any_store(&config, &live, &clock).await?;
        let telemetry = Telemetry::new(live.clone(), Some(store.sample_sender()));
        let maps = Arc::new(DeviceMaps::new(config.devices.len()));

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

        let steering_store: Arc<dyn crate::steering::SteeringStore> =
            Arc::new(crate::steering::SqliteSteeringStore::new(store.clone()));
        // On a temporary store the configured one's marker is kept by
        // `keep_configured_marker`; the temporary one needs none (it is
        // gone at the next start).
        let marker = config.storage.path.with_extension("steering-pending");
        let (steering, actuators) = crate::steering::start(
            &config,
            live.clone(),
            maps.clone(),
            &buses,
            steering_store,
            temporary.is_none().then_some(marker.as_path()),
            &tracker,
            cancel.child_token(),
        )
        .await;

        steering.watch_clock(clock.clone());
        tracker.spawn(clock_steps::run(
            clock.clone(),
            store.clone(),
            cancel.child_token(),
        ));

        let (router, auth, metrics, readiness, ops) = http::router(
            &config,
            live.clone(),
            store.clone(),
            steering.clone(),
            (telemetry.clone(), buses.clone()),
            &tracker,
            cancel.child_token(),
        )
        .await;
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
        if let Some(t) = &temporary {
            store.stats().mark_temporary();
            let notice = t.notice();
            readiness.register_degraded("store", move || Err(notice.clone()));
            tracker.spawn(t.clone().keep_configured_marker(cancel.child_token()));
        }
        let steering_feed = SteeringFeed::new();
        let uplink = match (&config.mqtt, outbox) {
            (Some(mqtt), Some(outbox)) => {
                let feed = steering_feed.clone();
                crate::steering::follow_states(
                    &steering,
                    Arc::new(move |site: &str, state| feed.publish_steering_state(site, state)),
                    &tracker,
                    cancel.child_token(),
                );
                let uplink = Uplink::start(
                    UplinkParts {
                        config: mqtt.clone(),
                        gateway_id: config.gateway_id.clone(),
                        router: router.clone(),
                        auth: auth.clone(),
                        live: live.clone(),
                        catalog: telemetry.catalog_changes(),
                        outbox,
                        steering: steering_feed.clone(),
                        ops: Some(ops.clone()),
                    },
                    &tracker,
                    cancel.child_token(),
                );
                // Unready while the uplink cannot be set up (its TLS files), and why.
                let probe = uplink.clone();
                readiness.register("mqtt", move || probe.setup_problem().map_or(Ok(()), Err));
                Some(uplink)
            }
            _ => None,
        };
        // A config change the last run left on trial: watched from here.
        let uplink_up = uplink.clone().map(|u| {
            let probe: crate::ops::UplinkProbe = Arc::new(move || u.is_connected());
            probe
        });
        ops.resolve_config_change(uplink_up);
        let connections = Arc::new(Connections::new(Duration::from_millis(
            config.http.request_timeout_ms,
        )));
        if let Some(registry) = &metrics {
            registry.register(connections.clone());
            registry.register(live.clone());
            registry.register(Arc::new(BusCollector(
                buses.values().map(|b| b.stats().clone()).collect(),
            )));
            registry.register(Arc::new(store.clone()));
            registry.register(Arc::new(steering.clone()));
            registry.register(Arc::new(clock.clone()));
            if let Some(uplink) = &uplink {
                registry.register(Arc::new(uplink.clone()));
            }
        }
        let apps = http::Apps {
            reserve: crate::api::reserve_router(router.clone()),
            full: router,
        };
        let http_addrs = http::serve(
            listeners,
            apps,
            &connections,
            &tracker,
            cancel.child_token(),
        );
        for addr in &http_addrs {
            tracing::info!(%addr, "HTTP API listening");
        }

        Ok(Agent {
            config,
            live,
            telemetry,
            store,
            temporary,
            maps,
            buses,
            steering,
            actuators,
            http_addrs,
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

/// Opens the configured store, or when it cannot be opened at all a
/// temporary one (`temporary_store.rs`): no failure of the store stops the
/// agent from holding the grid limits. With `[mqtt]`, the store writes the
/// telemetry outbox in its sample commits.
async fn open_any_store(
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
    let temporary = TemporaryStore::new(&config.storage, why);
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
