//! The simulated site: Modbus TCP servers on loopback that speak SunSpec like real
//! devices (a PV inverter, a battery, a grid meter), with simple physics on a
//! simulated clock, calm or noisy, one balance per simulated site. Used by
//! `sitegate demo`, the tests and the benches, so it is a faithful Modbus
//! peer: real sockets, real exception codes, real revert timers.
//!
//! Layout: `map` (register image and Modbus access rules), `common` (Common and
//! Nameplate models, shared helpers), `inverter`, `battery`, `meter` (one device
//! kind each: layout and behaviour), `physics` (pure: clock, sun, load, battery
//! decision), `noise` (pure: noisy mode's seeded draws and load walk),
//! `balance` (the sites of a fleet, each stepped with its own load),
//! `device` (one device behind a mutex, the write path), `service`
//! (Modbus requests to devices), `server` (listeners and connections), `site`
//! (start, physics task, stop), `check` (what a spec may not say), `config`
//! (a site from the agent's config),
//! `variants` (the other inverter and meter families and DER storage, with
//! fixed values), `profile` (register-map devices), `rtu` (a serial line), `faulty`
//! (a fault-injecting proxy). A SunSpec map starts where its device says
//! (`sunspec_base`: 40000 unless a test puts it elsewhere).
//!
//! The simulator must never reach into the agent: it only answers Modbus.

mod balance;
mod battery;
mod build;
mod check;
mod common;
mod config;
mod device;
mod faulty;
mod handle;
mod inverter;
mod meter;
pub mod noise;
mod physics;
mod profile;
mod response;
mod rtu;
mod server;
mod service;
mod site;
mod variants;

use std::net::SocketAddr;

pub use faulty::{Fault, FaultyPeer};
pub use handle::SimDeviceHandle;
pub use response::Clouds;
pub use rtu::SimRtuLine;
pub use site::SimSite;
pub use variants::{absent as fixed_absent, expected as fixed_values, Variant};

/// Everything a simulated site is made of. `..SimSiteSpec::default()` fills
/// what a test leaves out: no servers, real time, started now, the default
/// base load, calm, one balance for every device.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSiteSpec {
    pub servers: Vec<SimServerSpec>,
    /// Simulated seconds per real second (1.0 = real time).
    pub time_factor: f64,
    /// Simulated epoch ms at start; `None` = now.
    pub start: Option<i64>,
    /// Base load, W, of the devices no entry of `sites` holds (every device
    /// when `sites` is empty); the daily profile adds morning and evening bumps.
    pub base_load_w: f64,
    /// Noisy mode (`docs/devices.md`, "Noisy mode"); `None`: calm, every value
    /// a smooth function of the time, as most tests want.
    pub noise: Option<SimNoise>,
    /// Sites of their own: each has its own load and its meters balance only
    /// its own devices. Devices no entry holds share one more balance, with
    /// `base_load_w`; empty: every device in that one.
    pub sites: Vec<SimSiteGroup>,
}

impl Default for SimSiteSpec {
    fn default() -> SimSiteSpec {
        SimSiteSpec {
            servers: Vec::new(),
            time_factor: 1.0,
            start: None,
            base_load_w: config::DEFAULT_BASE_LOAD_W,
            noise: None,
            sites: Vec::new(),
        }
    }
}

/// Noisy mode: every measured point moves every real second with measurement
/// noise, a site's load follows a mean-reverting random walk with steps, every
/// `float_every`-th inverter and meter speaks the float models, and integer
/// models use scale factors as fine as their range allows. Every draw comes
/// from `seed`: the same seed, the same noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimNoise {
    pub seed: u64,
    /// Counted per kind over the servers and their devices in spec order, the
    /// `float_every`-th inverter, the `2 × float_every`-th and so on use
    /// models 113 (with 120, 121, 123) and 213 instead of 103 and 203: 5 is a
    /// fifth, 1 all of them, 0 none.
    pub float_every: u32,
}

impl SimNoise {
    /// The seed of `[simulator] noisy = true` without `seed`.
    pub const DEFAULT_SEED: u64 = 0x5eed_0f5e_ed0f_5172;

    /// Noise from `seed`, a fifth of the inverters and meters on float models.
    pub const fn seeded(seed: u64) -> SimNoise {
        SimNoise {
            seed,
            float_every: 5,
        }
    }
}

impl Default for SimNoise {
    fn default() -> SimNoise {
        SimNoise::seeded(SimNoise::DEFAULT_SEED)
    }
}

/// One site of a simulated fleet: its load and the devices its meters balance.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSiteGroup {
    /// The agent's site reference ([`SimSite::set_site_load`] names it so).
    pub site: String,
    /// Base load, W, before the daily profile (and the random walk when noisy).
    pub base_load_w: f64,
    /// Its devices: (server name, unit id).
    pub devices: Vec<(String, u8)>,
}

/// One Modbus TCP server (one listening socket) hosting devices by unit id.
#[derive(Clone, Debug, PartialEq)]
pub struct SimServerSpec {
    pub name: String,
    /// Port 0 picks an ephemeral port; [`SimSite::addr`] tells which.
    pub listen: SocketAddr,
    pub devices: Vec<SimDeviceSpec>,
}

/// One simulated device behind a unit id.
#[derive(Clone, Debug, PartialEq)]
pub struct SimDeviceSpec {
    pub unit_id: u8,
    pub kind: SimKind,
    /// Common model `SN`; at most 32 characters are kept.
    pub serial: String,
    /// Answer every write with exception 4 (ServerDeviceFailure).
    pub refuse_writes: bool,
    /// Where a SunSpec device's map starts (the "SunS" marker):
    /// [`DEFAULT_SUNSPEC_BASE`] on most devices; discovery also looks at 0 and
    /// 50000, and anywhere else it finds nothing. Profile devices ignore it.
    pub sunspec_base: u16,
    /// How it follows its setpoints (inverters, batteries) or reports (meters).
    pub response: SimResponse,
}

/// How a simulated device responds, like a real one: inverters and batteries
/// follow a new target with a first-order lag and a ramp limit; a meter
/// refreshes its registers every period and shows the power of a lag before.
/// All in real time, like the revert timers. [`SimResponse::IDEAL`]: at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimResponse {
    /// Inverters and batteries: the time constant of the lag, s (0: at once).
    pub lag_s: f64,
    /// Inverters and batteries: the most the output moves in a second, % of
    /// the rating (`None`: no limit).
    pub ramp_percent_per_s: Option<f64>,
    /// Meters: the registers are refreshed every this many ms (0: every
    /// physics step).
    pub refresh_ms: u64,
    /// Meters: a refresh shows the power of this many ms before.
    pub report_lag_ms: u64,
}

/// Where SunSpec maps usually start.
pub const DEFAULT_SUNSPEC_BASE: u16 = 40000;

/// Registers a simulated SunSpec map may span (the longest is under 500); its
/// base must leave that much room below the end of the address space.
const MAX_MAP_LEN: u32 = 1000;

/// What a simulated device is.
#[derive(Clone, Debug, PartialEq)]
pub enum SimKind {
    /// Three-phase PV inverter (models 1, 103, 120, 121, 123).
    Inverter { rated_w: f64 },
    /// Battery inverter (models 1, 701, 120, 124, 802); SoC values in %.
    Battery {
        rated_w: f64,
        capacity_wh: f64,
        initial_soc: f64,
        soc_min: f64,
        soc_max: f64,
    },
    /// A Fronius Symo GEN24 Plus hybrid as its battery: the battery inverter
    /// above with the GEN24's Common model strings and its model-124 revert
    /// (back to `StorCtl_Mod = 0`, the rates left as they were).
    FroniusGen24 {
        rated_w: f64,
        capacity_wh: f64,
        initial_soc: f64,
        soc_min: f64,
        soc_max: f64,
    },
    /// Three-phase grid meter at the connection point (models 1, 203).
    Meter,
    /// A SunSpec device with fixed values (inverters and meters of the
    /// families the physics devices do not speak, DER storage): see
    /// [`fixed_values`] for what it shows and [`fixed_absent`] for what it
    /// does not.
    Fixed { variant: Variant, rated_w: f64 },
    /// A non-SunSpec device laid out from a register-map profile. With
    /// `readable_gaps`, registers between the named ones read 0; without, they
    /// answer "illegal data address".
    Profile {
        profile: std::sync::Arc<crate::profile::Profile>,
        readable_gaps: bool,
    },
    /// A digital input module (a grid operator's ripple-control receiver or
    /// control box wired to it): `count` inputs (at most 16), read as discrete
    /// inputs from 0 (function 2) and as one word of bits in input and holding
    /// register 0 (input 1 in bit 0). [`SimDeviceHandle::set_inputs`] flips them.
    Inputs { count: u8 },
}

impl SimKind {
    /// A battery's rating and the Common model it presents (`None` for
    /// anything but a battery).
    pub(crate) fn battery(&self) -> Option<(battery::BatteryRating, battery::Brand)> {
        let brand = match self {
            SimKind::Battery { .. } => battery::Brand::Sitegate,
            SimKind::FroniusGen24 { .. } => battery::Brand::FroniusGen24,
            _ => return None,
        };
        match *self {
            SimKind::Battery {
                rated_w,
                capacity_wh,
                initial_soc,
                soc_min,
                soc_max,
            }
            | SimKind::FroniusGen24 {
                rated_w,
                capacity_wh,
                initial_soc,
                soc_min,
                soc_max,
            } => Some((
                battery::BatteryRating {
                    rated_w,
                    capacity_wh,
                    initial_soc,
                    soc_min,
                    soc_max,
                },
                brand,
            )),
            _ => None,
        }
    }
}

/// A device's physical state, in the agent's vocabulary and signs.
#[derive(Clone, Debug, PartialEq)]
pub struct SimDeviceState {
    /// Inverter + produced; battery + discharging, − charging; meter + import.
    pub ac_power_w: f64,
    /// Inverter only: what the sun offers now, before limits.
    pub available_w: Option<f64>,
    /// Batteries: state of charge, %.
    pub soc: Option<f64>,
    /// Inverters: the model-123 limit in % of `WMax`, while `WMaxLim_Ena` = 1.
    pub limit_pct: Option<f64>,
    /// Batteries: the model-124 controls, while `StorCtl_Mod` != 0.
    pub storage_control: Option<StorageControl>,
    /// Inverter: lifetime yield; battery: discharged; meter: exported. Wh.
    pub energy_produced_wh: f64,
    /// Battery: charged; meter: imported; inverter: 0. Wh.
    pub energy_consumed_wh: f64,
}

/// Model-124 storage control as written by a client.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StorageControl {
    /// `StorCtl_Mod`: bit 0 = charge limit active, bit 1 = discharge limit active.
    pub mode: u16,
    /// `InWRte`, % of `WChaMax`.
    pub in_pct: f64,
    /// `OutWRte`, % of `WChaMax`.
    pub out_pct: f64,
}

/// A write request that reached a simulated server, accepted or refused.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteEvent {
    pub server: String,
    /// This request's place among every request the server handled (reads,
    /// writes, refused ones), from 0: the order in which they arrived.
    pub seq: u64,
    pub unit_id: u8,
    pub address: u16,
    pub values: Vec<u16>,
    /// When it arrived (real time).
    pub at: tokio::time::Instant,
    /// `None` when accepted, else the exception it was answered with.
    pub exception: Option<tokio_modbus::ExceptionCode>,
}

#[cfg(test)]
mod tests;
