//! The actuators' own stop: their tasks apart from the agent's others, and the
//! request to release their devices by a deadline. `Agent::shutdown` asks for
//! it and waits for them while the bus tasks still run, then stops the rest.
//!
//! It decides nothing and writes nothing: each actuator runs its own release
//! (`actuator/release.rs`), and what it releases is `stop.rs`'s. It must not wait
//! past the deadline it sets (plus the time to log what did not finish).

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// Time after the deadline for actuators to log and record what did not finish.
const LOG_MARGIN: Duration = Duration::from_millis(100);

/// Held by the agent: spawns the actuators and stops them.
pub struct ActuatorStop {
    deadline: watch::Sender<Option<Instant>>,
    tracker: TaskTracker,
}

/// Held by each actuator: resolves once the stop is asked for.
#[derive(Clone)]
pub struct StopSignal(watch::Receiver<Option<Instant>>);

impl StopSignal {
    /// The deadline of the releases, once the stop is asked for; never
    /// resolves when the [`ActuatorStop`] is dropped without asking.
    pub async fn requested(&mut self) -> Instant {
        let asked = self.0.wait_for(Option::is_some).await.map(|d| *d);
        match asked {
            Ok(Some(at)) => at,
            _ => std::future::pending().await,
        }
    }
}

impl Default for ActuatorStop {
    fn default() -> Self {
        Self::new()
    }
}

impl ActuatorStop {
    pub fn new() -> Self {
        Self {
            deadline: watch::channel(None).0,
            tracker: TaskTracker::new(),
        }
    }

    /// What an actuator listens to.
    pub fn signal(&self) -> StopSignal {
        StopSignal(self.deadline.subscribe())
    }

    /// Runs an actuator's task among the actuators.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tracker.spawn(task);
    }

    /// Asks every actuator to release its device within `bound` and waits for
    /// them, not much longer than `bound`. Returns how many were still running
    /// then (each has logged why).
    pub async fn release_all(&self, bound: Duration) -> usize {
        let deadline = Instant::now() + bound;
        self.deadline.send_replace(Some(deadline));
        self.tracker.close();
        let _ = tokio::time::timeout_at(deadline + LOG_MARGIN, self.tracker.wait()).await;
        self.tracker.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn waits_for_the_actuators_but_not_past_the_bound() {
        let stop = ActuatorStop::new();
        for hang in [false, true] {
            let mut signal = stop.signal();
            stop.spawn(async move {
                signal.requested().await;
                if hang {
                    std::future::pending::<()>().await;
                }
            });
        }
        let started = Instant::now();
        assert_eq!(stop.release_all(BOUND).await, 1, "the one that hangs");
        let took = started.elapsed();
        assert!(took >= BOUND, "{took:?}");
        // Liveness, not a timing figure: it does not wait for the one that hangs.
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[tokio::test]
    async fn returns_once_every_actuator_is_done() {
        let stop = ActuatorStop::new();
        let mut signal = stop.signal();
        stop.spawn(async move {
            signal.requested().await;
        });
        assert_eq!(stop.release_all(Duration::from_secs(30)).await, 0);
    }

    #[tokio::test]
    async fn a_signal_without_its_handle_never_resolves() {
        let stop = ActuatorStop::new();
        let mut signal = stop.signal();
        drop(stop);
        let waited = tokio::time::timeout(BOUND, signal.requested()).await;
        assert!(waited.is_err());
    }
}
