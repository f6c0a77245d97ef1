//! Every statement on the outbox and RPC-dedup tables (created by the store
//! migration `0003_uplink_outbox.sql`).
//!
//! Functions over a `rusqlite::Connection`, so they run inside whichever
//! transaction the caller is in: the store writer's (through the outbox's commit
//! hook or `StoreHandle::execute`) or a read snapshot (`StoreHandle::read`).
//! Nothing here opens files, begins transactions or spawns threads.

use rusqlite::{params, Connection, OptionalExtension};

/// What a row counts against the size cap beyond its device and body bytes (key,
/// timestamp, record header, b-tree cell).
pub const ROW_OVERHEAD: u64 = 24;

/// One stored message.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub seq: u64,
    pub created_ms: i64,
    pub device: String,
    pub body: Vec<u8>,
}

impl Row {
    pub fn cost(&self) -> u64 {
        cost(&self.device, &self.body)
    }
}

pub fn cost(device: &str, body: &[u8]) -> u64 {
    (device.len() + body.len()) as u64 + ROW_OVERHEAD
}

/// Appends one message; returns its seq.
pub fn append(
    conn: &Connection,
    created_ms: i64,
    device: &str,
    body: &[u8],
) -> rusqlite::Result<u64> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO uplink_outbox (created_ms, device, body) VALUES (?1, ?2, ?3) RETURNING seq",
    )?;
    stmt.query_row(params![created_ms, device, body], |r| r.get::<_, i64>(0))
        .map(|s| s as u64)
}

/// Rows with `after < seq <= upto`, in seq order, at most `limit`.
pub fn fetch(conn: &Connection, after: u64, upto: u64, limit: usize) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, created_ms, device, body FROM uplink_outbox
         WHERE seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3",
    )?;
    let upto = i64::try_from(upto).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![after as i64, upto, limit as i64], |r| {
        Ok(Row {
            seq: r.get::<_, i64>(0)? as u64,
            created_ms: r.get(1)?,
            device: r.get(2)?,
            body: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// Deletes acknowledged rows; returns the bytes they counted.
pub fn remove(conn: &Connection, seqs: &[u64]) -> rusqlite::Result<(u64, u64)> {
    let mut stmt = conn.prepare_cached(
        "DELETE FROM uplink_outbox WHERE seq = ?1 RETURNING length(device) + length(body)",
    )?;
    let (mut rows, mut bytes) = (0, 0);
    for seq in seqs {
        if let Some(len) = stmt
            .query_row([*seq as i64], |r| r.get::<_, i64>(0))
            .optional()?
        {
            rows += 1;
            bytes += len as u64 + ROW_OVERHEAD;
        }
    }
    Ok((rows, bytes))
}

/// Row count, counted bytes, and the highest seq ever assigned (0 for none).
pub fn totals(conn: &Connection) -> rusqlite::Result<(u64, u64, u64)> {
    let (rows, bytes): (i64, i64) = conn.query_row(
        "SELECT count(*), coalesce(sum(length(device) + length(body)), 0) FROM uplink_outbox",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let last: Option<i64> = conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'uplink_outbox'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok((
        rows as u64,
        bytes as u64 + rows as u64 * ROW_OVERHEAD,
        last.unwrap_or(0) as u64,
    ))
}

/// What one eviction step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    pub rows: u64,
    pub bytes: u64,
    /// It stopped at its row limit with more to evict.
    pub more: bool,
}

/// Evicts oldest first until no row is older than `min_created_ms` and the rows
/// count at most `max_bytes`, given that they count `bytes` now, but at most
/// `limit` rows.
pub fn evict(
    conn: &Connection,
    min_created_ms: i64,
    bytes: u64,
    max_bytes: u64,
    limit: u64,
) -> rusqlite::Result<Evicted> {
    let mut over = bytes.saturating_sub(max_bytes);
    let mut last = None;
    let (mut rows, mut freed, mut more) = (0u64, 0u64, false);
    {
        let mut stmt = conn.prepare_cached(
            "SELECT seq, created_ms, length(device) + length(body) FROM uplink_outbox ORDER BY seq",
        )?;
        let mut cursor = stmt.query([])?;
        while let Some(r) = cursor.next()? {
            let created: i64 = r.get(1)?;
            if over == 0 && created >= min_created_ms {
                break;
            }
            if rows == limit {
                more = true;
                break;
            }
            let cost = r.get::<_, i64>(2)? as u64 + ROW_OVERHEAD;
            over = over.saturating_sub(cost);
            freed += cost;
            rows += 1;
            last = Some(r.get::<_, i64>(0)?);
        }
    }
    if let Some(last) = last {
        conn.prepare_cached("DELETE FROM uplink_outbox WHERE seq <= ?1")?
            .execute([last])?;
    }
    Ok(Evicted {
        rows,
        bytes: freed,
        more,
    })
}

/// The first answer to RPC `id` if it was recorded at or after `since_ms`.
pub fn rpc_seen(conn: &Connection, id: &str, since_ms: i64) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT response FROM uplink_rpc_seen WHERE id = ?1 AND at_ms >= ?2")?
        .query_row(params![id, since_ms], |r| r.get(0))
        .optional()
}

/// Records the first answer to `id` (replacing an expired record).
pub fn rpc_record(
    conn: &Connection,
    id: &str,
    at_ms: i64,
    response: &[u8],
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO uplink_rpc_seen (id, at_ms, response) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![id, at_ms, response])
    .map(drop)
}

/// What one record costs against the RPC record's byte bound: id, answer,
/// and the row's overhead.
pub fn rpc_cost(id: &str, response: &[u8]) -> u64 {
    (id.len() + response.len()) as u64 + ROW_OVERHEAD
}

/// What the RPC record holds after [`rpc_trim`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcTrim {
    pub rows: u64,
    pub bytes: u64,
    /// Records deleted before their time (younger than `window_from_ms`) to stay
    /// within the bounds.
    pub dropped: u64,
}

/// Forgets answers recorded before `window_from_ms`, then the oldest ones until
/// at most `max_rows` rows of at most `max_bytes` (by [`rpc_cost`]) are left.
pub fn rpc_trim(
    conn: &Connection,
    window_from_ms: i64,
    max_rows: u64,
    max_bytes: u64,
) -> rusqlite::Result<RpcTrim> {
    conn.prepare_cached("DELETE FROM uplink_rpc_seen WHERE at_ms < ?1")?
        .execute([window_from_ms])?;
    let (rows, len): (i64, i64) = conn.query_row(
        "SELECT count(*), coalesce(sum(length(id) + length(response)), 0) FROM uplink_rpc_seen",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let (mut rows, mut bytes) = (rows as u64, len as u64 + rows as u64 * ROW_OVERHEAD);
    let mut dropped = 0;
    if rows > max_rows || bytes > max_bytes {
        let mut oldest = conn.prepare_cached(
            "SELECT id, length(id) + length(response) FROM uplink_rpc_seen ORDER BY at_ms, rowid",
        )?;
        let mut cursor = oldest.query([])?;
        let mut doomed = Vec::new();
        while rows > max_rows || bytes > max_bytes {
            let Some(r) = cursor.next()? else { break };
            doomed.push(r.get::<_, String>(0)?);
            rows -= 1;
            bytes = bytes.saturating_sub(r.get::<_, i64>(1)? as u64 + ROW_OVERHEAD);
        }
        drop(cursor);
        let mut delete = conn.prepare_cached("DELETE FROM uplink_rpc_seen WHERE id = ?1")?;
        for id in &doomed {
            delete.execute([id])?;
        }
        dropped = doomed.len() as u64;
    }
    Ok(RpcTrim {
        rows,
        bytes,
        dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().expect("in-memory db");
        conn.execute_batch(include_str!(
            "../../store/migrations/0003_uplink_outbox.sql"
        ))
        .expect("schema");
        conn
    }

    fn evicted(rows: u64, bytes: u64, more: bool) -> Evicted {
        Evicted { rows, bytes, more }
    }

    #[test]
    fn seq_is_gap_free_and_never_reused() {
        let conn = db();
        for i in 1..=5 {
            assert_eq!(append(&conn, i, "d", b"x").unwrap(), i as u64);
        }
        assert_eq!(
            remove(&conn, &[4, 5, 99]).unwrap(),
            (2, 2 * (2 + ROW_OVERHEAD))
        );
        assert_eq!(append(&conn, 6, "d", b"x").unwrap(), 6);
        assert_eq!(totals(&conn).unwrap(), (4, 4 * (2 + ROW_OVERHEAD), 6));
        let seqs: Vec<_> = fetch(&conn, 1, u64::MAX, 10)
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, [2, 3, 6]);
        let seqs: Vec<_> = fetch(&conn, 0, 3, 10)
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(fetch(&conn, 0, u64::MAX, 1).unwrap()[0].seq, 1);
    }

    #[test]
    fn eviction_takes_the_oldest_by_age_then_by_size() {
        let conn = db();
        for i in 0..10 {
            append(&conn, i * 1000, "d", &[0; 75]).unwrap(); // 100 bytes a row
        }
        let (_, bytes, _) = totals(&conn).unwrap();
        assert_eq!(bytes, 1000);
        // Age: rows created before 3000 go, two at a time.
        assert_eq!(
            evict(&conn, 3000, bytes, u64::MAX, 2).unwrap(),
            evicted(2, 200, true)
        );
        assert_eq!(
            evict(&conn, 3000, 800, u64::MAX, 2).unwrap(),
            evicted(1, 100, false)
        );
        // Size: 700 left, cap 450: three more rows.
        assert_eq!(
            evict(&conn, 0, 700, 450, 100).unwrap(),
            evicted(3, 300, false)
        );
        let seqs: Vec<_> = fetch(&conn, 0, u64::MAX, 100)
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, [7, 8, 9, 10]);
        assert_eq!(evict(&conn, 0, 400, 450, 100).unwrap(), Evicted::default());
    }

    #[test]
    fn rpc_records_expire() {
        let conn = db();
        rpc_record(&conn, "a", 1000, b"first").unwrap();
        assert_eq!(
            rpc_seen(&conn, "a", 500).unwrap().as_deref(),
            Some(&b"first"[..])
        );
        assert_eq!(rpc_seen(&conn, "a", 1001).unwrap(), None);
        assert_eq!(rpc_seen(&conn, "b", 0).unwrap(), None);
        assert_eq!(
            rpc_trim(&conn, 2000, 10, 1 << 20).unwrap(),
            RpcTrim::default()
        );
    }

    #[test]
    fn the_rpc_record_stays_within_rows_and_bytes_oldest_first() {
        let conn = db();
        for i in 0..10 {
            rpc_record(&conn, &format!("r{i}"), 1000 + i, &[b'x'; 98]).unwrap();
            // 124 bytes a record
        }
        // Six rows at most: the four oldest go, before their time.
        assert_eq!(
            rpc_trim(&conn, 0, 6, u64::MAX).unwrap(),
            RpcTrim {
                rows: 6,
                bytes: 6 * 124,
                dropped: 4
            }
        );
        assert_eq!(rpc_seen(&conn, "r3", 0).unwrap(), None);
        assert!(rpc_seen(&conn, "r4", 0).unwrap().is_some());
        // 400 bytes at most: three records.
        assert_eq!(rpc_trim(&conn, 0, 6, 400).unwrap().rows, 3);
        assert!(rpc_seen(&conn, "r7", 0).unwrap().is_some());
        // Past the window they just expire.
        assert_eq!(
            rpc_trim(&conn, 1009, 6, 400).unwrap(),
            RpcTrim {
                rows: 1,
                bytes: 124,
                dropped: 0
            }
        );
        assert_eq!(rpc_cost("r9", &[0; 98]), 124);
    }
}
