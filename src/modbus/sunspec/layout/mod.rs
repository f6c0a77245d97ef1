//! The SunSpec image a Modbus server presents: the register map and its
//! builder (`map.rs`), the Common and Nameplate models and scale factors
//! (`common.rs`), and one layout of each inverter, meter and battery model
//! (`inverter.rs`, `meter.rs`, `battery.rs`). The Modbus server's site
//! device and the simulator both build their images from here, so each
//! model is laid out once.
//!
//! Pure register layout: no I/O, no clock, no physics. It must not know
//! what a device or a site does with its registers.

pub mod battery;
pub mod common;
pub mod inverter;
pub mod map;
pub mod meter;

pub use battery::{battery_base, BatteryRating};
pub use common::{common_as, nameplate};
pub use inverter::{controls as inverter_controls, measurement as inverter_measurement};
pub use map::{Block, MapBuilder, RegisterMap};
pub use meter::int as meter_measurement;
