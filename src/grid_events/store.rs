//! The evidence log's table (migration `0014_grid_events`): an event is
//! written when it opens, again with the meter's extremes now and then while
//! it is open, and when it ends. Events end more than [`KEEP_MS`] ago go,
//! and the oldest beyond [`MAX_ROWS`].
//!
//! SQL for the log lives here and in its migration only; the store owns the
//! connection.

use rusqlite::{params, Connection, Row};

use super::tracker::Event;
use crate::store::{StoreError, StoreHandle};

/// Two years.
pub const KEEP_MS: i64 = 2 * 366 * 86_400_000;
/// The log's own size cap, in events (about 100 bytes each).
pub const MAX_ROWS: i64 = 200_000;

const COLUMNS: &str = "id, site, source, kind, reference, limit_w, failsafe, start_ms, end_ms, max_import_w, max_export_w";

/// The log's table, through the store.
#[derive(Clone)]
pub struct EventStore {
    store: StoreHandle,
}

impl EventStore {
    pub fn new(store: StoreHandle) -> EventStore {
        EventStore { store }
    }

    /// Writes `e` (a new row when it has no id); returns its id.
    pub async fn keep(&self, e: Event) -> Result<i64, StoreError> {
        self.store
            .execute(move |conn: &Connection| write(conn, &e))
            .await
    }

    /// The site's events still open.
    pub async fn open(&self, site: &str) -> Result<Vec<Event>, StoreError> {
        let site = site.to_string();
        self.store
            .read(move |conn: &Connection| {
                query(
                    conn,
                    &format!(
                        "SELECT {COLUMNS} FROM grid_events WHERE site = ?1 AND end_ms IS NULL"
                    ),
                    params![site],
                )
            })
            .await
    }

    /// Drops what is past keeping.
    pub async fn prune(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.store
            .execute(move |conn: &Connection| prune(conn, now_ms))
            .await
    }
}

fn write(conn: &Connection, e: &Event) -> Result<i64, StoreError> {
    let values = params![
        e.site,
        e.source,
        e.kind,
        e.reference,
        e.limit_w,
        e.failsafe,
        e.start_ms,
        e.end_ms,
        e.max_import_w,
        e.max_export_w,
    ];
    match e.id {
        Some(id) => {
            conn.execute(
                "UPDATE grid_events SET site = ?1, source = ?2, kind = ?3, reference = ?4, limit_w = ?5,
                     failsafe = ?6, start_ms = ?7, end_ms = ?8, max_import_w = ?9, max_export_w = ?10
                 WHERE id = ?11",
                rusqlite::params_from_iter(values.iter().copied().chain([&id as &dyn rusqlite::ToSql])),
            )?;
            Ok(id)
        }
        None => {
            conn.execute(
                "INSERT INTO grid_events (site, source, kind, reference, limit_w, failsafe, start_ms,
                     end_ms, max_import_w, max_export_w) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                values,
            )?;
            Ok(conn.last_insert_rowid())
        }
    }
}

fn prune(conn: &Connection, now_ms: i64) -> Result<usize, StoreError> {
    let old = conn.execute(
        "DELETE FROM grid_events WHERE end_ms IS NOT NULL AND end_ms < ?1",
        [now_ms - KEEP_MS],
    )?;
    let over = conn.execute(
        "DELETE FROM grid_events WHERE id IN
             (SELECT id FROM grid_events ORDER BY start_ms DESC LIMIT -1 OFFSET ?1)",
        [MAX_ROWS],
    )?;
    Ok(old + over)
}

fn event(r: &Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: r.get(0)?,
        site: r.get(1)?,
        source: r.get(2)?,
        kind: r.get(3)?,
        reference: r.get(4)?,
        limit_w: r.get(5)?,
        failsafe: r.get(6)?,
        start_ms: r.get(7)?,
        end_ms: r.get(8)?,
        max_import_w: r.get(9)?,
        max_export_w: r.get(10)?,
    })
}

fn query(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Event>, StoreError> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map(args, event)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The events that overlap `since_ms..until_ms`, oldest first, from a
/// database opened on its own (the `grid-events` command reads beside a
/// running agent).
pub fn between(conn: &Connection, since_ms: i64, until_ms: i64) -> Result<Vec<Event>, StoreError> {
    query(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM grid_events
             WHERE start_ms < ?2 AND (end_ms IS NULL OR end_ms >= ?1)
             ORDER BY start_ms, id"
        ),
        params![since_ms, until_ms],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut c = Connection::open_in_memory().expect("db");
        crate::store::migrate_for_tests(&mut c);
        c
    }

    fn ev(start: i64, end: Option<i64>) -> Event {
        Event {
            id: None,
            site: "home".into(),
            source: "eebus".into(),
            kind: "maxConsumption".into(),
            reference: "lpc: limited".into(),
            limit_w: 4_200.0,
            failsafe: false,
            start_ms: start,
            end_ms: end,
            max_import_w: Some(5_000.0),
            max_export_w: None,
        }
    }

    #[test]
    fn kept_updated_found_and_pruned() {
        let c = conn();
        let id = write(&c, &ev(1_000, None)).expect("new");
        let mut e = ev(1_000, Some(5_000));
        e.id = Some(id);
        assert_eq!(write(&c, &e).expect("update"), id);
        write(&c, &ev(10_000, None)).expect("another");
        let found = between(&c, 0, 20_000).expect("found");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].end_ms, Some(5_000));
        assert_eq!(between(&c, 6_000, 9_000).expect("none").len(), 0);
        // Two years and a day on: the ended one goes, the open one stays.
        assert_eq!(prune(&c, 5_000 + KEEP_MS + 1).expect("pruned"), 1);
        assert_eq!(between(&c, 0, i64::MAX).expect("left").len(), 1);
    }
}
