//! Read connections: a small pool, used only from tokio's blocking threads, with
//! a bound on how many reads run and wait at once.
//!
//! Readers see the last committed state (WAL snapshots) and never wait for the
//! writer. They are opened `query_only`; nothing here may write.
//!
//! Bounds: at most [`MAX_RUNNING`] reads for requests run at once, at most
//! [`MAX_WAITING`] more wait for a turn, and any further read is refused at once
//! with [`StoreError::Busy`]. The agent's own reads on its delivery path (the
//! uplink reading its outbox) have [`OWN_TURNS`] turn of their own, so requests
//! holding every turn cannot stall delivery; at most `MAX_RUNNING + OWN_TURNS`
//! blocking threads and connections are busy with reads. A read whose caller
//! stops waiting (an HTTP GET
//! dropped at its time limit) interrupts its SQLite statement, so the blocking
//! thread is given back within a statement step rather than when the query
//! would have ended.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, InterruptHandle, OpenFlags};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::StoreError;

/// Reads for requests running at once.
pub const MAX_RUNNING: usize = 4;
/// The agent's own reads running at once, beside those for requests.
pub const OWN_TURNS: usize = 1;
/// Idle connections kept for reuse; more are opened on demand and closed after.
const KEEP_IDLE: usize = MAX_RUNNING + OWN_TURNS;
/// Reads waiting for a turn at most; past it a read is refused (`Busy`).
pub const MAX_WAITING: usize = 64;

/// Whose turns a read takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// A read for a request (HTTP, MQTT RPC): bounded and refused past the bound.
    Requests,
    /// The agent's own read on its delivery path: its callers are a fixed few
    /// tasks (one uplink link), so it waits for its turn and is never refused.
    Own,
}

#[derive(Clone)]
pub(crate) struct Readers {
    path: Arc<PathBuf>,
    idle: Arc<Mutex<Vec<Connection>>>,
    turns: Arc<Semaphore>,
    own_turns: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
}

/// Interrupts the statement of a read whose caller went away.
struct InterruptOnDrop {
    handle: Arc<Mutex<Option<InterruptHandle>>>,
    done: Arc<AtomicBool>,
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if self.done.load(Ordering::Acquire) {
            return;
        }
        if let Some(h) = self
            .handle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            h.interrupt();
        }
    }
}

/// Counts a waiting read for as long as it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Readers {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path: Arc::new(path),
            idle: Arc::new(Mutex::new(Vec::new())),
            turns: Arc::new(Semaphore::new(MAX_RUNNING)),
            own_turns: Arc::new(Semaphore::new(OWN_TURNS)),
            waiting: Arc::new(AtomicUsize::new(0)),
            refused: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Reads refused as busy so far.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::Relaxed)
    }

    /// Reads waiting for a turn now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Runs `f` with a read connection on a blocking thread, once a turn of
    /// `lane` is free; a request's read is refused with [`StoreError::Busy`]
    /// when too many wait.
    pub async fn run<T, E, F>(&self, lane: Lane, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        let turn = match lane {
            Lane::Requests => self.request_turn().await.map_err(E::from)?,
            Lane::Own => self
                .own_turns
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| E::from(StoreError::Closed))?,
        };
        let readers = self.clone();
        let handle = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));
        let _interrupt = InterruptOnDrop {
            handle: handle.clone(),
            done: done.clone(),
        };
        let finished = done.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let conn = readers.take()?;
            *handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn.get_interrupt_handle());
            let result = f(&conn);
            finished.store(true, Ordering::Release);
            handle.lock().unwrap_or_else(|e| e.into_inner()).take();
            readers.give(conn);
            result
        })
        .await;
        done.store(true, Ordering::Release);
        joined.map_err(|e| E::from(StoreError::ReadAborted(e)))?
    }

    /// A turn for a request's read: at once, after waiting among at most
    /// [`MAX_WAITING`], or refused as busy.
    async fn request_turn(&self) -> Result<OwnedSemaphorePermit, StoreError> {
        match self.turns.clone().try_acquire_owned() {
            Ok(turn) => Ok(turn),
            Err(_) => {
                if self.waiting.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(StoreError::Busy {
                        running: MAX_RUNNING,
                        waiting: MAX_WAITING,
                    });
                }
                let _counted = Waiting(&self.waiting);
                self.turns
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| StoreError::Closed)
            }
        }
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
    super::stable_plans::enable(&conn)?;
    // A reader's cache lasts one read transaction: SQLite empties it when a
    // commit came in between, which the writer does every second. 512 KiB
    // hold the index pages one query walks again and again.
    conn.execute_batch("PRAGMA query_only = ON; PRAGMA cache_size = -512;")?;
    Ok(conn)
}
