//! Versioned schema migrations, applied at start before anything else touches the
//! database.
//!
//! # Adding a migration
//!
//! Add one file `src/store/migrations/NNNN_what_it_adds.sql` (four digits, then a
//! snake_case name), numbered after the highest one present. That is the whole
//! change: `build.rs` embeds every `.sql` file of that folder in name order. Never
//! edit or rename a migration that was merged: databases in the field recorded its
//! id. Fix mistakes with a new migration.
//!
//! Each migration runs in its own transaction together with the row that records
//! it in `schema_migrations`, so a crash leaves it applied or not, never half.
//! Migrations are recorded by id (file name without `.sql`), not by a counter: two
//! branches that both add `0002_...` with different names merge without a clash,
//! and a database that has one of them gets the other one on its next start.
//!
//! This module must not hold schema itself (that lives in the `.sql` files) nor
//! run anything but DDL and data moves the migrations contain.

use rusqlite::Connection;

use super::StoreError;

/// Every migration known to this binary: `(id, sql)`, in id order.
pub(crate) const MIGRATIONS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// Applies the migrations the database lacks; returns the ids applied now.
///
/// Refuses a database that recorded a migration this binary does not know: it was
/// written by a newer sitegate, and running an older one on it could corrupt it.
pub(crate) fn migrate(conn: &mut Connection, now_ms: i64) -> Result<Vec<&'static str>, StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             id         TEXT PRIMARY KEY,
             applied_at INTEGER NOT NULL
         )",
    )?;
    let applied: Vec<String> = {
        let mut stmt = conn.prepare("SELECT id FROM schema_migrations ORDER BY id")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    if let Some(unknown) = applied
        .iter()
        .find(|id| !MIGRATIONS.iter().any(|(known, _)| known == id))
    {
        return Err(StoreError::NewerSchema(unknown.clone()));
    }
    let mut done = Vec::new();
    for (id, sql) in MIGRATIONS {
        if applied.iter().any(|a| a == id) {
            continue;
        }
        let tx = conn.transaction()?;
        tx.execute_batch(sql)
            .map_err(|source| StoreError::Migration {
                id: (*id).to_string(),
                source,
            })?;
        tx.execute(
            "INSERT INTO schema_migrations (id, applied_at) VALUES (?1, ?2)",
            rusqlite::params![id, now_ms],
        )?;
        tx.commit()?;
        tracing::info!(migration = id, "applied schema migration");
        done.push(*id);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_sorted_unique_and_apply_once() {
        let ids: Vec<_> = MIGRATIONS.iter().map(|(id, _)| *id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted);
        assert_eq!(ids.first(), Some(&"0001_measurements"));

        let mut conn = Connection::open_in_memory().expect("in-memory db");
        assert_eq!(migrate(&mut conn, 1).expect("first run"), ids);
        assert!(migrate(&mut conn, 2).expect("second run").is_empty());
    }

    #[test]
    fn refuses_a_database_from_a_newer_binary() {
        let mut conn = Connection::open_in_memory().expect("in-memory db");
        migrate(&mut conn, 1).expect("first run");
        conn.execute(
            "INSERT INTO schema_migrations (id, applied_at) VALUES ('9999_future', 3)",
            [],
        )
        .expect("insert");
        match migrate(&mut conn, 4) {
            Err(StoreError::NewerSchema(id)) => assert_eq!(id, "9999_future"),
            other => panic!("expected NewerSchema, got {other:?}"),
        }
    }
}
