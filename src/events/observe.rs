//! What changed between two looks at the agent, as events: pure, so every
//! rule is a unit test. The task (`task.rs`) makes each [`Observed`]; this
//! file only compares two of them.
//!
//! A device that never answered since start is reported once it has been
//! tried; a device online from the first look is not (a thousand devices
//! would fill the list at every start). A signal component that is gone
//! once its `validUntil` has passed expired; gone before, it ended (replaced,
//! deleted, or cut short by a newer request).

use super::{Event, Kind, Subject};
use crate::clock::Step;

/// One device as seen: `None` until its first poll was tried.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceObserved {
    pub reference: String,
    pub online: Option<bool>,
    /// The last poll's error, while offline.
    pub error: Option<String>,
}

/// One grid operator's limit in force.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitObserved {
    /// Source and kind (`eebus consumption`): what makes it the same limit.
    pub key: String,
    pub value: f64,
    pub failsafe: bool,
    /// The operator's reference (a CSIP-AUS control's mRID, the EEBus use
    /// case's state), for the detail.
    pub reference: Option<String>,
}

/// One active signal component.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalObserved {
    /// `energyStorageSetting`, `productionCurtailment`, ...
    pub component: &'static str,
    pub request_id: String,
    pub until_ms: i64,
}

/// One site as seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteObserved {
    pub reference: String,
    /// The grid loop is in its safe state: the meter is offline or stale.
    pub meter_lost: bool,
    pub signals: Vec<SignalObserved>,
    pub limits: Vec<LimitObserved>,
}

/// The agent as seen at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub devices: Vec<DeviceObserved>,
    pub sites: Vec<SiteObserved>,
    /// Why the store's commits fail, while they do.
    pub store_problem: Option<String>,
    /// The last step of the wall clock.
    pub clock_step: Option<Step>,
}

/// The events between `before` and `now`, seen at `at_ms`, in a fixed
/// order: the agent, then devices, then sites.
pub fn changes(before: &Observed, now: &Observed, at_ms: i64) -> Vec<Event> {
    let mut out = Vec::new();
    let mut add = |subject: Subject, kind: Kind, detail: String| {
        out.push(Event {
            at_ms,
            subject,
            kind,
            detail,
        });
    };
    agent_changes(before, now, &mut add);
    device_changes(before, now, &mut add);
    for s in &now.sites {
        let empty = SiteObserved::default();
        let b = before
            .sites
            .iter()
            .find(|b| b.reference == s.reference)
            .unwrap_or(&empty);
        let subject = || Subject::Site(s.reference.clone());
        match (b.meter_lost, s.meter_lost) {
            (false, true) => add(
                subject(),
                Kind::MeterLost,
                "the grid loop holds its safe state".into(),
            ),
            (true, false) => add(
                subject(),
                Kind::MeterBack,
                "the grid loop follows the meter again".into(),
            ),
            _ => {}
        }
        limit_changes(b, s, &mut add);
        signal_changes(b, s, at_ms, &mut add);
    }
    out
}

/// The agent's own events: the store failing or recovered, a step of the
/// wall clock.
fn agent_changes(before: &Observed, now: &Observed, add: &mut impl FnMut(Subject, Kind, String)) {
    match (&before.store_problem, &now.store_problem) {
        (None, Some(why)) => add(Subject::Agent, Kind::StoreFailing, why.clone()),
        (Some(why), None) => add(
            Subject::Agent,
            Kind::StoreRecovered,
            format!("after: {why}"),
        ),
        _ => {}
    }
    if let Some(step) = now.clock_step.filter(|s| before.clock_step != Some(*s)) {
        let detail = format!(
            "{} ms {}, at {}",
            step.size_ms.abs(),
            step.direction(),
            crate::model::time::format_utc(step.at_ms)
        );
        add(Subject::Agent, Kind::ClockStepped, detail);
    }
}

/// Each device gone offline or answering again.
fn device_changes(before: &Observed, now: &Observed, add: &mut impl FnMut(Subject, Kind, String)) {
    // Devices keep their place (the live view only appends): the one
    // before is at the same index, no search through a thousand.
    for (i, d) in now.devices.iter().enumerate() {
        let was = before.devices.get(i).filter(|b| b.reference == d.reference);
        let was_online = was.and_then(|b| b.online);
        let subject = || Subject::Device(d.reference.clone());
        match (was_online, d.online) {
            (Some(true) | None, Some(false)) => add(
                subject(),
                Kind::DeviceOffline,
                d.error.clone().unwrap_or_else(|| "no answer".into()),
            ),
            (Some(false), Some(true)) => add(subject(), Kind::DeviceOnline, "answers again".into()),
            _ => {}
        }
    }
}

/// A site's operator limits begun, changed, ended, or in or out of their
/// failsafe, from `b` (before) to `s`.
fn limit_changes(b: &SiteObserved, s: &SiteObserved, add: &mut impl FnMut(Subject, Kind, String)) {
    let subject = || Subject::Site(s.reference.clone());
    for l in &s.limits {
        match b.limits.iter().find(|x| x.key == l.key) {
            None if l.failsafe => add(subject(), Kind::FailsafeEntered, limit(l)),
            None => add(subject(), Kind::LimitBegan, limit(l)),
            Some(x) if !x.failsafe && l.failsafe => add(subject(), Kind::FailsafeEntered, limit(l)),
            Some(x) if x.failsafe && !l.failsafe => add(subject(), Kind::FailsafeLeft, limit(l)),
            Some(x) if x.value != l.value => add(subject(), Kind::LimitBegan, limit(l)),
            Some(_) => {}
        }
    }
    for x in &b.limits {
        if !s.limits.iter().any(|l| l.key == x.key) {
            let kind = if x.failsafe {
                Kind::FailsafeLeft
            } else {
                Kind::LimitEnded
            };
            add(subject(), kind, limit(x));
        }
    }
}

/// A site's signal components started, and those gone: expired when their
/// `validUntil` has passed at `at_ms`, else ended.
fn signal_changes(
    b: &SiteObserved,
    s: &SiteObserved,
    at_ms: i64,
    add: &mut impl FnMut(Subject, Kind, String),
) {
    let subject = || Subject::Site(s.reference.clone());
    for sig in &s.signals {
        let same =
            |x: &&SignalObserved| x.component == sig.component && x.request_id == sig.request_id;
        if !b.signals.iter().any(|x| same(&x)) {
            let until = crate::model::time::format_utc(sig.until_ms);
            add(
                subject(),
                Kind::SignalStarted,
                format!(
                    "{} until {until} (request {})",
                    sig.component, sig.request_id
                ),
            );
        }
    }
    for x in &b.signals {
        let same = |n: &SignalObserved| n.component == x.component && n.request_id == x.request_id;
        if s.signals.iter().any(same) {
            continue;
        }
        let until = crate::model::time::format_utc(x.until_ms);
        let detail = format!(
            "{} (request {}, valid until {until})",
            x.component, x.request_id
        );
        let kind = if at_ms >= x.until_ms {
            Kind::SignalExpired
        } else {
            Kind::SignalEnded
        };
        add(subject(), kind, detail);
    }
}

fn limit(l: &LimitObserved) -> String {
    let reference = l
        .reference
        .as_ref()
        .map(|r| format!(", {r}"))
        .unwrap_or_default();
    let failsafe = if l.failsafe { ", failsafe" } else { "" };
    format!("{} {} W{reference}{failsafe}", l.key, l.value)
}

#[cfg(test)]
mod tests;
