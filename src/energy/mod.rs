//! The site energy view: per hour or per day, the kWh each flow carried
//! (produced, imported, exported, charged, discharged), the load, and
//! self-consumption and autarky, with the source of every flow (a device's
//! own energy counter, or its integrated `activePower`).
//!
//! The computation is pure (`flow.rs`, `grid.rs`, `counter.rs`, `power.rs`,
//! `balance.rs`, `plan.rs`, `refine.rs`) over the store's bucket summaries; `read.rs` is
//! its only I/O, through the store's read API. It must not open SQLite, know
//! JSON or HTTP, or read the clock: the question carries its range.

mod balance;
mod counter;
mod flow;
mod grid;
mod plan;
mod power;
mod read;
mod refine;

pub use balance::{Bucket, Sources};
pub use flow::{Flow, Source};
pub use plan::{
    DeviceFlows, EnergyDevice, EnergyQuery, Interval, Prefer, SiteEnergy, MAX_RANGE_MS,
};
pub use read::{site_energy, EnergyError};
