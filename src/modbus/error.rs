//! Errors of the Modbus layer, split the way they must be handled: the device
//! answered "no" (an exception: report it, the link is fine) versus the device
//! could not be reached or spoke garbage (drop the link, reconnect, back off).

use std::io;

use tokio_modbus::ExceptionCode;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ModbusError {
    /// The device answered with a Modbus exception.
    #[error("device answered exception {code} ({name})", code = exception_number(*.0), name = exception_name(*.0))]
    Exception(ExceptionCode),
    /// No answer within the bus timeout.
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// Connecting, reading or writing the transport failed; `kind` is the
    /// operating system's (refused, reset, not found, ...), `message` says
    /// what was being done.
    #[error("transport: {message}")]
    Io {
        kind: io::ErrorKind,
        message: String,
    },
    /// The bus task is gone (the agent is stopping): nothing reached the device.
    #[error("bus {0} is stopped")]
    Stopped(std::sync::Arc<str>),
    /// The answer did not fit the request (wrong length, wrong function).
    #[error("malformed answer: {0}")]
    Protocol(String),
}

impl ModbusError {
    /// A transport failure, keeping the operating system's error kind.
    pub fn io(e: &io::Error) -> Self {
        ModbusError::Io {
            kind: e.kind(),
            message: e.to_string(),
        }
    }

    /// A transport failure while doing `context` (`connect to host:502`).
    pub fn io_while(context: impl std::fmt::Display, e: &io::Error) -> Self {
        ModbusError::Io {
            kind: e.kind(),
            message: format!("{context}: {e}"),
        }
    }

    /// True when the link must be dropped and re-established: after a timeout a
    /// late answer could be taken for the next request's.
    pub fn breaks_link(&self) -> bool {
        !matches!(self, ModbusError::Exception(_))
    }

    pub fn is_illegal_address(&self) -> bool {
        matches!(
            self,
            ModbusError::Exception(ExceptionCode::IllegalDataAddress)
        )
    }
}

pub fn exception_number(code: ExceptionCode) -> u8 {
    code.into()
}

fn exception_name(code: ExceptionCode) -> &'static str {
    match code {
        ExceptionCode::IllegalFunction => "illegal function",
        ExceptionCode::IllegalDataAddress => "illegal data address",
        ExceptionCode::IllegalDataValue => "illegal data value",
        ExceptionCode::ServerDeviceFailure => "server device failure",
        ExceptionCode::Acknowledge => "acknowledge",
        ExceptionCode::ServerDeviceBusy => "server device busy",
        ExceptionCode::MemoryParityError => "memory parity error",
        ExceptionCode::GatewayPathUnavailable => "gateway path unavailable",
        ExceptionCode::GatewayTargetDevice => "gateway target device failed to respond",
        ExceptionCode::Custom(_) => "non-standard",
    }
}
