//! The running simulated site: its servers, its devices, the simulated clock and
//! the physics task that moves the devices every ~100 ms of real time.
//!
//! Owns every task it starts (a `TaskTracker` under a `CancellationToken`):
//! `shutdown` leaves nothing running, and dropping a `SimSite` cancels it all.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::device::{lock, Device, DeviceCell, Kind};
use super::physics::{self, SimClock};
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

/// What the physics task steps, in a fixed order: inverters, then batteries
/// (they need the PV), then meters (they need everything).
struct Physics {
    clock: SimClock,
    base_load_w: f64,
    devices: Vec<DeviceCell>,
    /// The simulated and the real time of the last step.
    last: Mutex<(i64, Instant)>,
    weather: Mutex<Weather>,
}

/// Set by a test or a benchmark instead of the daily curves.
#[derive(Clone, Copy, Debug, Default)]
struct Weather {
    /// Household load, W.
    load_w: Option<f64>,
    /// Fraction of every inverter's rating the sun offers (0 to 1).
    sun: Option<f64>,
    /// A cloud pattern and the real time it started; wins over `sun`.
    clouds: Option<(Clouds, Instant)>,
}

impl Weather {
    /// The sun's fraction set for `now`, if any.
    fn sun_at(&self, now: Instant) -> Option<f64> {
        match self.clouds {
            Some((c, since)) => Some(c.sun_at(now.saturating_duration_since(since).as_secs_f64())),
            None => self.sun,
        }
    }
}

impl SimSite {
    /// Builds the devices, binds every server and starts the physics task.
    /// Fails on a bind error, a duplicate server name or a duplicate unit id.
    pub async fn start(spec: SimSiteSpec) -> io::Result<SimSite> {
        spec.check()
            .map_err(|msg| io::Error::new(io::ErrorKind::InvalidInput, msg))?;
        let site_max_w = site_max_w(&spec);
        let start_ms = spec.start.unwrap_or_else(crate::model::time::now_ms);
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let cancel = CancellationToken::new();
        let tasks = TaskTracker::new();
        let mut all = Vec::new();
        let mut servers = BTreeMap::new();
        for s in &spec.servers {
            let mut devices = BTreeMap::new();
            for d in &s.devices {
                let cell: DeviceCell = Arc::new(Mutex::new(Device::new(d, site_max_w)));
                devices.insert(d.unit_id, Arc::clone(&cell));
                all.push(cell);
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
        // Batteries step after inverters, meters last.
        all.sort_by_key(|cell| match lock(cell).kind {
            Kind::Inverter(_) => 0,
            Kind::Battery(_) => 1,
            Kind::Meter(_) => 2,
            Kind::Profile(_) | Kind::Fixed | Kind::Inputs { .. } => 3,
        });
        let physics = Arc::new(Physics {
            clock: SimClock::new(start_ms, spec.time_factor),
            base_load_w: spec.base_load_w,
            devices: all,
            last: Mutex::new((start_ms, Instant::now())),
            weather: Mutex::new(Weather::default()),
        });
        tasks.spawn(run_physics(Arc::clone(&physics), cancel.child_token()));
        tracing::info!(
            servers = servers.len(),
            time_factor = spec.time_factor,
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

    /// Holds the household load at `load_w` (W) from the next physics step on;
    /// `None` goes back to the daily profile.
    pub fn set_load(&self, load_w: Option<f64>) {
        self.physics.weather().load_w = load_w.map(|w| w.max(0.0));
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

/// The largest power the meter may have to show: all generation and storage
/// plus a generous load.
fn site_max_w(spec: &SimSiteSpec) -> f64 {
    let devices = spec.servers.iter().flat_map(|s| &s.devices);
    let rated: f64 = devices
        .map(|d| match d.kind {
            SimKind::Inverter { rated_w }
            | SimKind::Battery { rated_w, .. }
            | SimKind::FroniusGen24 { rated_w, .. } => rated_w,
            SimKind::Meter | SimKind::Profile { .. } | SimKind::Inputs { .. } => 0.0,
            SimKind::Fixed { rated_w, .. } => rated_w,
        })
        .sum();
    rated + 4.0 * spec.base_load_w.max(1000.0)
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

impl Physics {
    fn weather(&self) -> std::sync::MutexGuard<'_, Weather> {
        // Two plain numbers: a panic elsewhere cannot leave them half-written.
        self.weather
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One step: revert timers (real time), then the devices over the simulated
    /// time since the last step.
    fn step(&self, now: Instant) {
        let sim_ms = self.clock.at(now);
        let (dt_s, real_dt_s) = {
            let mut last = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let dt = (sim_ms - last.0).max(0) as f64 / 1000.0;
            let real_dt = now.saturating_duration_since(last.1).as_secs_f64();
            *last = (sim_ms, now);
            (dt, real_dt)
        };
        let real_s = self.clock.real_elapsed().as_secs_f64();
        let weather = *self.weather();
        let sun = weather.sun_at(now);
        let load = weather
            .load_w
            .unwrap_or_else(|| physics::load_w(sim_ms, self.base_load_w));
        let mut pv = 0.0;
        let mut battery_rated = 0.0;
        for cell in &self.devices {
            let mut d = lock(cell);
            d.check_revert(now);
            let d = &mut *d;
            match &mut d.kind {
                Kind::Inverter(inv) => pv += inv.step(&mut d.map, sim_ms, (dt_s, real_dt_s), sun),
                Kind::Battery(bat) => battery_rated += bat.rated_w(),
                Kind::Meter(_) | Kind::Profile(_) | Kind::Fixed | Kind::Inputs { .. } => {}
            }
        }
        let surplus = pv - load;
        let mut battery = 0.0;
        for cell in &self.devices {
            let mut d = lock(cell);
            let d = &mut *d;
            match &mut d.kind {
                Kind::Battery(bat) => {
                    let share = bat.rated_w() / battery_rated.max(1.0);
                    let own = surplus * share;
                    battery += bat.step(
                        &mut d.map,
                        (own, own.max(0.0)),
                        sim_ms,
                        (dt_s, real_dt_s, real_s),
                    );
                }
                Kind::Meter(meter) => {
                    meter.step(&mut d.map, load - pv - battery, sim_ms, (dt_s, real_s));
                }
                Kind::Inverter(_) | Kind::Profile(_) | Kind::Fixed | Kind::Inputs { .. } => {}
            }
        }
    }
}
