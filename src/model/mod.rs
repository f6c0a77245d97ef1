//! Plain data types shared by every layer: properties and units, device kinds and
//! references, power values, samples, time helpers.
//!
//! Nothing here does I/O or knows about Modbus, SQLite, HTTP or MQTT.

mod device;
pub mod operating_state;
mod power;
mod property;
mod sample;
pub mod time;

pub use device::{DeviceId, DeviceType};
pub use power::{PowerUnit, PowerValue, PowerValueError};
pub use property::{Kind, Property, Unit, UnknownProperty};
pub use sample::Sample;
