//! Heartbeats of the agent's main loops, for the systemd watchdog.
//!
//! Each loop that must keep running (a bus task, the store writer, a site's
//! control loop, the MQTT link) owns a [`Heartbeat`] and beats it on every turn,
//! with a [`BEAT_EVERY`] tick among the things it waits for, so a loop that is
//! idle still beats and a loop stuck in one step does not. The agent collects
//! their [`Pulse`]s; the watchdog pings systemd only while every pulse is fresh.
//!
//! Pure bookkeeping on atomics: no I/O, no locks on the beating side.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// How often an idle loop beats.
pub const BEAT_EVERY: Duration = Duration::from_secs(5);

/// A loop counts as stuck after this long without a beat. Long enough for the
/// slowest legitimate step (a poll that waits out a few Modbus timeouts, a
/// retention chunk on slow flash).
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// Milliseconds since the first use of this module, monotonic.
fn now_ms() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// The beating side, owned by one loop.
#[derive(Debug)]
pub struct Heartbeat {
    last: Arc<AtomicU64>,
    name: Arc<str>,
}

/// The watching side: the name of the loop and the age of its last beat.
#[derive(Clone, Debug)]
pub struct Pulse {
    last: Arc<AtomicU64>,
    name: Arc<str>,
}

impl Heartbeat {
    /// A heartbeat that has just beaten.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            last: Arc::new(AtomicU64::new(now_ms())),
            name: name.into().into(),
        }
    }

    pub fn beat(&self) {
        self.last.store(now_ms(), Ordering::Relaxed);
    }

    pub fn pulse(&self) -> Pulse {
        Pulse {
            last: self.last.clone(),
            name: self.name.clone(),
        }
    }

    /// The tick a loop waits on among its other events (first tick after
    /// [`BEAT_EVERY`], missed ticks not caught up).
    pub fn ticker() -> tokio::time::Interval {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + BEAT_EVERY, BEAT_EVERY);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    }
}

impl Pulse {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Time since the last beat.
    pub fn age(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.last.load(Ordering::Relaxed)))
    }
}

/// The loops whose pulse is older than `stale_after`, with their age: empty
/// means every loop is alive.
pub fn stuck(pulses: &[Pulse], stale_after: Duration) -> Vec<(String, Duration)> {
    pulses
        .iter()
        .map(|p| (p, p.age()))
        .filter(|(_, age)| *age > stale_after)
        .map(|(p, age)| (p.name().to_string(), age))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_that_stops_beating_is_named() {
        let alive = Heartbeat::new("bus lan");
        let stopped = Heartbeat::new("store writer");
        let pulses = [alive.pulse(), stopped.pulse()];
        assert!(stuck(&pulses, Duration::from_millis(200)).is_empty());
        std::thread::sleep(Duration::from_millis(300));
        alive.beat();
        let s = stuck(&pulses, Duration::from_millis(200));
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].0, "store writer");
        assert!(s[0].1 >= Duration::from_millis(200));
    }
}
