//! The operations layer's one error type; the API maps it once to problems.

use super::operation::OpId;

#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("the operations store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Corrupt(String),
    /// The id names an operation asked with other arguments.
    #[error(
        "operation {id} was already asked as {kind} ({args:?}); use a new id for another request"
    )]
    IdReused {
        id: OpId,
        kind: &'static str,
        args: String,
    },
    #[error("no operation {0}")]
    NotFound(OpId),
    /// Too many operations run already.
    #[error("{running} operations run already (at most {max}); retry when one ended")]
    Busy { running: usize, max: usize },
    /// A request's argument is unusable; `field` names it.
    #[error("{field}: {detail}")]
    Invalid { field: &'static str, detail: String },
    /// The operation's bundle is not (or no longer) kept in memory.
    #[error("operation {0} has no bundle kept in memory (only the newest bundles are kept, and none across a restart)")]
    NoBundle(OpId),
    #[error("operation {id} has {chunks} chunks: chunk {chunk} does not exist")]
    NoChunk {
        id: OpId,
        chunk: usize,
        chunks: usize,
    },
}
