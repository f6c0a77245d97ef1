//! The uplink's tasks: spawned on the agent's tracker (so shutdown waits for
//! them) and counted on a tracker of the uplink's own, so the uplink can say
//! how many of the runtime's tasks are its own.
//!
//! It only spawns and counts; what the tasks do is their modules' business.

use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

#[derive(Clone)]
pub(super) struct Tasks {
    /// The agent's tracker, which shutdown waits for.
    agent: TaskTracker,
    /// The uplink's own, for the count.
    own: TaskTracker,
}

impl Tasks {
    pub(super) fn new(agent: &TaskTracker) -> Tasks {
        Tasks {
            agent: agent.clone(),
            own: TaskTracker::new(),
        }
    }

    pub(super) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.agent.spawn(self.own.track_future(task))
    }

    /// The uplink's tasks alive now.
    pub(super) fn alive(&self) -> usize {
        self.own.len()
    }
}
