//! A damaged database is found at start and set aside, never deleted: a quick
//! integrity check (`PRAGMA quick_check`) before the writer opens it; a file
//! that SQLite cannot read as a database, or whose check finds damage, is
//! renamed aside with a timestamp (its WAL and shared-memory files with it),
//! and the store starts on a new one. Steering then starts at its fallback,
//! and the grid limits are held as always.
//!
//! The files set aside stay until an operator removes them; while one is
//! there (and younger than `storage.damaged_notice_h`), `/readyz` says so
//! (`aside_notice`). This file only checks and renames; it writes no data.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// The suffix of a database set aside: `<db>.damaged-<UTC time>`.
pub const ASIDE: &str = ".damaged-";

/// What was set aside and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    pub to: PathBuf,
    pub reason: String,
}

/// Whether the check at start reads every page of the file at `path`: files
/// up to `full_max_bytes` (`storage.full_check_max_mb`), and any file the
/// last run saw damage in (the flag `<db>.check`). A larger file gets a read
/// of its header and schema at start (a check reads every page: on slow
/// flash it would hold the start up) and the full check in the background
/// right after ([`background`]).
pub fn full_at_start(path: &Path, full_max_bytes: u64) -> bool {
    flag_path(path).exists() || std::fs::metadata(path).is_ok_and(|m| m.len() <= full_max_bytes)
}

/// The flag a run leaves when SQLite reported damage, so that the next start
/// checks the whole file whatever its size.
pub fn flag_path(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.check", path.display()))
}

/// Checks the database at `path` (if there is one); sets it aside when it is
/// damaged. Renaming errors are returned as the reason the store cannot open.
pub fn check(path: &Path, full_max_bytes: u64) -> Result<Option<SetAside>, std::io::Error> {
    if !path.exists() {
        return Ok(None);
    }
    let flag = flag_path(path);
    let found = damage(path, full_at_start(path, full_max_bytes));
    if flag.exists() {
        let _ = std::fs::remove_file(&flag);
    }
    let Some(reason) = found else {
        return Ok(None);
    };
    let stamp = crate::model::time::format_utc(crate::model::time::now_ms())
        .replace([':', '-'], "")
        .replace('.', "");
    let to = PathBuf::from(format!("{}{ASIDE}{stamp}", path.display()));
    // The WAL and shared memory first: the database without them reads as it
    // was at its last checkpoint, not as a mix.
    for suffix in ["-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", path.display()));
        if from.exists() {
            std::fs::rename(&from, format!("{}{suffix}", to.display()))?;
        }
    }
    std::fs::rename(path, &to)?;
    Ok(Some(SetAside { to, reason }))
}

/// Why the database at `path` is damaged; `None` when it reads as sound.
/// `full`: check every page, else only the header and the schema.
fn damage(path: &Path, full: bool) -> Option<String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = match Connection::open_with_flags(path, flags) {
        Ok(c) => c,
        Err(e) => return is_damage(&e).then(|| e.to_string()),
    };
    // quick_check reads every page's structure, without the slow index
    // checks; counting the schema reads the header and the schema's pages.
    let sql = if full {
        "PRAGMA quick_check(5)"
    } else {
        "SELECT CASE WHEN count(*) >= 0 THEN 'ok' END FROM sqlite_schema"
    };
    let found: Result<Vec<String>, rusqlite::Error> = conn
        .prepare(sql)
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect());
    match found {
        Ok(lines) if lines.len() == 1 && lines[0] == "ok" => None,
        Ok(lines) => Some(format!("quick_check: {}", lines.join("; "))),
        Err(e) => is_damage(&e).then(|| e.to_string()),
    }
}

/// The full check of a database in use (the writer runs meanwhile: the
/// check reads one snapshot). On damage it leaves the flag, so that the next
/// start checks the file and sets it aside, and returns why.
pub fn background(path: &Path) -> Option<String> {
    let found = damage(path, true)?;
    if let Err(e) = std::fs::write(flag_path(path), b"") {
        tracing::warn!(path = %path.display(), error = %e, "cannot leave the flag for a full check at the next start");
    }
    Some(found)
}

/// Errors that say the file is damaged (not that it is busy or unreadable
/// for a reason a restart or an operator fixes: those fail the open).
pub fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// What `/readyz` says while a database set aside is in the folder of
/// `path` and younger than `notice`: its name and age; `None` otherwise.
pub fn aside_notice(path: &Path, notice: Duration) -> Option<String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name()?.to_string_lossy().into_owned();
    let prefix = format!("{name}{ASIDE}");
    let now_ms = crate::model::time::now_ms();
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix) && !n.ends_with("-wal") && !n.ends_with("-shm")
        })
        .find_map(|e| {
            let modified_ms = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(now_ms, |d| d.as_millis() as i64);
            let age = Duration::from_millis(now_ms.saturating_sub(modified_ms).max(0) as u64);
            (age < notice).then(|| {
                format!(
                    "the database was damaged and set aside as {} ({} h ago); remove that file once it is dealt with",
                    e.path().display(),
                    age.as_secs() / 3600
                )
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Garbage over one page of a table: the full check finds it.
    #[test]
    fn a_damaged_page_is_found_by_the_full_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA page_size = 4096; CREATE TABLE t(a); \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) \
             INSERT INTO t SELECT hex(randomblob(100)) FROM n;",
        )
        .unwrap();
        drop(conn);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[3 * 4096..4 * 4096].fill(0xA5);
        std::fs::write(&path, &bytes).unwrap();
        assert!(damage(&path, false).is_none(), "the header reads");
        // Larger than the bound for a full check at start: the start reads
        // only the header and keeps it; the background check finds the damage
        // and flags the file, and the next start sets it aside.
        assert_eq!(check(&path, 0).unwrap(), None);
        assert!(path.exists());
        let found = background(&path).expect("damage found");
        assert!(flag_path(&path).exists(), "{found}");
        let aside = check(&path, 0).unwrap().expect("set aside");
        assert!(!flag_path(&path).exists());
        // Either the check lists the damage or it stops at the damaged page.
        let r = &aside.reason;
        assert!(
            r.starts_with("quick_check") || r.contains("malformed"),
            "{r}"
        );
        assert!(aside.to.exists() && !path.exists());
    }

    #[test]
    fn a_sound_database_stays_and_garbage_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        assert_eq!(check(&path, u64::MAX).unwrap(), None);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t(a); INSERT INTO t VALUES (1);")
            .unwrap();
        drop(conn);
        assert_eq!(check(&path, u64::MAX).unwrap(), None);
        assert!(path.exists());
        assert_eq!(aside_notice(&path, Duration::from_secs(3600)), None);

        // A damaged header: not a database.
        std::fs::write(&path, vec![0x5Au8; 8192]).unwrap();
        let aside = check(&path, u64::MAX).unwrap().expect("set aside");
        assert!(!path.exists());
        assert!(aside.to.exists());
        assert!(aside.reason.contains("not a database"), "{}", aside.reason);
        let notice = aside_notice(&path, Duration::from_secs(3600)).unwrap();
        assert!(notice.contains("set aside as"), "{notice}");
        assert_eq!(aside_notice(&path, Duration::ZERO), None);
    }
}
