//! What an operation is: its id, what was asked ([`OpRequest`]), who asked
//! ([`Source`]), its [`OpState`] and its [`Outcome`]. Plain data and the pure
//! checks of an id and of a request's arguments.
//!
//! It must not run anything, nor know JSON (the API renders these types).

use std::fmt;

use tracing::Level;

use super::change::{ConfigChange, ConfigRecord, ConfigView, Refusal};
use crate::logging::LogTail;

/// The longest operation id.
pub const ID_MAX: usize = 128;

/// An operation id: 1 to [`ID_MAX`] characters of `A-Z a-z 0-9 . _ - : ~`, so
/// it is a topic level and a path segment as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpId(String);

impl OpId {
    pub fn parse(id: &str) -> Result<OpId, String> {
        let ok = !id.is_empty()
            && id.len() <= ID_MAX
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-_:~".contains(&b));
        if ok {
            Ok(OpId(id.to_string()))
        } else {
            Err(format!(
                "{id:?} is not an operation id: 1 to {ID_MAX} characters of A-Z, a-z, 0-9, '.', '_', '-', ':', '~'"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The kinds of operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Logs,
    Bundle,
    Restart,
    Scan,
    ConfigGet,
    ConfigHistory,
    ConfigPut,
    GridEvents,
}

impl OpKind {
    pub const ALL: [OpKind; 8] = [
        OpKind::Logs,
        OpKind::Bundle,
        OpKind::Restart,
        OpKind::Scan,
        OpKind::ConfigGet,
        OpKind::ConfigHistory,
        OpKind::ConfigPut,
        OpKind::GridEvents,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            OpKind::Logs => "logs",
            OpKind::Bundle => "bundle",
            OpKind::Restart => "restart",
            OpKind::Scan => "scan",
            OpKind::ConfigGet => "config.get",
            OpKind::ConfigHistory => "config.history",
            OpKind::ConfigPut => "config.put",
            OpKind::GridEvents => "gridEvents.export",
        }
    }

    pub fn parse(s: &str) -> Option<OpKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Bounds of the `logs` operation.
pub const LOG_LINES_DEFAULT: usize = 100;
pub const LOG_LINES_MAX: usize = 1_000;
pub const LOG_BYTES_DEFAULT: usize = 64 * 1024;
pub const LOG_BYTES_MAX: usize = 256 * 1024;
/// Unit ids a scan asks by default, and its answer timeout per unit.
pub const SCAN_UNITS_DEFAULT: &str = "1-16";
pub const SCAN_TIMEOUT_MS_DEFAULT: u64 = 300;
/// The most unit ids one scan may ask (at its longest timeout, a few minutes).
pub const SCAN_UNITS_MAX: usize = 247;
/// Rows `config.history` returns by default and at most.
pub const CONFIG_HISTORY_DEFAULT: usize = 20;
pub const CONFIG_HISTORY_MAX: usize = 200;
/// How far back `gridEvents.export` reaches by default, ms (30 days), and
/// the most events it returns.
pub const GRID_EVENTS_BACK_MS: i64 = 30 * 86_400_000;
pub const GRID_EVENTS_MAX: usize = 10_000;

/// What was asked, with every argument resolved to its value.
#[derive(Clone, Debug, PartialEq)]
pub enum OpRequest {
    Logs {
        lines: usize,
        /// The least severe level returned.
        level: Level,
        max_bytes: usize,
    },
    Bundle,
    Restart,
    Scan {
        bus: String,
        /// As given (`1-10`, `3`, `1,2,5-7`); checked when the request is built.
        units: String,
        timeout_ms: u64,
        /// The site the proposed devices are given.
        site: Option<String>,
    },
    ConfigGet,
    ConfigHistory {
        limit: usize,
    },
    ConfigPut {
        change: ConfigChange,
        /// The request allows a change that lowers safety.
        allow_less_safe: bool,
    },
    /// The evidence log between two times (epoch ms; `None`: 30 days back,
    /// now).
    GridEvents {
        since_ms: Option<i64>,
        until_ms: Option<i64>,
    },
}

impl OpRequest {
    pub fn kind(&self) -> OpKind {
        match self {
            OpRequest::Logs { .. } => OpKind::Logs,
            OpRequest::Bundle => OpKind::Bundle,
            OpRequest::Restart => OpKind::Restart,
            OpRequest::Scan { .. } => OpKind::Scan,
            OpRequest::ConfigGet => OpKind::ConfigGet,
            OpRequest::ConfigHistory { .. } => OpKind::ConfigHistory,
            OpRequest::ConfigPut { .. } => OpKind::ConfigPut,
            OpRequest::GridEvents { .. } => OpKind::GridEvents,
        }
    }

    /// The arguments as `key=value` text, what the audit history keeps and
    /// a repeated id is compared by.
    pub fn canonical(&self) -> String {
        match self {
            OpRequest::Logs {
                lines,
                level,
                max_bytes,
            } => format!(
                "lines={lines} level={} max_bytes={max_bytes}",
                level_name(*level)
            ),
            OpRequest::Bundle | OpRequest::Restart | OpRequest::ConfigGet => String::new(),
            OpRequest::ConfigHistory { limit } => format!("limit={limit}"),
            OpRequest::GridEvents { since_ms, until_ms } => format!(
                "since={} until={}",
                since_ms.map_or("-".into(), |t| t.to_string()),
                until_ms.map_or("-".into(), |t| t.to_string())
            ),
            OpRequest::ConfigPut {
                change,
                allow_less_safe,
            } => format!("{} allow_less_safe={allow_less_safe}", change.canonical()),
            OpRequest::Scan {
                bus,
                units,
                timeout_ms,
                site,
            } => format!(
                "bus={bus} units={units} timeout_ms={timeout_ms}{}",
                site.as_ref()
                    .map_or(String::new(), |s| format!(" site={s}"))
            ),
        }
    }
}

/// `trace`, `debug`, `info`, `warn`, `error`.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        _ => "error",
    }
}

pub fn parse_level(s: &str) -> Option<Level> {
    match s {
        "trace" => Some(Level::TRACE),
        "debug" => Some(Level::DEBUG),
        "info" => Some(Level::INFO),
        "warn" => Some(Level::WARN),
        "error" => Some(Level::ERROR),
        _ => None,
    }
}

/// Who asked: the transport (`http`, `mqtt`) and the caller (a token's name,
/// `mqtt` for the ops channel without a token, `anonymous` without auth).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub transport: String,
    pub caller: String,
}

/// Where an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpState {
    Accepted,
    Running,
    Succeeded,
    Failed,
}

impl OpState {
    pub const fn as_str(self) -> &'static str {
        match self {
            OpState::Accepted => "accepted",
            OpState::Running => "running",
            OpState::Succeeded => "succeeded",
            OpState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<OpState> {
        [
            OpState::Accepted,
            OpState::Running,
            OpState::Succeeded,
            OpState::Failed,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        matches!(self, OpState::Succeeded | OpState::Failed)
    }
}

/// What a finished operation produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Logs(LogTail),
    /// The bundle itself is fetched in chunks (`Ops::bundle_chunk`).
    Bundle {
        bytes: usize,
        sha256: String,
        chunks: usize,
    },
    Restart {
        /// When the agent exits (systemd starts it again).
        exit_at_ms: i64,
    },
    Scan {
        bus: String,
        /// Devices found (SunSpec and recognised by a profile).
        found: usize,
        /// Ready `[[buses]]`/`[[devices]]` blocks; not applied.
        config: String,
        /// What each unit that answered without being recognised said.
        notes: Vec<String>,
    },
    Config(ConfigView),
    ConfigHistory(Vec<ConfigRecord>),
    /// The evidence log as CSV, `events` lines under its header.
    GridEvents {
        csv: String,
        events: usize,
        /// More events than [`GRID_EVENTS_MAX`]: the oldest are given.
        truncated: bool,
    },
    /// A new config was written; the agent restarts on it and watches its
    /// health for `within_s` (the operation stays `running` meanwhile).
    ConfigWritten {
        old_sha256: String,
        new_sha256: String,
        within_s: u64,
        /// Devices online before the change, which must be online again.
        watch: Vec<String>,
        /// Less-safe changes the request allowed.
        allowed: Vec<String>,
        /// Applied without a restart (`config::live_change`).
        live: bool,
    },
    /// The new config is the running one already.
    ConfigUnchanged {
        sha256: String,
    },
    /// Healthy on the new config: kept.
    ConfigApplied {
        sha256: String,
        version: i64,
    },
    /// What a refused or rolled-back change found (on a failed operation).
    ConfigRefused(Refusal),
    ConfigRolledBack {
        old_sha256: String,
        new_sha256: String,
        reason: String,
    },
}

impl Outcome {
    /// One line for the audit history.
    pub fn summary(&self) -> String {
        match self {
            Outcome::Logs(t) => format!(
                "{} lines{}",
                t.lines.len(),
                if t.truncated { " (truncated)" } else { "" }
            ),
            Outcome::Bundle {
                bytes,
                sha256,
                chunks,
            } => format!("{bytes} bytes in {chunks} chunks, sha256 {sha256}"),
            Outcome::Restart { exit_at_ms } => format!("exit for a restart at {exit_at_ms}"),
            Outcome::Scan { bus, found, .. } => format!("{found} devices found on bus {bus}"),
            Outcome::Config(v) => format!("config sha256 {} version {}", v.sha256, v.version),
            Outcome::ConfigHistory(rows) => format!("{} changes", rows.len()),
            Outcome::GridEvents {
                events, truncated, ..
            } => format!(
                "{events} grid events{}",
                if *truncated { " (truncated)" } else { "" }
            ),
            Outcome::ConfigWritten {
                new_sha256,
                within_s,
                live: false,
                ..
            } => format!(
                "config sha256 {new_sha256} written; restarting on it, healthy within {within_s} s or rolled back"
            ),
            Outcome::ConfigWritten {
                new_sha256,
                within_s,
                live: true,
                ..
            } => format!(
                "config sha256 {new_sha256} written and applied live, without a restart; healthy within {within_s} s or rolled back"
            ),
            Outcome::ConfigUnchanged { sha256 } => {
                format!("config sha256 {sha256} runs already: nothing changed")
            }
            Outcome::ConfigApplied { sha256, version } => {
                format!("config sha256 {sha256} applied as version {version}")
            }
            Outcome::ConfigRefused(Refusal::Invalid(p)) => {
                format!("refused: {} problems in the new config", p.len())
            }
            Outcome::ConfigRefused(Refusal::LessSafe(c)) => {
                format!("refused: {} changes lower safety", c.len())
            }
            Outcome::ConfigRolledBack { old_sha256, .. } => {
                format!("rolled back to config sha256 {old_sha256}")
            }
        }
    }
}

/// One operation as it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    pub id: OpId,
    pub kind: OpKind,
    /// The arguments ([`OpRequest::canonical`]).
    pub args: String,
    pub source: Source,
    pub state: OpState,
    pub accepted_ms: i64,
    pub finished_ms: Option<i64>,
    /// While this process holds it; an operation read back from the audit
    /// history after a restart has its [`Operation::summary`] only.
    pub outcome: Option<Outcome>,
    pub summary: Option<String>,
    pub error: Option<String>,
}

impl Operation {
    /// Ended, or a config change written and waiting for its trial: what
    /// an answer waits for.
    pub fn is_settled(&self) -> bool {
        self.state.is_final() || matches!(self.outcome, Some(Outcome::ConfigWritten { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_topic_levels_and_path_segments() {
        for ok in ["op-1", "a.b_c:d~e", "sha256:00ff", &"x".repeat(ID_MAX)] {
            assert!(OpId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a/b",
            "a+b",
            "#",
            "a b",
            "é",
            "a?b",
            &"x".repeat(ID_MAX + 1),
        ] {
            let e = OpId::parse(bad).expect_err(bad);
            assert!(e.contains("not an operation id"), "{e}");
        }
    }

    #[test]
    fn canonical_arguments_tell_requests_apart() {
        let logs = |lines| OpRequest::Logs {
            lines,
            level: Level::WARN,
            max_bytes: 1000,
        };
        assert_eq!(logs(5).canonical(), "lines=5 level=warn max_bytes=1000");
        assert_ne!(logs(5).canonical(), logs(6).canonical());
        assert_eq!(OpRequest::Restart.canonical(), "");
        for k in OpKind::ALL {
            assert_eq!(OpKind::parse(k.as_str()), Some(k));
        }
        for l in ["trace", "debug", "info", "warn", "error"] {
            assert_eq!(parse_level(l).map(level_name), Some(l));
        }
    }
}
