//! What SQLite itself holds in memory, from SQLite's own counter: the page
//! caches of the writer and the readers (bounded by their `cache_size`),
//! prepared statements and parser state. `/metrics` shows it beside the RSS,
//! so an operator can tell the store's bounded caches from the rest of the
//! agent's memory. Reads a counter; changes no setting and no data.

/// Bytes SQLite holds now, and the most it held since the process started.
/// `None` when SQLite refuses the call.
#[allow(unsafe_code)]
pub fn held() -> Option<(u64, u64)> {
    let (mut current, mut highest) = (0i64, 0i64);
    // SAFETY: sqlite3_status64 reads one of SQLite's global counters under its
    // own mutex and writes it through the two pointers, both valid for the
    // call; a reset flag of 0 leaves the high-water mark as it is.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_status64(
            rusqlite::ffi::SQLITE_STATUS_MEMORY_USED,
            &mut current,
            &mut highest,
            0,
        )
    };
    (rc == rusqlite::ffi::SQLITE_OK).then(|| {
        (
            u64::try_from(current).unwrap_or(0),
            u64::try_from(highest).unwrap_or(0),
        )
    })
}

#[cfg(test)]
mod tests {
    /// A connection whose page cache holds 2 MB of pages is counted (other
    /// tests of this binary open connections beside it, so the counter can
    /// only be compared from below).
    #[test]
    fn a_filled_page_cache_is_counted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = rusqlite::Connection::open(dir.path().join("m.db")).expect("open");
        conn.execute_batch(
            "PRAGMA cache_size = -4000;
             CREATE TABLE t (x BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO t SELECT zeroblob(1000) FROM n;",
        )
        .expect("fill");
        let (now, highest) = super::held().expect("counted");
        assert!(
            now >= 2_000_000,
            "2 MB of pages in the cache, {now} bytes counted"
        );
        assert!(highest >= now, "high-water {highest} below {now}");
        drop(conn);
    }
}
