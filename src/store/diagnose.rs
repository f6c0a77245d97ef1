//! Why the database cannot be opened or written, in the operating system's
//! terms: a full disk, a read-only file system, a folder or file the agent may
//! not write. SQLite's own messages ("disk I/O error", "unable to open
//! database file") do not say.
//!
//! Reads the file system only (statvfs, permissions); it changes nothing.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::sys::statvfs::{statvfs, FsFlags};
use nix::unistd::{access, geteuid, AccessFlags};

/// The cause found for the database at `path`, if one is: the first of a
/// missing or unwritable folder, a read-only file system, a full disk, an
/// unwritable file.
pub fn cause(path: &Path) -> Option<String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let shown = dir.display();
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("the folder {shown} cannot be read: {e}")),
    };
    if let Ok(fs) = statvfs(dir) {
        if fs.flags().contains(FsFlags::ST_RDONLY) {
            return Some(format!("{shown} is on a read-only file system"));
        }
        // u32 on 32-bit ARM, u64 here.
        #[allow(clippy::unnecessary_cast)]
        let free = fs.blocks_available() as u64 * fs.fragment_size() as u64;
        if free < 64 * 1024 {
            return Some(format!("the disk is full: {free} bytes free for {shown}"));
        }
    }
    if access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
        return Some(format!(
            "permission denied: the folder {shown} is owned by uid {} with mode {:o}, and the agent runs as uid {}",
            meta.uid(),
            meta.mode() & 0o7777,
            geteuid()
        ));
    }
    if path.exists() && access(path, AccessFlags::W_OK).is_err() {
        let m = std::fs::metadata(path).ok();
        return Some(format!(
            "permission denied: the database file {} is owned by uid {} with mode {:o}, and the agent runs as uid {}",
            path.display(),
            m.as_ref().map_or(0, MetadataExt::uid),
            m.as_ref().map_or(0, |m| m.mode() & 0o7777),
            geteuid()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_folder_with_room_has_no_cause_and_a_missing_one_has() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cause(&dir.path().join("x.db")), None);
        let gone = dir.path().join("nowhere").join("x.db");
        assert!(cause(&gone).is_some_and(|c| c.contains("cannot be read")));
    }
}
