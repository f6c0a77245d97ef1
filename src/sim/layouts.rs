//! The simulator's SunSpec map builder and model layouts, for other code that
//! serves a SunSpec image of its own (the Modbus server's site device): one
//! layout of each model in the crate, not two.
//!
//! Re-exports only; nothing here has behaviour of its own.

pub use super::battery::layout::battery_base;
pub use super::battery::BatteryRating;
pub use super::common::{common_as, nameplate};
pub use super::inverter::layout::{
    controls as inverter_controls, measurement as inverter_measurement,
};
pub use super::map::{Block, MapBuilder, RegisterMap};
pub use super::meter::layout::int as meter_measurement;
