//! Modbus: SunSpec discovery and model maps, the control recipes (a command as
//! register writes), the link that owns a connection, the poll of one device,
//! its static points, and the bus task that serialises everything on one bus.
//!
//! The pure register vocabulary (codec, read planner, points, input modules)
//! is `crate::register`'s and the register-map profile model is
//! `crate::profile`'s; both sit below this module and below `config`.

pub mod bus;
pub mod commands;
pub mod control;
pub mod device;
pub mod error;
pub mod image;
mod kept;
pub mod link;
pub mod maps;
pub mod poll;
pub mod reader;
pub mod rtu;
pub mod scan;
pub mod statics;
pub mod stats;
pub mod sunspec;

pub use bus::{BusHandle, BusTask, Op, OpOutput, Transacted};
pub use device::{Controls, DeviceMap};
pub use error::ModbusError;
pub use image::PollImage;
pub use maps::DeviceMaps;
