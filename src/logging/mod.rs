//! Log output: tracing with fields, as plain lines (no timestamps or colours under
//! journald, which adds its own; colours only on a terminal) or JSON; the level can be changed while running
//! (SIGHUP re-reads `logging.level`). Every line also goes into an in-memory
//! ring (`ring.rs`) that the operations channel reads.

mod ring;

pub use ring::{
    ring, ring_layer, LogLine, LogRing, LogTail, RingLayer, LINE_MAX, RING_BYTES, RING_LINES,
};

use std::io::IsTerminal;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, Layer, Registry};

use crate::config::{LogFormat, LoggingConfig};

/// Changes the level of the installed subscriber.
pub struct LogHandle {
    filter: reload::Handle<Targets, Registry>,
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

/// A filter of levels by target (`logging.level`, `RUST_LOG`): a level,
/// or comma-separated `target=level` directives (`config/log_level.rs` says
/// which targets the config may name). No span or field filters: they would
/// bring a regex engine into the binary for nothing the agent logs by.
fn parse_level(level: &str) -> Result<Targets, String> {
    let filter: Targets = level
        .parse()
        .map_err(|e| format!("logging.level {level:?} is not a valid filter: {e}"))?;
    // rumqttc warns once per refused PUBACK; the uplink logs refusals itself,
    // once per spell with the topic. A level naming rumqttc is taken as given.
    if level.contains("rumqttc") {
        return Ok(filter);
    }
    Ok(filter.with_target("rumqttc::v5::state", tracing::Level::ERROR))
}

/// Installs the global subscriber. `RUST_LOG`, when set, wins over the config
/// (with the same syntax: levels by target).
/// Returns an error when a subscriber is already installed.
pub fn init(cfg: &LoggingConfig) -> Result<LogHandle, String> {
    // A RUST_LOG that is not a filter is passed over, as if unset.
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|env| !env.trim().is_empty())
        .and_then(|env| parse_level(&env).ok());
    let (filter, from_env) = match from_env {
        Some(f) => (f, true),
        None => (parse_level(&cfg.level)?, false),
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

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;
    use tracing_subscriber::filter::LevelFilter;

    #[test]
    fn levels_by_target_and_rumqttc_kept_quiet() {
        let f = parse_level("info").expect("a level");
        assert!(f.would_enable("sitegate::modbus", &Level::INFO));
        assert!(!f.would_enable("sitegate::modbus", &Level::DEBUG));
        assert!(!f.would_enable("rumqttc::v5::state", &Level::WARN));
        let f = parse_level("warn,sitegate::steering=debug").expect("directives");
        assert!(f.would_enable("sitegate::steering::hold", &Level::DEBUG));
        assert!(!f.would_enable("sitegate::store", &Level::INFO));
        // A level naming rumqttc is taken as given.
        let f = parse_level("info,rumqttc=warn").expect("directives");
        assert!(f.would_enable("rumqttc::v5::state", &Level::WARN));
        assert_eq!(
            parse_level("off").expect("off").default_level(),
            Some(LevelFilter::OFF)
        );
        let e = parse_level("sitegate=loud").expect_err("not a level");
        assert!(e.starts_with("logging.level \"sitegate=loud\""), "{e}");
    }
}
