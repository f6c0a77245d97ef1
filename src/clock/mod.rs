//! The wall clock's health. Controllers without a working RTC boot with a
//! wrong time and step to the right one when NTP syncs; a correction can
//! also step the clock backwards. Everything the agent stamps (samples,
//! steering deadlines, uplink messages) uses the wall clock, so the agent
//! watches it: whether it is synchronised (`sync.rs`), and every step
//! against the monotonic clock (`step.rs`), checked once a second.
//!
//! It reports (log, `/readyz`, `/metrics`) and lets others ask; it never sets
//! the clock and never holds control up: devices get their safe state
//! whatever the clock says.

pub mod epoch;
pub mod step;
pub mod sync;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::config::ClockConfig;
use crate::metrics::{Collect, Encoder, Kind};
use crate::model::time::now_ms;
pub use epoch::{Epoch, StepEvent};
pub use step::Step;
pub use sync::SyncState;

/// How often the clocks are compared and the synchronisation read.
pub const TICK: Duration = Duration::from_secs(1);

/// What is known of the wall clock; shared by the watching task and readers.
#[derive(Clone)]
pub struct ClockWatch {
    inner: Arc<Inner>,
}

struct Inner {
    sync: Mutex<SyncState>,
    forward: AtomicU64,
    backward: AtomicU64,
    last_step: Mutex<Option<Step>>,
    steps: tokio::sync::broadcast::Sender<StepEvent>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data; keep serving it after a panic elsewhere.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ClockWatch {
    /// Reads the synchronisation once (so the first answers know it) and
    /// starts the watching task.
    pub fn start(
        config: &ClockConfig,
        tracker: &tokio_util::task::TaskTracker,
        cancel: CancellationToken,
    ) -> ClockWatch {
        let state = sync::read(config.sync_source, &config.timesync_file);
        log_sync(None, &state);
        let watch = ClockWatch {
            inner: Arc::new(Inner {
                sync: Mutex::new(state),
                forward: AtomicU64::new(0),
                backward: AtomicU64::new(0),
                last_step: Mutex::new(None),
                steps: tokio::sync::broadcast::channel(16).0,
            }),
        };
        tracker.spawn(watch.clone().run(config.clone(), cancel));
        watch
    }

    async fn run(self, config: ClockConfig, cancel: CancellationToken) {
        let base = Instant::now();
        let mut detector = step::StepDetector::new(config.step_threshold_ms);
        let started = now_ms();
        let mut epoch = Epoch {
            from_ms: started,
            to_ms: started,
            synchronised: self.is_synchronised(),
        };
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            let mono_ms = i64::try_from(base.elapsed().as_millis()).unwrap_or(i64::MAX);
            let wall_ms = now_ms();
            let state = sync::read(config.sync_source, &config.timesync_file);
            let synchronised = matches!(state, SyncState::Synchronised { .. });
            {
                let mut cur = lock(&self.inner.sync);
                if *cur != state {
                    log_sync(Some(&cur), &state);
                    *cur = state;
                }
            }
            match detector.observe(wall_ms, mono_ms) {
                Some(s) => {
                    // The epoch ended at the old clock's reading; what this
                    // tick read of the synchronisation belongs to the next.
                    epoch.to_ms = s.at_ms - s.size_ms;
                    self.record_step(s, epoch);
                    epoch = Epoch {
                        from_ms: s.at_ms,
                        to_ms: s.at_ms,
                        synchronised,
                    };
                }
                None => epoch.synchronised &= synchronised,
            }
        }
    }

    fn is_synchronised(&self) -> bool {
        matches!(self.sync(), SyncState::Synchronised { .. })
    }

    /// Every step from now on, with the epoch it ended.
    pub fn steps(&self) -> tokio::sync::broadcast::Receiver<StepEvent> {
        self.inner.steps.subscribe()
    }

    fn record_step(&self, s: Step, ended: Epoch) {
        let counter = if s.size_ms >= 0 {
            &self.inner.forward
        } else {
            &self.inner.backward
        };
        counter.fetch_add(1, Ordering::Relaxed);
        *lock(&self.inner.last_step) = Some(s);
        tracing::warn!(
            direction = s.direction(),
            size_ms = s.size_ms,
            now = %crate::model::time::format_utc(s.at_ms),
            "the wall clock stepped {} by {}",
            s.direction(),
            step::describe(s.size_ms)
        );
        // Nobody listening is fine.
        let _ = self.inner.steps.send(StepEvent { step: s, ended });
    }

    /// The synchronisation as last read.
    pub fn sync(&self) -> SyncState {
        lock(&self.inner.sync).clone()
    }

    /// The last step found since start.
    pub fn last_step(&self) -> Option<Step> {
        *lock(&self.inner.last_step)
    }

    /// What `/readyz` says while the clock is not synchronised (degraded,
    /// still ready for control).
    pub fn problem(&self) -> Option<String> {
        match self.sync() {
            SyncState::Unsynchronised { from } => Some(format!(
                "not synchronised: {from}; samples and validity times are taken from a clock that may be wrong"
            )),
            _ => None,
        }
    }

    /// A note for answers that compare a partner's time with the agent's:
    /// empty while the clock is synchronised or not watched.
    pub fn note(&self) -> String {
        if self.sync().is_unsynchronised() {
            "; the controller's clock is not synchronised, so its time may be wrong".into()
        } else {
            String::new()
        }
    }
}

fn log_sync(before: Option<&SyncState>, now: &SyncState) {
    match now {
        SyncState::Synchronised { max_error_ms } => {
            tracing::info!(max_error_ms = ?max_error_ms, "the wall clock is synchronised")
        }
        // Normal at boot on a controller without an RTC: said, not warned.
        SyncState::Unsynchronised { from } if before.is_none() => {
            tracing::info!(%from, "the wall clock is not synchronised yet")
        }
        SyncState::Unsynchronised { from } => {
            tracing::warn!(%from, "the wall clock is no longer synchronised")
        }
        SyncState::Unknown { why } if before.is_none() => {
            tracing::info!(%why, "whether the wall clock is synchronised is not known")
        }
        SyncState::Unknown { .. } => {}
    }
}

impl Collect for ClockWatch {
    fn collect(&self, out: &mut Encoder) {
        let (synced, max_error) = match self.sync() {
            SyncState::Synchronised { max_error_ms } => (1.0, max_error_ms),
            SyncState::Unsynchronised { .. } => (0.0, None),
            SyncState::Unknown { .. } => (f64::NAN, None),
        };
        out.family(
            "sitegate_clock_synchronised",
            Kind::Gauge,
            "1 while the wall clock is synchronised (clock.sync_source), 0 while not, NaN when not known.",
        )
        .sample(&[], synced);
        if let Some(ms) = max_error {
            out.family(
                "sitegate_clock_max_error_seconds",
                Kind::Gauge,
                "The kernel's estimate of the wall clock's largest error.",
            )
            .sample(&[], ms as f64 / 1000.0);
        }
        out.family(
            "sitegate_clock_steps_total",
            Kind::Counter,
            "Steps of the wall clock against the monotonic clock (clock.step_threshold_ms or more), by direction.",
        )
        .sample(
            &[("direction", "forward")],
            self.inner.forward.load(Ordering::Relaxed) as f64,
        )
        .sample(
            &[("direction", "backward")],
            self.inner.backward.load(Ordering::Relaxed) as f64,
        );
        out.family(
            "sitegate_clock_last_step_seconds",
            Kind::Gauge,
            "The size of the last step since start (negative: backward), 0 when none.",
        )
        .sample(
            &[],
            self.last_step().map_or(0.0, |s| s.size_ms as f64 / 1000.0),
        );
    }
}
