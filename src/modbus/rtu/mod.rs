//! Modbus RTU over a serial line: pure framing and timing (`frame`), and the
//! line that owns the serial port (`line`). Several devices share a line; the
//! bus task serialises them, so one request is on the wire at a time.

pub mod frame;
mod line;

pub use line::{open_port, LineError, RtuLine};
