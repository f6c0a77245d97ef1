//! A growing delay between failed starts.
//!
//! A start that fails for a reason a restart may cure (a port still held by
//! the previous process, a listen address not there yet) exits 1 (a store
//! that cannot be opened is not among them: the agent runs on a temporary
//! one, `temporary_store.rs`), and systemd starts the agent again after `RestartSec=5s`.
//! systemd 252 (Debian 12) has no `RestartSteps=`, so the agent itself waits
//! before it exits after consecutive failures: nothing after the first, then
//! 2, 4, 8 ... up to [`MAX_WAIT`] (with `RestartSec`: 5, 7, 9, 13 ... 65 s
//! between attempts). The count lives in `$STATE_DIRECTORY/start-failures`;
//! a start that reaches READY removes it. Without `STATE_DIRECTORY` (not run
//! by systemd) nothing is counted and nothing waits.
//!
//! Failures a restart cannot cure exit with their own code and are not
//! restarted at all (`StartError::exit_code`). This file decides only how
//! long to wait; it never decides whether to start.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest wait before exiting after a failed start.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// The file holding the count, where systemd gives the service a state
/// directory.
pub fn count_file() -> Option<PathBuf> {
    crate::util::first_dir(std::env::var_os("STATE_DIRECTORY").as_deref())
        .map(|dir| dir.join("start-failures"))
}

/// The wait after the `n`th failure in a row (from 1).
pub fn wait_after(n: u32) -> Duration {
    if n <= 1 {
        return Duration::ZERO;
    }
    let secs = 1u64 << (n - 1).min(16);
    Duration::from_secs(secs).min(MAX_WAIT)
}

/// Counts one more failure in `file`; returns the count with it.
pub fn record(file: &Path) -> u32 {
    let before = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let n = before.saturating_add(1);
    if let Err(e) = std::fs::write(file, format!("{n}\n")) {
        tracing::warn!(path = %file.display(), error = %e, "cannot count the failed start: the next one does not wait longer");
    }
    n
}

/// A start reached READY: the next failure is the first again.
pub fn clear(file: &Path) {
    match std::fs::remove_file(file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(path = %file.display(), error = %e, "cannot clear the count of failed starts")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_the_second_failure_up_to_a_minute() {
        let waits: Vec<u64> = (1..=9).map(|n| wait_after(n).as_secs()).collect();
        assert_eq!(waits, vec![0, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(wait_after(u32::MAX), MAX_WAIT);
    }

    #[test]
    fn failures_count_until_cleared() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("start-failures");
        assert_eq!(record(&file), 1);
        assert_eq!(record(&file), 2);
        clear(&file);
        assert!(!file.exists());
        assert_eq!(record(&file), 1);
        clear(&file);
        clear(&file);
    }
}
