//! The configuration operations' plain data: what a `config.put` asks
//! ([`ConfigChange`]), what `config.get` shows ([`ConfigView`]) and one row
//! of the change history ([`ConfigRecord`]) with its [`ChangeResult`].
//!
//! Data only: it must not read, write or check a config.

use crate::config::patch::Patch;
use crate::config::Problem;

/// A new configuration: a whole TOML text, or a merge patch over the
/// running config's TOML structure (given as JSON or as TOML: the same
/// change either way).
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigChange {
    Whole(String),
    Patch(Vec<(String, Patch)>),
}

impl ConfigChange {
    /// `toml_sha256=...` or `patch_sha256=...`: names the change without
    /// holding it (a whole text holds token hashes).
    pub fn canonical(&self) -> String {
        match self {
            ConfigChange::Whole(text) => {
                format!("toml_sha256={}", crate::config::text_sha256(text))
            }
            ConfigChange::Patch(entries) => format!(
                "patch_sha256={}",
                crate::config::text_sha256(&Patch::Merge(entries.clone()).canonical())
            ),
        }
    }
}

/// The running configuration as it may be shown.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigView {
    /// The hex SHA-256 of the running config's text.
    pub sha256: String,
    /// How many changes were applied through the operations channel.
    pub version: i64,
    /// The config file, when the agent runs on one.
    pub file: Option<String>,
    /// The TOML text with every secret replaced (`config::redact`).
    pub toml: String,
    /// The paths whose values were replaced.
    pub redacted: Vec<String>,
}

/// How a configuration change ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeResult {
    /// Written; the agent restarts on it and watches its health.
    Pending,
    /// Healthy within the window: kept.
    Applied,
    /// Not healthy within the window (or not loadable): the last good
    /// config was restored.
    RolledBack,
    /// Not written: invalid, or less safe without the flag.
    Refused,
    /// Interrupted before the new file was in place, or the file was changed
    /// by other means meanwhile: nothing to watch.
    Abandoned,
}

impl ChangeResult {
    pub const ALL: [ChangeResult; 5] = [
        ChangeResult::Pending,
        ChangeResult::Applied,
        ChangeResult::RolledBack,
        ChangeResult::Refused,
        ChangeResult::Abandoned,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ChangeResult::Pending => "pending",
            ChangeResult::Applied => "applied",
            ChangeResult::RolledBack => "rolled_back",
            ChangeResult::Refused => "refused",
            ChangeResult::Abandoned => "abandoned",
        }
    }

    pub fn parse(s: &str) -> Option<ChangeResult> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// One configuration change in the history.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigRecord {
    pub op_id: String,
    pub at_ms: i64,
    pub transport: String,
    pub caller: String,
    pub old_sha256: String,
    /// Empty when the change was refused before a text was made.
    pub new_sha256: String,
    pub result: ChangeResult,
    pub reason: Option<String>,
    /// The version the change made, once applied.
    pub version: Option<i64>,
    /// Applied (or to be applied) live, without a restart.
    pub live: bool,
}

/// Why a `config.put` was refused, with what the checks found.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// The new config has problems (`check-config`'s), with their paths.
    Invalid(Vec<Problem>),
    /// The change lowers safety and the request has no `allowLessSafe`.
    LessSafe(Vec<String>),
}
