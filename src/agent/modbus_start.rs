//! How the Modbus server's start failures become the agent's: a listen
//! address that cannot be bound is a `Bind` failure like HTTP's (with its
//! exit code), a serial line that cannot be opened names its path.

use super::StartError;
use crate::modbus_server::BindError;

impl From<BindError> for StartError {
    fn from(e: BindError) -> StartError {
        match e {
            BindError::Listen { addr, source } => StartError::Bind { addr, source },
            serial @ BindError::Serial { .. } => StartError::ModbusSerial(serial),
        }
    }
}
