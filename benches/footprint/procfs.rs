//! What the kernel tells about a process (`/proc/PID/...`) and about a
//! database (SQLite pragmas and `dbstat`), for both modes of the footprint
//! bench.

use std::path::Path;
use std::time::Duration;

/// VmRSS and VmHWM in kB.
pub fn memory_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// utime + stime in clock ticks (100 per second on Linux).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// `write_bytes` of a `/proc/.../io` file.
pub fn io_write_bytes(file: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("write_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Copies an agent's WAL into its database file (from this thread, whose own
/// `write_bytes` counts it) and returns the bytes that took.
pub fn checkpoint(db: &Path) -> u64 {
    let before = io_write_bytes("/proc/thread-self/io");
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    io_write_bytes("/proc/thread-self/io") - before
}

/// Bytes of the database's pages in use (all pages but the free list), as a
/// reader sees the last commit.
pub fn used_bytes(db: &Path) -> u64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let pragma = |name: &str| -> u64 {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
            .unwrap() as u64
    };
    (pragma("page_count") - pragma("freelist_count")) * pragma("page_size")
}

/// Bytes of the pages of the steering audit (the tables named
/// `steering_audit*` and their indexes), by `dbstat` on a read-only
/// connection.
pub fn audit_bytes(db: &Path) -> u64 {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(db, flags).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut names = conn
        .prepare("SELECT name FROM sqlite_schema WHERE tbl_name LIKE 'steering_audit%'")
        .unwrap();
    let names: Vec<String> = names
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names
        .iter()
        .map(|name| {
            conn.query_row(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )
            .unwrap() as u64
        })
        .sum()
}
