//! What happened on the site, for a technician: the last [`KEPT`] events with
//! their time, the device or site they concern, their kind and a detail. A
//! device stopped or started answering, a meter was lost, a grid operator's
//! limit or failsafe began or ended, a steering signal expired or ended, the
//! store's commits failed, the wall clock stepped.
//!
//! `observe` decides (pure: what changed between two looks at the agent),
//! `task` looks once a second; the list is served by `GET /events`, the page
//! and `sitegate diag`. The list lives in memory: a restart starts it again
//! (the grid operators' events are kept on disk by `grid_events`, the
//! steering history by the steering store). It observes; it must not change
//! any state it looks at.

pub mod observe;
pub mod task;

use std::collections::VecDeque;
use std::sync::Mutex;

pub use observe::{Observed, SiteObserved};

/// How many events the list keeps, newest first.
pub const KEPT: usize = 200;

/// What an event concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Device(String),
    Site(String),
    /// The agent itself (its store, its clock).
    Agent,
}

/// `device dvc_pv`, `site ste_home`, `agent`: as the log and the support
/// bundle name it.
impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Device(d) => write!(f, "device {d}"),
            Subject::Site(s) => write!(f, "site {s}"),
            Subject::Agent => f.write_str("agent"),
        }
    }
}

/// The kinds of event, as `GET /events` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    DeviceOffline,
    DeviceOnline,
    MeterLost,
    MeterBack,
    LimitBegan,
    LimitEnded,
    FailsafeEntered,
    FailsafeLeft,
    SignalStarted,
    SignalExpired,
    SignalEnded,
    StoreFailing,
    StoreRecovered,
    ClockStepped,
}

impl Kind {
    pub const fn wire_name(self) -> &'static str {
        match self {
            Kind::DeviceOffline => "deviceOffline",
            Kind::DeviceOnline => "deviceOnline",
            Kind::MeterLost => "meterLost",
            Kind::MeterBack => "meterBack",
            Kind::LimitBegan => "limitBegan",
            Kind::LimitEnded => "limitEnded",
            Kind::FailsafeEntered => "failsafeEntered",
            Kind::FailsafeLeft => "failsafeLeft",
            Kind::SignalStarted => "signalStarted",
            Kind::SignalExpired => "signalExpired",
            Kind::SignalEnded => "signalEnded",
            Kind::StoreFailing => "storeFailing",
            Kind::StoreRecovered => "storeRecovered",
            Kind::ClockStepped => "clockStepped",
        }
    }
}

/// One event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// When it was seen (epoch ms).
    pub at_ms: i64,
    pub subject: Subject,
    pub kind: Kind,
    pub detail: String,
}

/// The last [`KEPT`] events; one writer (the task), any number of readers.
#[derive(Debug, Default)]
pub struct EventLog {
    events: Mutex<VecDeque<Event>>,
}

impl EventLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Event>> {
        // A list of plain values: a panic elsewhere leaves it whole.
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds `events` (in the order they happened), dropping the oldest past
    /// [`KEPT`].
    pub fn push(&self, events: impl IntoIterator<Item = Event>) {
        let mut list = self.lock();
        for e in events {
            list.push_front(e);
        }
        list.truncate(KEPT);
    }

    /// The events, newest first.
    pub fn newest_first(&self) -> Vec<Event> {
        self.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Event {
        Event {
            at_ms: ms,
            subject: Subject::Agent,
            kind: Kind::ClockStepped,
            detail: String::new(),
        }
    }

    #[test]
    fn the_log_keeps_the_newest_200_newest_first() {
        let log = EventLog::default();
        log.push((0..150).map(at));
        log.push((150..250).map(at));
        let kept = log.newest_first();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept[0].at_ms, 249);
        assert_eq!(kept[KEPT - 1].at_ms, 50);
    }
}
