//! The store's one error type. Callers above map it once (the API to `internal`).

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot create the database folder {path}: {source}")]
    CreateDir {
        path: String,
        source: std::io::Error,
    },
    #[error("the database {path} is damaged and cannot be set aside: {source}")]
    SetAside {
        path: String,
        source: std::io::Error,
    },
    #[error("migration {id} failed: {source}")]
    Migration { id: String, source: rusqlite::Error },
    #[error(
        "the database records migration {0}, unknown to this sitegate: it was written by a newer version"
    )]
    NewerSchema(String),
    #[error("the database is {found}, not {expected}")]
    Pragma { expected: String, found: String },
    /// The writer thread is gone (after `close`), or a job was dropped without
    /// an answer (it panicked; its writes were rolled back).
    #[error("the store is closed or the job was dropped")]
    Closed,
    /// Too many reads run and wait already (the reader bound, `reader.rs`).
    #[error("the store is busy: {running} reads run and {waiting} wait; try again shortly")]
    Busy { running: usize, waiting: usize },
    /// A read's blocking task did not finish: it panicked (its connection is
    /// dropped), or the runtime is shutting down.
    #[error("a store read failed: {0}")]
    ReadAborted(#[source] tokio::task::JoinError),
    /// The writer thread could not be started.
    #[error("the store writer thread: cannot start it: {0}")]
    WriterStart(#[source] std::io::Error),
    /// Waiting for the writer thread to end did not finish.
    #[error("the store writer thread: cannot wait for it: {0}")]
    WriterJoin(#[source] tokio::task::JoinError),
    /// The writer thread ended by a panic.
    #[error("the store writer thread: it panicked")]
    WriterPanicked,
    /// A device added at run time does not follow the devices the store knows.
    #[error("device {reference} cannot be added as #{id}: the store knows {known} devices")]
    DeviceOrder {
        reference: String,
        id: u16,
        known: usize,
    },
    /// Opening the store on a blocking thread failed before it returned.
    #[error("opening the store did not finish: {0}")]
    OpenAborted(#[source] tokio::task::JoinError),
}
