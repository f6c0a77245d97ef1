//! Log output: tracing with fields, as plain lines (no timestamps or colours under
//! journald, which adds its own; colours only on a terminal) or JSON; the level can be changed while running
//! (SIGHUP re-reads `logging.level`). Every line also goes into an in-memory
//! ring (`ring.rs`) that the operations channel reads.

mod ring;

pub use ring::{
    ring, ring_layer, LogLine, LogRing, LogTail, RingLayer, LINE_MAX, RING_BYTES, RING_LINES,
};

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Layer, Registry};

use crate::config::{LogFormat, LoggingConfig};

/// Changes the level of the installed subscriber.
pub struct LogHandle {
    filter: reload::Handle<EnvFilter, Registry>,
    /// `RUST_LOG` was set at start: it keeps winning over the config.
    from_env: bool,
}

impl LogHandle {
    /// Applies `logging.level` (unless `RUST_LOG` was set at start).
    pub fn set_level(&self, level: &str) -> Result<(), String> {
        if self.from_env {
            tracing::info!("RUST_LOG is set: logging.level from the config is not applied");
            return Ok(());
        }
        let filter = parse_level(level)?;
        self.filter
            .reload(filter)
            .map_err(|e| format!("cannot change the log level: {e}"))
    }
}

fn parse_level(level: &str) -> Result<EnvFilter, String> {
    let filter = EnvFilter::try_new(level)
        .map_err(|e| format!("logging.level {level:?} is not a valid filter: {e}"))?;
    // rumqttc warns once per refused PUBACK; the uplink logs refusals itself,
    // once per spell with the topic. A level naming rumqttc is taken as given.
    if level.contains("rumqttc") {
        return Ok(filter);
    }
    Ok(match "rumqttc::v5::state=error".parse() {
        Ok(quiet) => filter.add_directive(quiet),
        Err(_) => filter,
    })
}

/// Installs the global subscriber. `RUST_LOG`, when set, wins over the config.
/// Returns an error when a subscriber is already installed.
pub fn init(cfg: &LoggingConfig) -> Result<LogHandle, String> {
    let (filter, from_env) = match EnvFilter::try_from_default_env() {
        Ok(f) => (f, true),
        Err(_) => (parse_level(&cfg.level)?, false),
    };
    let (filter, handle) = reload::Layer::new(filter);
    let under_journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let base = fmt::layer().with_writer(std::io::stderr).with_target(false);
    let output = match (cfg.format, under_journald) {
        (LogFormat::Json, _) => base.json().with_current_span(false).boxed(),
        (LogFormat::Text, true) => base.without_time().with_ansi(false).boxed(),
        // Escape codes in a pipe or a file would break every reader of the log.
        (LogFormat::Text, false) => base.with_ansi(std::io::stderr().is_terminal()).boxed(),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .with(ring_layer())
        .try_init()
        .map_err(|e| e.to_string())?;
    Ok(LogHandle {
        filter: handle,
        from_env,
    })
}
