//! A simulated site from the agent's config: every TCP bus on a loopback IP
//! becomes a server on that address, with one simulated device per configured
//! device, responding as the `[simulator]` section says (ideal where it is
//! silent); each of the agent's sites is a simulated site of its own, with
//! its load; `noisy = true` turns on noisy mode. Pure: reads the config,
//! starts nothing.

use std::net::{IpAddr, SocketAddr};

use super::{
    SimDeviceSpec, SimKind, SimNoise, SimResponse, SimServerSpec, SimSiteGroup, SimSiteSpec,
};
use crate::config::{Config, DeviceConfig, SimulatorConfig, Transport};
use crate::model::DeviceType;

/// Defaults for ratings the config leaves out.
pub const DEFAULT_RATED_W: f64 = 10_000.0;
pub const DEFAULT_CAPACITY_WH: f64 = 10_000.0;
pub const DEFAULT_SOC_MIN: f64 = 5.0;
pub const DEFAULT_SOC_MAX: f64 = 95.0;
pub const DEFAULT_INITIAL_SOC: f64 = 50.0;
pub const DEFAULT_BASE_LOAD_W: f64 = 600.0;

impl SimSiteSpec {
    /// One server per TCP bus whose host is a loopback IP (`127.x`, `::1`),
    /// listening on that host and port (0 allowed). Buses elsewhere are real
    /// devices and are left alone. One simulated site per configured site
    /// with simulated devices, its base load from `[simulator.sites.<ref>]`
    /// (default [`DEFAULT_BASE_LOAD_W`]); noisy with `[simulator] noisy =
    /// true` (its `seed`, else [`SimNoise::DEFAULT_SEED`]). Starts at the
    /// current time.
    pub fn from_config(cfg: &Config, time_factor: f64) -> SimSiteSpec {
        let servers: Vec<SimServerSpec> = cfg
            .buses
            .iter()
            .filter_map(|bus| {
                let Transport::Tcp { host, port } = &bus.transport else {
                    return None;
                };
                let ip: IpAddr = host.parse().ok()?;
                let mut devices: Vec<SimDeviceSpec> = cfg
                    .devices_on_bus(&bus.name)
                    .map(|d| device_spec(d, &cfg.simulator))
                    .collect();
                devices.extend(input_modules(cfg, &bus.name));
                ip.is_loopback().then(|| SimServerSpec {
                    name: bus.name.clone(),
                    listen: SocketAddr::new(ip, *port),
                    devices,
                })
            })
            .collect();
        let sites = sites(cfg, &servers);
        let sim = &cfg.simulator;
        SimSiteSpec {
            servers,
            time_factor,
            start: None,
            base_load_w: DEFAULT_BASE_LOAD_W,
            noise: sim
                .noisy
                .then(|| SimNoise::seeded(sim.seed.unwrap_or(SimNoise::DEFAULT_SEED))),
            sites,
        }
    }
}

/// One simulated site per configured site that has simulated devices.
fn sites(cfg: &Config, servers: &[SimServerSpec]) -> Vec<SimSiteGroup> {
    let simulated = |bus: &str| servers.iter().any(|s| s.name == bus);
    cfg.sites
        .iter()
        .filter_map(|site| {
            let devices: Vec<(String, u8)> = cfg
                .devices
                .iter()
                .filter(|d| d.site == site.reference && simulated(&d.bus))
                .map(|d| (d.bus.clone(), d.unit_id))
                .collect();
            let base_load_w = cfg
                .simulator
                .sites
                .get(&site.reference)
                .and_then(|s| s.base_load)
                .map_or(DEFAULT_BASE_LOAD_W, |p| p.watts());
            (!devices.is_empty()).then(|| SimSiteGroup {
                site: site.reference.clone(),
                base_load_w,
                devices,
            })
        })
        .collect()
}

/// A digital input module for every grid signal on `bus`.
fn input_modules<'a>(cfg: &'a Config, bus: &'a str) -> impl Iterator<Item = SimDeviceSpec> + 'a {
    cfg.sites
        .iter()
        .flat_map(|s| &s.grid_signals)
        .filter(move |g| g.bus == bus)
        .map(|g| SimDeviceSpec {
            unit_id: g.unit_id,
            kind: SimKind::Inputs {
                count: g.block().map_or(16, |b| b.inputs),
            },
            serial: format!("io-{}", g.unit_id),
            refuse_writes: false,
            sunspec_base: super::DEFAULT_SUNSPEC_BASE,
            response: SimResponse::IDEAL,
        })
}

fn device_spec(d: &DeviceConfig, sim: &SimulatorConfig) -> SimDeviceSpec {
    let kind = match (&d.profile, d.device_type) {
        (crate::config::ProfileRef::Registers(p), _) => SimKind::Profile {
            profile: p.clone(),
            readable_gaps: true,
        },
        (_, t) => sunspec_kind(d, t),
    };
    SimDeviceSpec {
        unit_id: d.unit_id,
        kind,
        serial: serial(&d.reference),
        refuse_writes: false,
        sunspec_base: super::DEFAULT_SUNSPEC_BASE,
        response: response(d, sim),
    }
}

/// How the device responds: its `[simulator]` tables, ideal where they are silent.
fn response(d: &DeviceConfig, sim: &SimulatorConfig) -> SimResponse {
    let c = sim.response(&d.reference, d.device_type);
    let ideal = SimResponse::IDEAL;
    SimResponse {
        lag_s: c.lag_s.unwrap_or(ideal.lag_s),
        ramp_percent_per_s: c.ramp_percent_per_s.or(ideal.ramp_percent_per_s),
        refresh_ms: c.refresh_ms.unwrap_or(ideal.refresh_ms),
        report_lag_ms: c.report_lag_ms.unwrap_or(ideal.report_lag_ms),
    }
}

fn sunspec_kind(d: &DeviceConfig, t: DeviceType) -> SimKind {
    match t {
        DeviceType::Inverter => SimKind::Inverter {
            rated_w: d.rated_power_w.unwrap_or(DEFAULT_RATED_W),
        },
        DeviceType::Battery => {
            let soc_min = d.soc_min.unwrap_or(DEFAULT_SOC_MIN);
            let soc_max = d.soc_max.unwrap_or(DEFAULT_SOC_MAX);
            let rated_w = d
                .rated_power_w
                .or(match (d.max_charge_power_w, d.max_discharge_power_w) {
                    (Some(c), Some(dc)) => Some(c.max(dc)),
                    (c, dc) => c.or(dc),
                })
                .unwrap_or(DEFAULT_RATED_W);
            SimKind::Battery {
                rated_w,
                capacity_wh: d.capacity_wh.unwrap_or(DEFAULT_CAPACITY_WH),
                initial_soc: DEFAULT_INITIAL_SOC.clamp(soc_min.min(soc_max), soc_max.max(soc_min)),
                soc_min,
                soc_max,
            }
        }
        DeviceType::Meter => SimKind::Meter,
    }
}

/// A serial number derived from the device reference (unique per reference),
/// at most the 32 characters of the Common model's `SN`.
fn serial(reference: &str) -> String {
    let s = format!("SIM-{}", reference.to_ascii_uppercase());
    s.chars().take(32).collect()
}

impl super::SimSite {
    /// Points every simulated bus of `cfg` at the address its server actually
    /// bound (port 0 resolved), so an agent built from `cfg` polls the simulator.
    pub fn point_config_at_servers(&self, cfg: &mut Config) {
        for bus in &mut cfg.buses {
            if let Some(addr) = self.addr(&bus.name) {
                bus.transport = Transport::Tcp {
                    host: addr.ip().to_string(),
                    port: addr.port(),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests;
