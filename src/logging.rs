//! Log output: tracing with fields, as plain lines (no timestamps or colours under
//! journald, which adds its own; colours only on a terminal) or JSON.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LoggingConfig};

/// Installs the global subscriber. `RUST_LOG`, when set, wins over the config.
/// Returns an error when a subscriber is already installed.
pub fn init(cfg: &LoggingConfig) -> Result<(), String> {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .map_err(|e| format!("logging.level {:?} is not a valid filter: {e}", cfg.level))?;
    let under_journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let result = match (cfg.format, under_journald) {
        (LogFormat::Json, _) => builder.json().with_current_span(false).try_init(),
        (LogFormat::Text, true) => builder.without_time().with_ansi(false).try_init(),
        // Escape codes in a pipe or a file would break every reader of the log.
        (LogFormat::Text, false) => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
    result.map_err(|e| e.to_string())
}
