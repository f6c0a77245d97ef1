//! The history of configuration changes in the store (`config_history`,
//! migrations 0008 and 0009): a row per `config.put`, written through the store's
//! writer (answered after COMMIT) when the change is refused or written,
//! and replaced when its trial ends. The newest [`KEEP`] rows are kept.
//! The config's version is the number of the last applied change.
//!
//! It must not decide anything about changes: it keeps and reads rows.

use rusqlite::{params, Row};

use super::change::{ChangeResult, ConfigRecord};
use super::error::OpsError;

/// Rows kept at most.
pub const KEEP: usize = 200;

/// Writes `r` (insert or replace by operation id); an applied change
/// without a version gets the next one. Returns the row as written.
pub async fn write(
    store: &crate::store::StoreHandle,
    r: &ConfigRecord,
) -> Result<ConfigRecord, OpsError> {
    let mut r = r.clone();
    store
        .execute(move |conn| {
            let err = |e: rusqlite::Error| OpsError::Store(e.into());
            if r.result == ChangeResult::Applied && r.version.is_none() {
                let last: Option<i64> = conn
                    .query_row("SELECT MAX(version) FROM config_history", [], |row| row.get(0))
                    .map_err(err)?;
                r.version = Some(last.unwrap_or(0) + 1);
            }
            conn.execute(
                "INSERT OR REPLACE INTO config_history
                 (op_id, at_ms, transport, caller, old_sha256, new_sha256, result, reason, version, live)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    r.op_id,
                    r.at_ms,
                    r.transport,
                    r.caller,
                    r.old_sha256,
                    r.new_sha256,
                    r.result.as_str(),
                    r.reason,
                    r.version,
                    r.live,
                ],
            )
            .map_err(err)?;
            conn.execute(
                "DELETE FROM config_history WHERE op_id IN
                 (SELECT op_id FROM config_history ORDER BY at_ms DESC, op_id DESC LIMIT -1 OFFSET ?1)",
                params![KEEP as i64],
            )
            .map_err(err)?;
            Ok::<ConfigRecord, OpsError>(r)
        })
        .await
}

/// The newest `limit` changes, newest first.
pub async fn newest(
    store: &crate::store::StoreHandle,
    limit: usize,
) -> Result<Vec<ConfigRecord>, OpsError> {
    store
        .read(move |conn| {
            let err = |e: rusqlite::Error| OpsError::Store(e.into());
            let mut stmt = conn
                .prepare(
                    "SELECT op_id, at_ms, transport, caller, old_sha256, new_sha256, result, reason, version, live
                     FROM config_history ORDER BY at_ms DESC, op_id DESC LIMIT ?1",
                )
                .map_err(err)?;
            let rows = stmt.query_map(params![limit as i64], from_row).map_err(err)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row.map_err(err)??);
            }
            Ok(out)
        })
        .await
}

/// The version of the config: the number of the last applied change (0
/// before any).
pub async fn version(store: &crate::store::StoreHandle) -> Result<i64, OpsError> {
    store
        .read(|conn| {
            conn.query_row("SELECT MAX(version) FROM config_history", [], |row| {
                row.get::<_, Option<i64>>(0)
            })
            .map(|v| v.unwrap_or(0))
            .map_err(|e| OpsError::Store(e.into()))
        })
        .await
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<ConfigRecord, OpsError>> {
    let result: String = r.get(6)?;
    let Some(parsed) = ChangeResult::parse(&result) else {
        let id: String = r.get(0)?;
        return Ok(Err(OpsError::Corrupt(format!(
            "config_history row {id:?}: unknown result {result:?}"
        ))));
    };
    Ok(Ok(ConfigRecord {
        op_id: r.get(0)?,
        at_ms: r.get(1)?,
        transport: r.get(2)?,
        caller: r.get(3)?,
        old_sha256: r.get(4)?,
        new_sha256: r.get(5)?,
        result: parsed,
        reason: r.get(7)?,
        version: r.get(8)?,
        live: r.get(9)?,
    }))
}
