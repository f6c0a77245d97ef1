//! Why the agent could not start, and the exit code each failure gives the
//! process (what a restart cannot cure is the config's to fix).
//!
//! Errors only; it must not start or retry anything.

use std::net::SocketAddr;

use crate::http_server::ServeError;
use crate::store::StoreError;

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    ModbusSerial(crate::modbus_server::BindError),
    #[error("cannot open the measurement store {path}: {source}")]
    Store { path: String, source: StoreError },
    #[error("cannot restore the steering signals: {0}")]
    Steering(#[from] crate::steering::PersistError),
    #[error("cannot serve HTTPS: {0}")]
    Https(#[from] crate::https::HttpsError),
}

impl From<ServeError> for StartError {
    fn from(e: ServeError) -> StartError {
        match e {
            ServeError::Bind { addr, source } => StartError::Bind { addr, source },
            ServeError::Https(e) => StartError::Https(e),
        }
    }
}

/// EX_CONFIG from sysexits.h.
pub const EXIT_CONFIG: u8 = 78;

impl StartError {
    /// The process's exit code for this failure: [`EXIT_CONFIG`] for what a
    /// restart cannot cure (the unit does not restart after it:
    /// `RestartPreventExitStatus`), 1 for the rest, which a restart may cure
    /// (`start_failures.rs` spaces the attempts). A store that cannot be
    /// opened is not among them: the agent runs on a temporary one.
    pub fn exit_code(&self) -> u8 {
        match self {
            // A port below 1024 without the capability: the config's to fix.
            StartError::Bind { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                EXIT_CONFIG
            }
            // A certificate file that cannot be used: the config's to fix.
            StartError::Https(_) => EXIT_CONFIG,
            _ => 1,
        }
    }
}
