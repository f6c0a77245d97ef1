//! Read connections: a small pool, used only from tokio's blocking threads.
//!
//! Readers see the last committed state (WAL snapshots) and never wait for the
//! writer. They are opened `query_only`; nothing here may write.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};

use super::StoreError;

/// Idle connections kept for reuse; more are opened on demand and closed after.
const KEEP_IDLE: usize = 4;

#[derive(Clone)]
pub(crate) struct Readers {
    path: Arc<PathBuf>,
    idle: Arc<Mutex<Vec<Connection>>>,
}

impl Readers {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path: Arc::new(path),
            idle: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Runs `f` with a read connection on a blocking thread.
    pub async fn run<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        let readers = self.clone();
        tokio::task::spawn_blocking(move || {
            let conn = readers.take()?;
            let result = f(&conn);
            readers.give(conn);
            result
        })
        .await
        .map_err(|e| E::from(StoreError::Reader(e.to_string())))?
    }

    fn take(&self) -> Result<Connection, StoreError> {
        // A poisoned pool only means a reader panicked while pushing or popping;
        // the Vec is still valid.
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match idle {
            Some(conn) => Ok(conn),
            None => open_reader(&self.path),
        }
    }

    fn give(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < KEEP_IDLE {
            idle.push(conn);
        }
    }
}

fn open_reader(path: &std::path::Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA query_only = ON; PRAGMA cache_size = -2000;")?;
    Ok(conn)
}
