//! Steering's persistence in SQLite, through the store's single writer: the
//! component timelines, the audit log and the idempotency keys (tables of
//! migration `0002_steering`), and the devices' registers as first found
//! (`0005_device_originals`). A commit is one transaction and answers after
//! COMMIT; reads run on the store's read connections.
//!
//! SQL for steering lives here and in its migration only; the store owns the
//! connection. How the rows hold their values (JSON text) is `rows.rs`.

pub(crate) mod rows;

use rusqlite::{params, Connection};

use super::audit::AuditEvent;
use super::persist::{BoxFuture, Commit, FoundRegisters, PersistError, SteeringStore};
use super::request::Answer;
use super::signal::StoredEntry;
use super::timeline::Entry;
use super::value::Component;
use crate::store::{StoreError, StoreHandle};

/// Audit records older than this are deleted when new ones are written.
pub const AUDIT_RETENTION_MS: i64 = 400 * 24 * 3600 * 1000;

/// Steering tables in the agent's database.
#[derive(Clone)]
pub struct SqliteSteeringStore {
    store: StoreHandle,
}

impl SqliteSteeringStore {
    pub fn new(store: StoreHandle) -> Self {
        Self { store }
    }
}

fn err(e: StoreError) -> PersistError {
    PersistError::from(e)
}

fn insert_audit(conn: &Connection, e: &AuditEvent) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO steering_audit (site, at_ms, kind, record) VALUES (?1, ?2, ?3, ?4)",
        params![e.site, e.at_ms, e.kind_name(), rows::encode_record(e)],
    )?;
    Ok(())
}

impl SteeringStore for SqliteSteeringStore {
    fn found_registers(
        &self,
    ) -> BoxFuture<'_, Result<std::collections::HashMap<String, FoundRegisters>, PersistError>>
    {
        Box::pin(async move {
            let rows = self
                .store
                .read(move |conn: &Connection| {
                    let mut stmt = conn.prepare(
                        "SELECT device, points, found_ms, steered FROM device_originals",
                    )?;
                    let rows = stmt.query_map([], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, i64>(3)?,
                        ))
                    })?;
                    Ok::<_, StoreError>(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .map_err(err)?;
            Ok(rows
                .into_iter()
                .filter_map(|(device, points, found_ms, steered)| {
                    let originals = rows::decode_points(&points)?;
                    Some((
                        device,
                        FoundRegisters {
                            originals,
                            found_ms,
                            steered: steered != 0,
                        },
                    ))
                })
                .collect())
        })
    }

    fn keep_found(
        &self,
        device: String,
        found: FoundRegisters,
    ) -> BoxFuture<'_, Result<(), PersistError>> {
        Box::pin(async move {
            self.store
                .execute(move |conn: &Connection| {
                    conn.execute(
                        "INSERT OR REPLACE INTO device_originals (device, points, found_ms, steered)
                         VALUES (?1, ?2, ?3, ?4)",
                        params![
                            device,
                            rows::encode_points(&found.originals),
                            found.found_ms,
                            i64::from(found.steered)
                        ],
                    )?;
                    Ok::<(), StoreError>(())
                })
                .await
                .map_err(err)
        })
    }

    fn commit(&self, c: Commit) -> BoxFuture<'_, Result<(), PersistError>> {
        Box::pin(async move {
            self.store
                .execute(move |conn: &Connection| {
                    for comp in &c.components {
                        conn.execute(
                            "DELETE FROM steering_timeline WHERE site = ?1 AND component = ?2",
                            params![c.site, comp.wire_name()],
                        )?;
                    }
                    for e in &c.entries {
                        conn.execute(
                            "INSERT INTO steering_timeline (site, component, from_ms, until_ms, value, request_id)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                            params![
                                c.site,
                                e.component.wire_name(),
                                e.entry.from,
                                e.entry.until,
                                rows::encode_value(&e.entry.value),
                                e.entry.request_id
                            ],
                        )?;
                    }
                    insert_audit(conn, &c.audit)?;
                    if let Some((caller, key, answer)) = &c.idempotency {
                        let at = c.audit.at_ms;
                        conn.execute(
                            "DELETE FROM steering_idempotency WHERE at_ms < ?1",
                            params![at - super::persist::IDEMPOTENCY_MS],
                        )?;
                        conn.execute(
                            "INSERT OR REPLACE INTO steering_idempotency (caller, key, at_ms, answer)
                             VALUES (?1, ?2, ?3, ?4)",
                            params![caller, key, at, rows::encode_answer(answer)],
                        )?;
                    }
                    Ok::<(), StoreError>(())
                })
                .await
                .map_err(err)
        })
    }

    fn load(&self) -> BoxFuture<'_, Result<Vec<(String, StoredEntry)>, PersistError>> {
        Box::pin(async move {
            let stored = self
                .store
                .read(|conn: &Connection| {
                    let mut stmt = conn.prepare(
                        "SELECT site, component, from_ms, until_ms, value, request_id
                         FROM steering_timeline ORDER BY site, component, from_ms",
                    )?;
                    let rows = stmt.query_map([], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, i64>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, String>(5)?,
                        ))
                    })?;
                    Ok::<_, StoreError>(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .map_err(err)?;
            let mut out = Vec::new();
            for (site, comp, from, until, value, request_id) in stored {
                let decoded = Component::from_wire(&comp)
                    .and_then(|c| Some((c, rows::decode_value(c, &value)?)));
                match decoded {
                    Some((component, value)) => out.push((
                        site,
                        StoredEntry {
                            component,
                            entry: Entry {
                                from,
                                until,
                                value,
                                request_id,
                            },
                        },
                    )),
                    None => {
                        tracing::warn!(%site, component = %comp, %request_id, "unreadable stored steering entry skipped")
                    }
                }
            }
            Ok(out)
        })
    }

    fn replay(
        &self,
        caller: String,
        key: String,
        since_ms: i64,
    ) -> BoxFuture<'_, Result<Option<Answer>, PersistError>> {
        Box::pin(async move {
            let text = self
                .store
                .read(move |conn: &Connection| {
                    let mut stmt = conn.prepare(
                        "SELECT answer FROM steering_idempotency
                         WHERE caller = ?1 AND key = ?2 AND at_ms >= ?3",
                    )?;
                    let mut rows = stmt.query(params![caller, key, since_ms])?;
                    Ok::<_, StoreError>(match rows.next()? {
                        Some(r) => Some(r.get::<_, String>(0)?),
                        None => None,
                    })
                })
                .await
                .map_err(err)?;
            Ok(text.and_then(|t| rows::decode_answer(&t)))
        })
    }

    fn record(&self, events: Vec<AuditEvent>) -> BoxFuture<'_, Result<(), PersistError>> {
        Box::pin(async move {
            self.store
                .execute(move |conn: &Connection| {
                    for e in &events {
                        insert_audit(conn, e)?;
                    }
                    if let Some(newest) = events.iter().map(|e| e.at_ms).max() {
                        conn.execute(
                            "DELETE FROM steering_audit WHERE at_ms < ?1",
                            params![newest - AUDIT_RETENTION_MS],
                        )?;
                    }
                    Ok::<(), StoreError>(())
                })
                .await
                .map_err(err)
        })
    }

    fn history(
        &self,
        site: String,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEvent>, PersistError>> {
        Box::pin(async move {
            let site_ref = site.clone();
            let records = self
                .store
                .read(move |conn: &Connection| {
                    let mut stmt = conn.prepare(
                        "SELECT record FROM steering_audit WHERE site = ?1
                         ORDER BY at_ms DESC, id DESC LIMIT ?2",
                    )?;
                    let rows =
                        stmt.query_map(params![site, limit as i64], |r| r.get::<_, String>(0))?;
                    Ok::<_, StoreError>(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .map_err(err)?;
            Ok(records
                .iter()
                .filter_map(|t| rows::decode_record(&site_ref, t))
                .collect())
        })
    }
}
