//! Modbus: the register codec, the read planner, SunSpec discovery and model maps,
//! the control recipes (a command as register writes), the link that owns a
//! connection, and the bus task that serialises everything on one bus.

pub mod bus;
pub mod codec;
pub mod control;
pub mod device;
pub mod error;
pub mod io;
pub mod link;
pub mod maps;
pub mod plan;
pub mod point;
pub mod poll;
pub mod profile;
pub mod reader;
pub mod rtu;
pub mod scan;
pub mod stats;
pub mod sunspec;

pub use bus::{BusHandle, BusTask, Op, OpOutput};
pub use device::{Controls, DeviceMap};
pub use error::ModbusError;
pub use maps::DeviceMaps;
