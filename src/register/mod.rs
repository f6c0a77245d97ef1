//! The pure language of Modbus registers: value types, word order and
//! "not implemented" sentinels (`codec`), tables, spans and the read planner
//! (`plan`), points that turn raw words into a property's value (`point`),
//! and where digital-input modules keep their inputs (`io`).
//!
//! A leaf below `profile`, `config` and `modbus`: it imports only `model`,
//! and it must do no I/O and know no device, bus, config or profile.

pub mod codec;
pub mod io;
pub mod plan;
pub mod point;
