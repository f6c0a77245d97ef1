//! The marker of a configuration change on trial, `<config>.pending`
//! (TOML, written atomically next to the config): the operation's id, the
//! old and the new config's hashes, the health window, the devices that
//! must be online again, how often the agent started on the new config,
//! and its phase. It is written before the new config goes in, so no state
//! of the files lacks it, and removed once the change is resolved.
//!
//! [`before_start`] runs in `sitegate run` before the config is loaded: a
//! new config that does not load, or that the agent keeps failing to start
//! on, is rolled back at once. The rest (the health watch) is
//! `config_ops.rs`'s once the agent runs. It must not load or judge a
//! config beyond whether it loads.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::config_file::{self, sibling, FileError};

/// Starts on a new config without becoming healthy after which it is
/// rolled back before the next start.
pub const MAX_STARTS: u32 = 3;

/// Where a change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The new config is (or is about to be) in place: watch its health.
    Pending,
    /// The last good config was restored; `reason` says why.
    RolledBack,
    /// Nothing to watch (`reason` says why): the old config runs.
    Abandoned,
}

/// The marker's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    pub op_id: String,
    pub transport: String,
    pub caller: String,
    pub accepted_ms: i64,
    pub old_sha256: String,
    pub new_sha256: String,
    /// The health window, from each start on the new config.
    pub within_s: u64,
    /// References of the devices online before the change that the new
    /// config still has.
    pub watch: Vec<String>,
    /// Starts on the new config so far.
    pub starts: u32,
    pub phase: Phase,
    pub reason: Option<String>,
    /// Applied live, without a restart; cleared at a start on the change.
    #[serde(default)]
    pub live: bool,
}

/// `<config>.pending`.
pub fn path(config: &Path) -> PathBuf {
    sibling(config, ".pending")
}

/// The marker next to `config`, if any.
pub fn read(config: &Path) -> Result<Option<Marker>, String> {
    let p = path(config);
    match std::fs::read_to_string(&p) {
        Ok(text) => toml::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{} is not a change marker: {e}", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", p.display())),
    }
}

pub fn write(config: &Path, marker: &Marker) -> Result<(), FileError> {
    // Plain data of strings and numbers: serializing cannot fail.
    let text = toml::to_string(marker).unwrap_or_default();
    config_file::write_atomic(&path(config), text.as_bytes())
}

pub fn remove(config: &Path) -> Result<(), FileError> {
    let p = path(config);
    match std::fs::remove_file(&p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(FileError {
            action: "cannot remove",
            path: p,
            source: e,
        }),
        _ => Ok(()),
    }
}

/// What to do with a pending change at start, from the marker and the
/// hash of the file at the config path: a pure decision.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// Nothing to do now (no change on trial, or one resolved already and
    /// waiting to be recorded).
    Keep,
    /// Start on the new config and watch it (count this start).
    Watch,
    /// Restore the last good config now, for `reason`.
    RollBack(String),
    /// The change is not in place (`reason`): record it, start as is.
    Abandon(String),
}

pub fn decide(
    marker: &Marker,
    file_sha256: &str,
    loads: impl FnOnce() -> Result<(), String>,
) -> Decision {
    if marker.phase != Phase::Pending {
        return Decision::Keep;
    }
    if file_sha256 == marker.new_sha256 {
        if marker.starts >= MAX_STARTS {
            return Decision::RollBack(format!(
                "the agent started {} times on the new config without becoming healthy",
                marker.starts
            ));
        }
        return match loads() {
            Ok(()) => Decision::Watch,
            Err(e) => Decision::RollBack(format!("the new config does not load: {e}")),
        };
    }
    if file_sha256 == marker.old_sha256 {
        return Decision::Abandon(
            "interrupted before the new config was in place: the old config runs".into(),
        );
    }
    Decision::Abandon(format!(
        "the config file was changed by other means (sha256 {file_sha256}): the change is abandoned"
    ))
}

/// Before `sitegate run` loads `config`: counts a start on a new config on
/// trial, and restores the last good config when the new one does not load
/// or the agent keeps failing on it. Returns what it did, for the log
/// (which is not set up yet).
pub fn before_start(config: &Path) -> Vec<String> {
    let mut said = Vec::new();
    let mut marker = match read(config) {
        Ok(Some(m)) => m,
        Ok(None) => return said,
        Err(e) => {
            said.push(format!("{e}; left in place"));
            return said;
        }
    };
    let text = match std::fs::read(config) {
        Ok(t) => t,
        Err(e) => {
            said.push(format!("cannot read {}: {e}", config.display()));
            Vec::new()
        }
    };
    let sha = crate::config::text_sha256(&String::from_utf8_lossy(&text));
    let loads = || match crate::config::Config::load(config) {
        Ok(c) if c.file_problems.is_empty() => Ok(()),
        Ok(c) => Err(crate::config::ConfigError {
            problems: c.file_problems,
        }
        .to_string()),
        Err(e) => Err(e.to_string()),
    };
    match decide(&marker, &sha, loads) {
        Decision::Keep => {}
        Decision::Watch => {
            marker.starts += 1;
            marker.live = false;
            said.push(format!(
                "config change {} on trial: start {} of at most {MAX_STARTS} on config sha256 {}",
                marker.op_id, marker.starts, marker.new_sha256
            ));
        }
        Decision::RollBack(reason) => {
            match config_file::restore_last_good(config) {
                Ok(()) => said.push(format!(
                    "config change {}: {reason}; the last good config (sha256 {}) was restored",
                    marker.op_id, marker.old_sha256
                )),
                Err(e) => said.push(format!(
                    "config change {}: {reason}; restoring the last good config failed: {e}",
                    marker.op_id
                )),
            }
            marker.phase = Phase::RolledBack;
            marker.reason = Some(reason);
        }
        Decision::Abandon(reason) => {
            said.push(format!("config change {}: {reason}", marker.op_id));
            marker.phase = Phase::Abandoned;
            marker.reason = Some(reason);
        }
    }
    if let Err(e) = write(config, &marker) {
        said.push(format!(
            "config change {}: the marker not updated: {e}",
            marker.op_id
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker() -> Marker {
        Marker {
            op_id: "op".into(),
            transport: "mqtt".into(),
            caller: "mqtt".into(),
            accepted_ms: 1,
            old_sha256: "old".into(),
            new_sha256: "new".into(),
            within_s: 60,
            watch: vec!["dvc_a".into()],
            starts: 0,
            phase: Phase::Pending,
            reason: None,
            live: false,
        }
    }

    #[test]
    fn decisions_follow_the_file_and_the_count() {
        let ok = || Ok(());
        assert_eq!(decide(&marker(), "new", ok), Decision::Watch);
        let bad = || Err("devices[0].bus: unknown".to_string());
        assert!(
            matches!(decide(&marker(), "new", bad), Decision::RollBack(r) if r.contains("does not load: devices[0].bus"))
        );
        let tired = Marker {
            starts: MAX_STARTS,
            ..marker()
        };
        assert!(
            matches!(decide(&tired, "new", ok), Decision::RollBack(r) if r.contains("started 3 times"))
        );
        assert!(
            matches!(decide(&marker(), "old", ok), Decision::Abandon(r) if r.contains("interrupted"))
        );
        assert!(
            matches!(decide(&marker(), "other", ok), Decision::Abandon(r) if r.contains("other means"))
        );
        let done = Marker {
            phase: Phase::RolledBack,
            ..marker()
        };
        assert_eq!(decide(&done, "old", ok), Decision::Keep);
    }

    #[test]
    fn a_new_config_that_does_not_load_is_rolled_back_before_start() {
        let dir = tempfile::tempdir().expect("dir");
        let config = dir.path().join("sitegate.toml");
        let old = "gateway_id = \"old\"\n";
        let new = "gateway_id = \"new\"\nprofiles_dir = 3\n";
        config_file::replace_keeping_last_good(&config, old.as_bytes(), new.as_bytes())
            .expect("replace");
        let m = Marker {
            old_sha256: crate::config::text_sha256(old),
            new_sha256: crate::config::text_sha256(new),
            ..marker()
        };
        write(&config, &m).expect("marker");
        let said = before_start(&config);
        assert!(said[0].contains("does not load"), "{said:?}");
        assert_eq!(std::fs::read_to_string(&config).expect("config"), old);
        let after = read(&config).expect("read").expect("marker kept");
        assert_eq!(after.phase, Phase::RolledBack);
        assert!(
            after
                .reason
                .as_deref()
                .unwrap_or("")
                .contains("profiles_dir"),
            "{after:?}"
        );
        // Resolved already: a second start changes nothing.
        assert!(before_start(&config).is_empty());
        remove(&config).expect("remove");
        assert_eq!(read(&config), Ok(None));
    }
}
