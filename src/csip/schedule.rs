//! Which CSIP-AUS control is in force: the events of every DER program
//! followed from receipt to their end, and the values in force per control
//! mode, as IEEE 2030.5 (section 12.1.3) and the CACTUS procedures decide:
//!
//! - per mode, the active event of the program with the lowest `primacy`
//!   wins; between programs of equal primacy, or in one program, the one
//!   created last;
//! - with no active event for a mode, the DefaultDERControl of the program
//!   with the lowest primacy that sets it holds (not the tightest default:
//!   GEN-10's last step);
//! - an event is superseded when an event that takes precedence over it,
//!   overlaps it in time and sets every mode it sets has started (or
//!   starts no later than it does): it answers 7 and never runs again. An
//!   event only partly overridden keeps the modes no other event takes;
//! - an event's start and duration are moved by its randomization, chosen
//!   once when it is first seen; supersession uses the times the server
//!   gave, so randomization never makes back-to-back events overlap;
//! - the server's `EventStatus` cancels (6) or supersedes (7) an event; an
//!   event that leaves the list is not cancelled (2030.5: a client SHALL
//!   NOT assume so), it runs to its end;
//! - an event received after its end is refused as expired (254).
//!
//! Pure: the times are the server's, in ms, passed in; the randomization is
//! passed in. The client task (`client/`) feeds it what it polls and posts
//! the responses it returns.

use std::collections::{BTreeMap, BTreeSet};

use super::resource::program::{Control, ControlBase, DefaultControl, EventStatus, Mode, Program};
use super::resource::response::ResponseStatus;

mod types;

pub use types::{Event, InForce, InForceValue, Origin, Phase, ProgramState, Tracked};

/// Every program and event the client follows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    pub programs: BTreeMap<String, ProgramState>,
    /// By mRID.
    pub events: BTreeMap<String, Tracked>,
    /// The next moment [`Schedule::advance`] has work: an event's start or
    /// end; `None` after a change (at once).
    next_check_ms: Option<i64>,
}

/// How far an ended event is kept once the server no longer lists it, ms:
/// long enough not to take it as new if a page of an old list shows it.
pub const KEPT_AFTER_END_MS: i64 = 24 * 3600 * 1000;

impl Schedule {
    /// The programs of DERProgramList `list`, as just read. A program no
    /// longer listed loses its default; its events run to their end.
    pub fn set_programs(&mut self, list: &str, programs: &[Program]) {
        self.next_check_ms = None;
        let (old, kept): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut self.programs)
            .into_iter()
            .partition(|(_, p)| p.list == list);
        self.programs = kept;
        for p in programs {
            let default = old.get(&p.href).and_then(|o| o.default.clone());
            self.programs.insert(
                p.href.clone(),
                ProgramState {
                    list: list.to_string(),
                    href: p.href.clone(),
                    mrid: p.mrid.clone(),
                    primacy: p.primacy,
                    default,
                },
            );
            for e in self.events.values_mut().filter(|e| e.program == p.href) {
                e.primacy = p.primacy;
            }
        }
    }

    /// The default of `program` (`None`: it has none now).
    pub fn set_default(&mut self, program: &str, default: Option<DefaultControl>) {
        self.next_check_ms = None;
        if let Some(p) = self.programs.get_mut(program) {
            p.default = default;
        }
    }

    /// The whole event list of `program` as just read. New events are
    /// received (or refused as expired), a status the server changed is
    /// taken, and events it no longer lists are marked so. `randomize`
    /// turns a randomization bound (s, either sign) into an offset.
    pub fn set_events(
        &mut self,
        program: &str,
        controls: Vec<Control>,
        now_ms: i64,
        randomize: &mut dyn FnMut(i16) -> i64,
    ) -> Vec<Event> {
        self.next_check_ms = None;
        let primacy = self.programs.get(program).map_or(u8::MAX, |p| p.primacy);
        let listed: BTreeSet<String> = controls.iter().map(|c| c.mrid.clone()).collect();
        let mut events = Vec::new();
        for c in controls {
            match self.events.get_mut(&c.mrid) {
                Some(t) => {
                    t.listed = true;
                    let over = match c.status {
                        EventStatus::Cancelled | EventStatus::CancelledWithRandomization => {
                            Some((Phase::Cancelled, ResponseStatus::Cancelled))
                        }
                        EventStatus::Superseded => {
                            Some((Phase::Superseded, ResponseStatus::Superseded))
                        }
                        _ => None,
                    };
                    if let Some((phase, status)) = over.filter(|_| !t.phase.is_over()) {
                        t.phase = phase;
                        events.push(event(t, status, now_ms));
                    }
                    // Events are immutable but for their status (2030.5
                    // section 12.1.3.1); a server's new reply address is
                    // taken all the same.
                    t.control.status = c.status;
                    t.control.reply_to = c.reply_to.or(t.control.reply_to.take());
                }
                None => {
                    let mut t = Tracked {
                        start_offset_s: randomize(c.randomize_start_s),
                        duration_offset_s: randomize(c.randomize_duration_s),
                        control: c,
                        program: program.to_string(),
                        primacy,
                        phase: Phase::Scheduled,
                        listed: true,
                    };
                    let refused = match t.control.status {
                        EventStatus::Cancelled | EventStatus::CancelledWithRandomization => {
                            Some((Phase::Cancelled, ResponseStatus::Cancelled))
                        }
                        EventStatus::Superseded => {
                            Some((Phase::Superseded, ResponseStatus::Superseded))
                        }
                        _ if t.control.end_s() * 1000 <= now_ms => {
                            Some((Phase::Expired, ResponseStatus::Expired))
                        }
                        _ => None,
                    };
                    match refused {
                        // A cancelled or superseded event the client never
                        // saw running is not answered: there was nothing
                        // to receive.
                        Some((phase, ResponseStatus::Expired)) => {
                            t.phase = phase;
                            events.push(event(&t, ResponseStatus::Expired, now_ms));
                        }
                        Some((phase, _)) => t.phase = phase,
                        None => events.push(event(&t, ResponseStatus::Received, now_ms)),
                    }
                    self.events.insert(t.control.mrid.clone(), t);
                }
            }
        }
        for t in self.events.values_mut().filter(|t| t.program == program) {
            if !listed.contains(&t.control.mrid) {
                t.listed = false;
            }
        }
        events
    }

    /// Moves every event on to `now_ms`: superseded, started, completed, in
    /// the order they happened. Ended events the server no longer lists are
    /// forgotten a day after their end.
    pub fn advance(&mut self, now_ms: i64) -> Vec<Event> {
        if self.next_check_ms.is_some_and(|t| now_ms < t) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let superseded = self.superseded(now_ms);
        for mrid in superseded {
            if let Some(t) = self.events.get_mut(&mrid) {
                t.phase = Phase::Superseded;
                out.push(event(t, ResponseStatus::Superseded, now_ms));
            }
        }
        for t in self.events.values_mut() {
            let (start, end) = t.effective_ms();
            if t.phase == Phase::Scheduled && now_ms >= start {
                t.phase = Phase::Active;
                out.push(event(
                    t,
                    ResponseStatus::Started,
                    start.max(now_ms.min(end)),
                ));
            }
            if t.phase == Phase::Active && now_ms >= end {
                t.phase = Phase::Completed;
                out.push(event(t, ResponseStatus::Completed, end));
            }
        }
        out.sort_by_key(|e| e.at_ms);
        self.events.retain(|_, t| {
            t.listed || !t.phase.is_over() || now_ms - t.effective_ms().1 < KEPT_AFTER_END_MS
        });
        // Nothing moves before the next start or end (or the next prune).
        let prune = self
            .events
            .values()
            .filter(|t| !t.listed && t.phase.is_over())
            .map(|t| t.effective_ms().1 + KEPT_AFTER_END_MS)
            .min();
        self.next_check_ms = [self.next_change_ms(now_ms), prune]
            .into_iter()
            .flatten()
            .min()
            .or(Some(i64::MAX));
        out
    }

    /// The events not over that another supersedes at `now_ms`. Only events
    /// that overlap can supersede: each is compared with those starting
    /// within the longest duration before its end, found by a binary search
    /// over the events by start (10,000 back-to-back events take 10,000
    /// small searches, not 10^8 comparisons).
    fn superseded(&self, now_ms: i64) -> Vec<String> {
        let mut by_start: Vec<&Tracked> = self
            .events
            .values()
            .filter(|d| !matches!(d.phase, Phase::Cancelled | Phase::Expired))
            .collect();
        by_start.sort_by_key(|d| d.control.start_s);
        let longest = by_start
            .iter()
            .map(|d| i64::from(d.control.duration_s))
            .max()
            .unwrap_or(0);
        self.events
            .values()
            .filter(|c| !c.phase.is_over())
            .filter(|c| {
                let from = c.control.start_s - longest;
                let first = by_start.partition_point(|d| d.control.start_s < from);
                by_start[first..]
                    .iter()
                    .take_while(|d| d.control.start_s < c.control.end_s())
                    .any(|d| supersedes(d, c, now_ms))
            })
            .map(|c| c.control.mrid.clone())
            .collect()
    }

    /// The values in force at `now_ms` (after [`Schedule::advance`] to it).
    pub fn in_force(&self, now_ms: i64) -> InForce {
        let mut by_primacy: Vec<&ProgramState> = self.programs.values().collect();
        by_primacy.sort_by_key(|p| (p.primacy, p.href.clone()));
        let mut modes = BTreeMap::new();
        for m in Mode::ALL {
            let event = self
                .events
                .values()
                .filter(|t| t.phase == Phase::Active)
                .filter(|t| {
                    let (start, end) = t.effective_ms();
                    start <= now_ms && now_ms < end
                })
                .filter_map(|t| t.control.base.value(m).map(|v| (t, v)))
                .reduce(|a, b| if b.0.precedes(a.0) { b } else { a });
            let value = match event {
                Some((t, value)) => Some(InForceValue {
                    value,
                    origin: Origin::Event {
                        mrid: t.control.mrid.clone(),
                        program: t.program.clone(),
                        primacy: t.primacy,
                        until_ms: t.effective_ms().1,
                        ramp_s: t.control.base.ramp_s,
                    },
                }),
                None => by_primacy.iter().find_map(|p| {
                    let d = p.default.as_ref()?;
                    d.base.value(m).map(|value| InForceValue {
                        value,
                        origin: Origin::Default {
                            mrid: d.mrid.clone(),
                            program: p.href.clone(),
                            primacy: p.primacy,
                        },
                    })
                }),
            };
            if let Some(v) = value {
                modes.insert(m, v);
            }
        }
        InForce {
            modes,
            set_grad_w: by_primacy
                .iter()
                .find_map(|p| p.default.as_ref().and_then(|d| d.set_grad_w)),
        }
    }

    /// The next moment an event starts or ends after `now_ms`, if any: when
    /// the client must look again without a poll.
    pub fn next_change_ms(&self, now_ms: i64) -> Option<i64> {
        self.events
            .values()
            .filter(|t| !t.phase.is_over())
            .flat_map(|t| {
                let (s, e) = t.effective_ms();
                [s, e, t.control.start_s * 1000]
            })
            .filter(|t| *t > now_ms)
            .min()
    }

    /// The events not over yet, by start.
    pub fn pending(&self) -> Vec<&Tracked> {
        let mut v: Vec<&Tracked> = self
            .events
            .values()
            .filter(|t| !t.phase.is_over())
            .collect();
        v.sort_by_key(|t| t.effective_ms().0);
        v
    }
}

/// Whether `d` supersedes `c` at `now_ms`: it takes precedence, overlaps
/// it, sets every mode `c` sets, and has started (or starts no later than
/// `c`).
fn supersedes(d: &Tracked, c: &Tracked, now_ms: i64) -> bool {
    if matches!(d.phase, Phase::Cancelled | Phase::Expired) || !d.precedes(c) {
        return false;
    }
    let (cs, ce) = c.nominal_ms();
    let (ds, de) = d.nominal_ms();
    let modes = c.control.base.modes();
    !modes.is_empty()
        && ds < ce
        && cs < de
        && covers(&d.control.base, &modes)
        && (ds <= cs || now_ms >= ds)
}

fn covers(base: &ControlBase, modes: &[Mode]) -> bool {
    modes.iter().all(|m| base.value(*m).is_some())
}

fn event(t: &Tracked, status: ResponseStatus, at_ms: i64) -> Event {
    Event {
        mrid: t.control.mrid.clone(),
        program: t.program.clone(),
        status,
        at_ms,
        reply_to: t.control.reply_to.clone(),
        response_required: t.control.response_required,
    }
}

#[cfg(test)]
mod tests;
