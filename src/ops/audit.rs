//! The audit history of operations in the store (`ops_audit`, migration
//! 0007): every operation is written when accepted and when it ends, through
//! the store's writer (answered after COMMIT), and read on its read
//! connections. The newest [`KEEP`] rows are kept.
//!
//! It must not decide anything about operations: it keeps and reads rows.

use rusqlite::{params, OptionalExtension, Row};

use super::error::OpsError;
use super::operation::{OpId, OpKind, OpState, Operation, Source};
use crate::store::StoreHandle;

/// Rows kept at most.
pub const KEEP: usize = 1_000;

/// Writes `op` (insert or replace by id) and keeps the newest [`KEEP`] rows.
pub async fn write(store: &StoreHandle, op: &Operation) -> Result<(), OpsError> {
    let op = op.clone();
    store
        .execute(move |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO ops_audit
                 (id, kind, args, transport, caller, state, accepted_ms, finished_ms, summary, error)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    op.id.as_str(),
                    op.kind.as_str(),
                    op.args,
                    op.source.transport,
                    op.source.caller,
                    op.state.as_str(),
                    op.accepted_ms,
                    op.finished_ms,
                    op.outcome.as_ref().map(|o| o.summary()).or(op.summary.clone()),
                    op.error,
                ],
            )
            .map_err(crate::store::StoreError::from)?;
            conn.execute(
                "DELETE FROM ops_audit WHERE id IN
                 (SELECT id FROM ops_audit ORDER BY accepted_ms DESC, id DESC LIMIT -1 OFFSET ?1)",
                params![KEEP as i64],
            )
            .map_err(crate::store::StoreError::from)?;
            Ok::<(), OpsError>(())
        })
        .await
}

/// The operation with this id, if the history holds it.
pub async fn find(store: &StoreHandle, id: &OpId) -> Result<Option<Operation>, OpsError> {
    let id = id.as_str().to_string();
    store
        .read(move |conn| {
            conn.query_row(
                "SELECT id, kind, args, transport, caller, state, accepted_ms, finished_ms, summary, error
                 FROM ops_audit WHERE id = ?1",
                params![id],
                from_row,
            )
            .optional()
            .map_err(|e| OpsError::Store(e.into()))?
            .transpose()
        })
        .await
}

/// The newest `limit` operations, newest first.
pub async fn newest(store: &StoreHandle, limit: usize) -> Result<Vec<Operation>, OpsError> {
    store
        .read(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, kind, args, transport, caller, state, accepted_ms, finished_ms, summary, error
                     FROM ops_audit ORDER BY accepted_ms DESC, id DESC LIMIT ?1",
                )
                .map_err(|e| OpsError::Store(e.into()))?;
            let rows = stmt
                .query_map(params![limit as i64], from_row)
                .map_err(|e| OpsError::Store(e.into()))?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row.map_err(|e| OpsError::Store(e.into()))??);
            }
            Ok(out)
        })
        .await
}

/// A row, or the problem with it (a row this binary cannot read).
fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<Operation, OpsError>> {
    let id: String = r.get(0)?;
    let kind: String = r.get(1)?;
    let state: String = r.get(5)?;
    let bad = |what: &str, value: &str| {
        OpsError::Corrupt(format!("ops_audit row {id:?}: unknown {what} {value:?}"))
    };
    let Some(kind) = OpKind::parse(&kind) else {
        return Ok(Err(bad("kind", &kind)));
    };
    let Some(state) = OpState::parse(&state) else {
        return Ok(Err(bad("state", &state)));
    };
    let Ok(op_id) = OpId::parse(&id) else {
        return Ok(Err(bad("id", &id)));
    };
    Ok(Ok(Operation {
        id: op_id,
        kind,
        args: r.get(2)?,
        source: Source {
            transport: r.get(3)?,
            caller: r.get(4)?,
        },
        state,
        accepted_ms: r.get(6)?,
        finished_ms: r.get(7)?,
        outcome: None,
        summary: r.get(8)?,
        error: r.get(9)?,
    }))
}

/// Marks every operation left `accepted` or `running` by an earlier run as
/// failed: it ended with that process. Returns how many.
/// `except` (a config change on trial across its restart) is left as it is.
pub async fn interrupted(
    store: &StoreHandle,
    now_ms: i64,
    except: Option<String>,
) -> Result<usize, OpsError> {
    store
        .execute(move |conn| {
            conn.execute(
                "UPDATE ops_audit SET state = 'failed', finished_ms = ?1,
                 error = 'interrupted: the agent stopped before the operation ended'
                 WHERE state IN ('accepted', 'running') AND id IS NOT ?2",
                params![now_ms, except],
            )
            .map_err(|e| OpsError::Store(e.into()))
        })
        .await
}
