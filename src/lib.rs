//! sitegate: an edge gateway agent for energy sites.
//!
//! See `ARCHITECTURE.md` for the map of modules and the invariants they keep.

// No unwrap outside tests, except on true invariants, with a comment saying why.
#![warn(clippy::unwrap_used)]

pub mod agent;
pub mod api;
pub mod clock;
pub mod config;
pub mod csip;
pub mod eebus;
pub mod energy;
pub mod events;
pub mod grid_events;
pub mod http_server;
pub mod https;
pub mod liveness;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod modbus;
pub mod modbus_server;
pub mod model;
pub mod ops;
pub mod profile;
pub mod register;
pub mod sim;
pub mod steering;
pub mod store;
pub mod telemetry;
pub mod uplink;
pub mod util;
