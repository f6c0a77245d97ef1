//! The EEBus node's use cases as last in force, kept in the agent's database
//! (migration `0013_eebus_state`), so a restart in failsafe stays in
//! failsafe and a limit still valid still holds. Saved per use case when what
//! holds changes, in one statement of the store's writer; read once at start.
//!
//! SQL for the node lives here and in its migration only; the store owns the
//! connection.

use rusqlite::{params, Connection};

use super::policy::Kept;
use crate::store::{StoreError, StoreHandle};

/// The node's table, through the store.
#[derive(Clone)]
pub struct EebusStore {
    store: Option<StoreHandle>,
}

impl EebusStore {
    pub fn new(store: StoreHandle) -> EebusStore {
        EebusStore { store: Some(store) }
    }

    /// Keeps nothing (an agent without a store).
    pub fn none() -> EebusStore {
        EebusStore { store: None }
    }

    /// What was kept of use case `use_case` (`lpc`, `lpp`) of `site`.
    pub async fn load(&self, site: &str, use_case: &str) -> Result<Option<Kept>, StoreError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let (site, use_case) = (site.to_string(), use_case.to_string());
        store
            .read(move |conn: &Connection| read(conn, &site, &use_case))
            .await
    }

    /// Replaces what is kept of `use_case`.
    pub async fn save(
        &self,
        site: &str,
        use_case: &str,
        kept: Kept,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let (site, use_case) = (site.to_string(), use_case.to_string());
        store
            .execute(move |conn: &Connection| {
                conn.execute(
                    "INSERT OR REPLACE INTO eebus_state (site, use_case, state, failsafe, since_ms,
                         limit_w, limit_until_ms, failsafe_w, failsafe_duration_s, saved_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    params![
                        site,
                        use_case,
                        kept.state,
                        kept.failsafe,
                        kept.since_ms,
                        kept.limit.map(|l| l.0),
                        kept.limit.and_then(|l| l.1),
                        kept.failsafe_w,
                        kept.failsafe_duration_s as i64,
                        now_ms,
                    ],
                )?;
                Ok(())
            })
            .await
    }
}

fn read(conn: &Connection, site: &str, use_case: &str) -> Result<Option<Kept>, StoreError> {
    let row = conn.query_row(
        "SELECT state, failsafe, since_ms, limit_w, limit_until_ms, failsafe_w, failsafe_duration_s
         FROM eebus_state WHERE site = ?1 AND use_case = ?2",
        [site, use_case],
        |r| {
            let limit_w: Option<f64> = r.get(3)?;
            Ok(Kept {
                state: r.get(0)?,
                failsafe: r.get(1)?,
                since_ms: r.get(2)?,
                limit: limit_w.map(|w| (w, r.get::<_, Option<i64>>(4).ok().flatten())),
                failsafe_w: r.get(5)?,
                failsafe_duration_s: r.get::<_, i64>(6)?.max(0) as u64,
            })
        },
    );
    match row {
        Ok(k) => Ok(Some(k)),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
