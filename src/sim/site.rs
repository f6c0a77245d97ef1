//! The running simulated site: its servers, its devices, the simulated clock and
//! the physics task that moves the devices every ~100 ms of real time.
//!
//! Owns every task it starts (a `TaskTracker` under a `CancellationToken`):
//! `shutdown` leaves nothing running, and dropping a `SimSite` cancels it all.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::balance::{Physics, Plan};
use super::device::{Build, Device, DeviceCell};
use super::noise::{self, Jitter};
use super::physics::SimClock;
use super::response::Clouds;
use super::server::SimServer;
use super::service::ServerShared;
use super::{SimDeviceHandle, SimKind, SimSiteSpec, WriteEvent};

/// Physics step period, real time.
const TICK: Duration = Duration::from_millis(100);
/// Write events kept for slow subscribers before they see `Lagged`.
const EVENT_BUFFER: usize = 1024;

/// A running simulated site. See [`SimSiteSpec`] for what it is made of.
pub struct SimSite {
    servers: BTreeMap<String, SimServer>,
    physics: Arc<Physics>,
    events: broadcast::Sender<WriteEvent>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl SimSite {
    /// Builds the devices, binds every server and starts the physics task.
    /// Fails on a bind error, a duplicate server name or a duplicate unit id.
    pub async fn start(spec: SimSiteSpec) -> io::Result<SimSite> {
        spec.check()
            .map_err(|msg| io::Error::new(io::ErrorKind::InvalidInput, msg))?;
        let plan = Plan::new(&spec);
        let max_w = plan.max_w(&spec);
        let start_ms = spec.start.unwrap_or_else(crate::model::time::now_ms);
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let cancel = CancellationToken::new();
        let tasks = TaskTracker::new();
        let mut groups: Vec<Vec<DeviceCell>> = vec![Vec::new(); plan.groups.len()];
        let mut floats = FloatChoice::new(&spec);
        let mut servers = BTreeMap::new();
        for s in &spec.servers {
            let mut devices = BTreeMap::new();
            for d in &s.devices {
                let group = plan.group_of(&s.name, d.unit_id);
                let build = Build {
                    site_max_w: max_w[group],
                    jitter: spec.noise.map_or(Jitter::CALM, |n| {
                        Jitter::seeded(noise::device_seed(n.seed, &s.name, d.unit_id))
                    }),
                    float: floats.next(&d.kind),
                };
                let cell: DeviceCell = Arc::new(Mutex::new(Device::new(d, build)));
                devices.insert(d.unit_id, Arc::clone(&cell));
                groups[group].push(cell);
            }
            let shared = Arc::new(ServerShared::new(s.name.clone(), devices, events.clone()));
            match SimServer::start(shared, s.listen, &cancel, &tasks).await {
                Ok(server) => {
                    servers.insert(s.name.clone(), server);
                }
                Err(e) => {
                    cancel.cancel();
                    let msg = format!("simulated server {:?} on {}: {e}", s.name, s.listen);
                    return Err(io::Error::new(e.kind(), msg));
                }
            }
        }
        let clock = SimClock::new(start_ms, spec.time_factor);
        let seed = spec.noise.map(|n| n.seed);
        let physics = Arc::new(Physics::new(clock, start_ms, &plan, groups, seed));
        tasks.spawn(run_physics(Arc::clone(&physics), cancel.child_token()));
        tracing::info!(
            servers = servers.len(),
            time_factor = spec.time_factor,
            sites = spec.sites.len(),
            noisy = spec.noise.is_some(),
            "simulated site started"
        );
        Ok(SimSite {
            servers,
            physics,
            events,
            cancel,
            tasks,
        })
    }

    /// The address a server is bound to (the real port when 0 was asked for).
    pub fn addr(&self, server: &str) -> Option<SocketAddr> {
        self.servers.get(server).map(|s| s.addr)
    }

    /// Like the device losing power: closes the listener and drops every open
    /// connection; returns once they are closed.
    pub async fn stop_server(&self, server: &str) {
        if let Some(s) = self.servers.get(server) {
            s.stop().await;
        }
    }

    /// Serves again on the same address after [`SimSite::stop_server`].
    pub async fn start_server(&self, server: &str) -> io::Result<()> {
        let s = self.servers.get(server).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no simulated server {server:?}"),
            )
        })?;
        s.resume(&self.cancel, &self.tasks).await
    }

    /// A handle on the device with `unit_id` on `server`.
    pub fn device(&self, server: &str, unit_id: u8) -> Option<SimDeviceHandle> {
        let s = self.servers.get(server)?;
        s.shared
            .devices
            .get(&unit_id)
            .cloned()
            .map(SimDeviceHandle::new)
    }

    /// Every write that reaches a server from now on, accepted or refused.
    pub fn subscribe_writes(&self) -> broadcast::Receiver<WriteEvent> {
        self.events.subscribe()
    }

    /// Requests `server` has handled so far (reads, writes, refused ones): the
    /// [`WriteEvent::seq`] the next one will get.
    pub fn request_count(&self, server: &str) -> Option<u64> {
        self.servers.get(server).map(|s| s.shared.request_count())
    }

    /// While `on`, read requests to `server` wait unanswered, as on a device
    /// that is slow to answer, until called again with `false` (the client's
    /// own timeout still applies); writes are answered as usual. Returns false
    /// for an unknown server.
    pub fn hold_reads(&self, server: &str, on: bool) -> bool {
        self.servers
            .get(server)
            .map(|s| s.shared.hold_reads(on))
            .is_some()
    }

    /// Read requests to `server` waiting for [`SimSite::hold_reads`] to end.
    pub fn held_reads(&self, server: &str) -> usize {
        self.servers
            .get(server)
            .map_or(0, |s| s.shared.held_reads())
    }

    /// Holds the load of every site at `load_w` (W) from the next physics
    /// step on; `None` goes back to the daily profile (and the walk, when
    /// noisy).
    pub fn set_load(&self, load_w: Option<f64>) {
        self.physics.hold_load(None, load_w);
    }

    /// [`SimSite::set_load`] for one site of [`SimSiteSpec::sites`]; false
    /// when no site has that name.
    pub fn set_site_load(&self, site: &str, load_w: Option<f64>) -> bool {
        self.physics.hold_load(Some(site), load_w)
    }

    /// The load of one site of [`SimSiteSpec::sites`] at the last physics
    /// step, W (what its meter balances against its devices).
    pub fn site_load_w(&self, site: &str) -> Option<f64> {
        self.physics.load_w(site)
    }

    /// Holds the sun at `fraction` (0 to 1) of every inverter's rating from the
    /// next physics step on (and ends a cloud pattern); `None` goes back to the
    /// sun curve.
    pub fn set_sun(&self, fraction: Option<f64>) {
        let mut w = self.physics.weather();
        w.sun = fraction.map(|f| f.clamp(0.0, 1.0));
        w.clouds = None;
    }

    /// Runs a cloud pattern from now on (real time): the sun alternates between
    /// `clouds.high` and `clouds.low`; [`SimSite::set_sun`] ends it.
    pub fn set_clouds(&self, clouds: Clouds) {
        let c = Clouds {
            low: clouds.low.clamp(0.0, 1.0),
            high: clouds.high.clamp(0.0, 1.0),
            ..clouds
        };
        self.physics.weather().clouds = Some((c, Instant::now()));
    }

    /// The simulated clock, epoch ms.
    pub fn now_ms(&self) -> i64 {
        self.physics.clock.now_ms()
    }

    /// Stops every server and the physics task and waits for all of them.
    pub async fn shutdown(self) {
        for s in self.servers.values() {
            s.stop().await;
        }
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        tracing::info!("simulated site stopped");
    }
}

impl Drop for SimSite {
    fn drop(&mut self) {
        // Without `shutdown`, tasks still end promptly (not awaited).
        self.cancel.cancel();
    }
}

/// Which inverters and meters speak the float models in noisy mode: every
/// `float_every`-th of each kind, counted in spec order.
struct FloatChoice {
    every: u32,
    inverters: u32,
    meters: u32,
}

impl FloatChoice {
    fn new(spec: &SimSiteSpec) -> FloatChoice {
        FloatChoice {
            every: spec.noise.map_or(0, |n| n.float_every),
            inverters: 0,
            meters: 0,
        }
    }

    /// Whether the next device, of kind `kind`, is a float one.
    fn next(&mut self, kind: &SimKind) -> bool {
        let count = match kind {
            SimKind::Inverter { .. } => &mut self.inverters,
            SimKind::Meter => &mut self.meters,
            _ => return false,
        };
        *count += 1;
        self.every > 0 && *count % self.every == 0
    }
}

async fn run_physics(physics: Arc<Physics>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = tick.tick() => physics.step(Instant::now()),
        }
    }
}
