//! Whether the wall clock is synchronised, from the kernel's NTP state
//! (`adjtimex`: chrony, ntpd and systemd-timesyncd all clear `STA_UNSYNC`
//! once they discipline the clock) or from the file systemd-timesyncd
//! creates once it has synchronised.
//!
//! Reads only: `adjtimex` with no mode bits set changes nothing (and needs no
//! capability). One of the three `unsafe` places of the crate is here, for
//! that call (the others are `memory.rs`, the allocator settings, and
//! `store/sqlite_memory.rs`, SQLite's memory counter).

use std::path::Path;

use crate::config::SyncSource;

/// What the agent knows of the clock's synchronisation.
#[derive(Clone, Debug, PartialEq)]
pub enum SyncState {
    /// Synchronised; the kernel's estimate of its largest error, when known.
    Synchronised { max_error_ms: Option<u64> },
    /// Not synchronised, and where that was read.
    Unsynchronised { from: String },
    /// Not watched (`sync_source = "none"`), or nothing could be read.
    Unknown { why: String },
}

impl SyncState {
    pub fn is_unsynchronised(&self) -> bool {
        matches!(self, SyncState::Unsynchronised { .. })
    }
}

/// Reads the state from `source`.
pub fn read(source: SyncSource, timesync_file: &Path) -> SyncState {
    match source {
        SyncSource::None => SyncState::Unknown {
            why: "not watched (clock.sync_source = \"none\")".into(),
        },
        SyncSource::Timesyncd => timesyncd(timesync_file),
        SyncSource::Kernel => kernel().unwrap_or_else(|e| SyncState::Unknown {
            why: format!("the kernel's NTP state cannot be read: {e}"),
        }),
        SyncSource::Auto => kernel().unwrap_or_else(|_| timesyncd(timesync_file)),
    }
}

/// systemd-timesyncd: the file exists once it synchronised the clock in this
/// boot; its folder exists while timesyncd runs at all.
fn timesyncd(file: &Path) -> SyncState {
    if file.exists() {
        return SyncState::Synchronised { max_error_ms: None };
    }
    match file.parent() {
        Some(dir) if dir.is_dir() => SyncState::Unsynchronised {
            from: format!(
                "systemd-timesyncd has not synchronised it ({} is missing)",
                file.display()
            ),
        },
        _ => SyncState::Unknown {
            why: format!(
                "neither the kernel's NTP state nor systemd-timesyncd's {} can be read",
                file.display()
            ),
        },
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn kernel() -> Result<SyncState, std::io::Error> {
    // SAFETY: `timex` is plain data, zeroed is a valid value; with `modes`
    // 0 the call only fills it in and keeps no pointer to it.
    let mut t: libc::timex = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::adjtimex(&mut t) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if r == libc::TIME_ERROR || t.status & libc::STA_UNSYNC != 0 {
        return Ok(SyncState::Unsynchronised {
            from:
                "the kernel says so (adjtimex: STA_UNSYNC; no NTP client disciplines the clock yet)"
                    .into(),
        });
    }
    let max_error_ms = u64::try_from(t.maxerror).ok().map(|us| us / 1000);
    Ok(SyncState::Synchronised { max_error_ms })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn kernel() -> Result<SyncState, std::io::Error> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "adjtimex is read on Linux with glibc only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timesyncd_file_says_synchronised_and_its_folder_says_not_yet() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("synchronized");
        assert!(read(SyncSource::Timesyncd, &file).is_unsynchronised());
        std::fs::write(&file, b"").unwrap();
        assert_eq!(
            read(SyncSource::Timesyncd, &file),
            SyncState::Synchronised { max_error_ms: None }
        );
        let nowhere = dir.path().join("no").join("synchronized");
        assert!(matches!(
            read(SyncSource::Timesyncd, &nowhere),
            SyncState::Unknown { .. }
        ));
        assert!(matches!(
            read(SyncSource::None, &file),
            SyncState::Unknown { .. }
        ));
    }

    #[test]
    fn the_kernel_state_reads_on_linux() {
        // Whatever this machine's clock is, the call answers.
        assert!(!matches!(
            read(SyncSource::Kernel, Path::new("/nowhere")),
            SyncState::Unknown { .. }
        ));
    }
}
