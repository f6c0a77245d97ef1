//! How the work of one operation ended: done (finished, on trial after a
//! restart, or applied live and on trial) or failed with why. Plain data,
//! below both the task that runs an operation (`run.rs`) and the config
//! operations that return it (`config_ops.rs`); it must not run anything.

use super::operation::Outcome;
use super::pending::Marker;

/// How the work of an operation ended well.
pub enum Done {
    Finished(Outcome),
    /// Written and waiting for a restart and its trial: still `running`.
    OnTrial(Outcome),
    /// Written and applied live: still `running` through its trial, which
    /// starts once this state is recorded.
    Live(Outcome, Marker),
}

/// How it failed: why, and what it found (a refused config's problems).
pub struct Failed {
    pub error: String,
    pub outcome: Option<Outcome>,
}

impl From<String> for Failed {
    fn from(error: String) -> Self {
        Failed {
            error,
            outcome: None,
        }
    }
}
