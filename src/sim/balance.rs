//! What the physics task steps: the simulated sites of a fleet, each with its
//! own load and its own balance. A site's inverters step first, then its
//! batteries (they need the PV), then its meters (they need everything), and
//! a meter shows only its own site's devices.
//!
//! Owns no task and no socket: `site.rs` runs [`Physics::step`] on a timer.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::time::Instant;

use super::device::{lock, DeviceCell, Kind};
use super::noise::{self, LoadWalk};
use super::physics::{self, SimClock, Tick};
use super::response::Clouds;
use super::{SimKind, SimSiteSpec};

/// The sun, set by a test or a benchmark instead of the daily curve.
#[derive(Clone, Copy, Debug, Default)]
pub struct Weather {
    /// Fraction of every inverter's rating the sun offers (0 to 1).
    pub sun: Option<f64>,
    /// A cloud pattern and the real time it started; wins over `sun`.
    pub clouds: Option<(Clouds, Instant)>,
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

/// One site: its devices in stepping order and its load.
pub struct Group {
    /// `None`: the devices no named site holds.
    pub site: Option<String>,
    base_load_w: f64,
    devices: Vec<DeviceCell>,
    load: Mutex<Load>,
}

/// A site's load: held by a test, else the daily profile (times the walk
/// when noisy).
struct Load {
    held_w: Option<f64>,
    walk: Option<LoadWalk>,
    /// The load of the last step, W.
    now_w: f64,
}

/// Where each device goes: (server, unit id) to the index of its group, and
/// the groups' names and base loads; the last group holds the rest.
pub struct Plan {
    pub groups: Vec<(Option<String>, f64)>,
    of: BTreeMap<(String, u8), usize>,
}

impl Plan {
    pub fn new(spec: &SimSiteSpec) -> Plan {
        let mut groups: Vec<(Option<String>, f64)> = spec
            .sites
            .iter()
            .map(|g| (Some(g.site.clone()), g.base_load_w))
            .collect();
        let rest = groups.len();
        groups.push((None, spec.base_load_w));
        let mut of = BTreeMap::new();
        for (i, g) in spec.sites.iter().enumerate() {
            for key in &g.devices {
                of.insert(key.clone(), i);
            }
        }
        for s in &spec.servers {
            for d in &s.devices {
                of.entry((s.name.clone(), d.unit_id)).or_insert(rest);
            }
        }
        Plan { groups, of }
    }

    /// The group of the device at `server`, `unit_id`.
    pub fn group_of(&self, server: &str, unit_id: u8) -> usize {
        // Every device of the spec was entered in `new`.
        self.of
            .get(&(server.to_string(), unit_id))
            .copied()
            .unwrap_or(self.groups.len() - 1)
    }

    /// The largest power a meter of each group may have to show: all its
    /// generation and storage plus a generous load.
    pub fn max_w(&self, spec: &SimSiteSpec) -> Vec<f64> {
        let mut rated = vec![0.0; self.groups.len()];
        for s in &spec.servers {
            for d in &s.devices {
                rated[self.group_of(&s.name, d.unit_id)] += match d.kind {
                    SimKind::Inverter { rated_w }
                    | SimKind::Battery { rated_w, .. }
                    | SimKind::FroniusGen24 { rated_w, .. }
                    | SimKind::Fixed { rated_w, .. } => rated_w,
                    SimKind::Meter | SimKind::Profile { .. } | SimKind::Inputs { .. } => 0.0,
                };
            }
        }
        rated
            .iter()
            .zip(&self.groups)
            .map(|(r, (_, base))| r + 4.0 * base.max(1000.0))
            .collect()
    }
}

/// Every site of the fleet, the clock and the weather.
pub struct Physics {
    pub clock: SimClock,
    groups: Vec<Group>,
    /// The simulated and the real time of the last step.
    last: Mutex<(i64, Instant)>,
    weather: Mutex<Weather>,
}

/// Locks plain numbers: a panic elsewhere cannot leave them half-written.
fn plain<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Physics {
    /// `groups`: each group's devices (any order) in the order of `plan`;
    /// `seed`: noisy mode's seed, `None` when calm.
    pub fn new(
        clock: SimClock,
        start_ms: i64,
        plan: &Plan,
        devices: Vec<Vec<DeviceCell>>,
        seed: Option<u64>,
    ) -> Physics {
        let groups = plan
            .groups
            .iter()
            .zip(devices)
            .enumerate()
            .map(|(i, ((site, base_load_w), mut devices))| {
                // Batteries step after inverters, meters last.
                devices.sort_by_key(|cell| match lock(cell).kind {
                    Kind::Inverter(_) => 0,
                    Kind::Battery(_) => 1,
                    Kind::Meter(_) => 2,
                    Kind::Profile(_) | Kind::Fixed | Kind::Inputs { .. } => 3,
                });
                let walk = seed.map(|s| {
                    let name = site.as_deref().unwrap_or("");
                    LoadWalk::new(noise::device_seed(s, name, i as u8))
                });
                Group {
                    site: site.clone(),
                    base_load_w: *base_load_w,
                    devices,
                    load: Mutex::new(Load {
                        held_w: None,
                        walk,
                        now_w: *base_load_w,
                    }),
                }
            })
            .collect();
        Physics {
            clock,
            groups,
            last: Mutex::new((start_ms, Instant::now())),
            weather: Mutex::new(Weather::default()),
        }
    }

    pub fn weather(&self) -> MutexGuard<'_, Weather> {
        plain(&self.weather)
    }

    /// Holds the load of `site` (every site for `None`) at `load_w`; `None`
    /// goes back to the profile. False when no site has that name.
    pub fn hold_load(&self, site: Option<&str>, load_w: Option<f64>) -> bool {
        let mut found = false;
        for g in &self.groups {
            if site.is_none() || g.site.as_deref() == site {
                plain(&g.load).held_w = load_w.map(|w| w.max(0.0));
                found = true;
            }
        }
        found
    }

    /// The load of `site` at the last step, W.
    pub fn load_w(&self, site: &str) -> Option<f64> {
        self.groups
            .iter()
            .find(|g| g.site.as_deref() == Some(site))
            .map(|g| plain(&g.load).now_w)
    }

    /// One step: revert timers (real time), then every site's devices over the
    /// simulated time since the last step.
    pub fn step(&self, now: Instant) {
        let sim_ms = self.clock.at(now);
        let (dt_s, real_dt_s) = {
            let mut last = plain(&self.last);
            let dt = (sim_ms - last.0).max(0) as f64 / 1000.0;
            let real_dt = now.saturating_duration_since(last.1).as_secs_f64();
            *last = (sim_ms, now);
            (dt, real_dt)
        };
        let tick = Tick {
            sim_ms,
            dt_s,
            real_dt_s,
            real_s: self.clock.real_elapsed().as_secs_f64(),
        };
        let sun = self.weather().sun_at(now);
        for g in &self.groups {
            g.step(tick, now, sun);
        }
    }
}

impl Group {
    fn load_at(&self, tick: Tick) -> f64 {
        let mut load = plain(&self.load);
        let w = match load.held_w {
            Some(w) => w,
            None => {
                let profile = physics::load_w(tick.sim_ms, self.base_load_w);
                let factor = match &mut load.walk {
                    Some(walk) => walk.factor_at(tick.real_s.floor() as i64),
                    None => 1.0,
                };
                profile * factor
            }
        };
        load.now_w = w;
        w
    }

    fn step(&self, tick: Tick, now: Instant, sun: Option<f64>) {
        let load = self.load_at(tick);
        let mut pv = 0.0;
        let mut battery_rated = 0.0;
        for cell in &self.devices {
            let mut d = lock(cell);
            d.check_revert(now);
            let d = &mut *d;
            match &mut d.kind {
                Kind::Inverter(inv) => pv += inv.step(&mut d.map, tick, sun),
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
                    battery += bat.step(&mut d.map, (own, own.max(0.0)), tick);
                }
                Kind::Meter(meter) => meter.step(&mut d.map, load - pv - battery, tick),
                Kind::Inverter(_) | Kind::Profile(_) | Kind::Fixed | Kind::Inputs { .. } => {}
            }
        }
    }
}
