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
    #[error("a store reader thread failed: {0}")]
    Reader(String),
}
