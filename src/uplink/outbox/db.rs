//! One thread that owns the uplink's SQLite connection and runs jobs on it in
//! order: the interim owner of the outbox tables until the store's single writer
//! takes them over (its `execute(|tx| ...)` has the same shape as [`Db::execute`]).
//!
//! rusqlite blocks, so nothing here runs on the async runtime; callers await a
//! oneshot reply. Jobs run in submission order, so a delete sent before a fetch is
//! done before it.

use std::path::Path;
use std::sync::mpsc;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::sql;

/// Why a database job failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("outbox database {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("outbox database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the outbox database thread has stopped")]
    Stopped,
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Handle to the database thread. Cheap to clone; the thread ends when the last
/// handle is dropped.
#[derive(Clone)]
pub struct Db {
    jobs: mpsc::Sender<Job>,
}

impl Db {
    /// Opens (or creates) the database file, in WAL mode, with the uplink tables.
    pub fn open(path: &Path) -> Result<Db, DbError> {
        let open_err = |source| DbError::Open {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // A missing directory shows up as the open error below.
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path).map_err(open_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
        )
        .map_err(open_err)?;
        conn.execute_batch(sql::SCHEMA).map_err(open_err)?;
        Ok(Self::run(conn))
    }

    /// An in-memory database, for tests and benchmarks.
    pub fn in_memory() -> Result<Db, DbError> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(sql::SCHEMA)?;
        Ok(Self::run(conn))
    }

    fn run(mut conn: Connection) -> Db {
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sitegate-outbox".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job(&mut conn);
                }
            })
            // Spawning a thread fails only when the OS is out of resources at start.
            .map_or_else(
                |e| tracing::error!(error = %e, "cannot start the outbox database thread"),
                drop,
            );
        Db { jobs }
    }

    /// Runs `f` on the database thread and returns its result.
    pub async fn execute<R, F>(&self, f: F) -> Result<R, DbError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit(move |conn| {
            let _ = tx.send(f(conn));
        })?;
        Ok(rx.await.map_err(|_| DbError::Stopped)??)
    }

    /// Queues `f` without waiting for it.
    pub fn submit<F>(&self, f: F) -> Result<(), DbError>
    where
        F: FnOnce(&mut Connection) + Send + 'static,
    {
        self.jobs.send(Box::new(f)).map_err(|_| DbError::Stopped)
    }
}
