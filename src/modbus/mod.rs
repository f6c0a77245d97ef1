//! Modbus: the register codec, the read planner, SunSpec discovery and model maps,
//! transports and the bus task that owns each connection.

pub mod codec;
pub mod plan;
