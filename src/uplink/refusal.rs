//! What the link does when an MQTT 5 broker refuses publishes (a PUBACK with a
//! reason code of 0x80 or more: not authorized, quota exceeded, ...): a refused
//! publish is not a delivery.
//!
//! A *spell* starts at the first refusal and ends once nothing refused is
//! outstanding and the broker accepted a publish again; the link logs its start
//! once (topic and reason) and its end once. Within a spell the refused kind of
//! traffic is held back for a backoff delay ([`RETRY`], full jitter; the
//! attempt grows with every refused round and starts again with the next
//! spell), then retried:
//!
//! - refused telemetry rows stay in the outbox; while held, no telemetry is sent,
//!   and the retry sends every row not yet acknowledged again, oldest first;
//! - refused retained state (status, listing, steering) is published again at
//!   the retry;
//! - refused RPC answers are not retried: the requester asks again with the same
//!   id and gets the recorded answer.
//!
//! A row refused for good stays until the outbox's age or size cap evicts it,
//! which is logged and counted like every eviction; the spell then ends.
//!
//! Pure: time and randomness are passed in; no I/O, no logging.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use super::backoff::RETRY;
use super::flight::Tag;

/// A PUBACK reason code of 0x80 or more (MQTT 5, section 3.4.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reason(pub u8);

impl Reason {
    /// The refusal codes MQTT 5 defines for PUBACK, in the order of
    /// [`Reason::index`].
    pub const KNOWN: [u8; 7] = [0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99];

    /// The metric label and log name.
    pub fn name(self) -> &'static str {
        match self.0 {
            0x80 => "unspecified_error",
            0x83 => "implementation_specific_error",
            0x87 => "not_authorized",
            0x90 => "topic_name_invalid",
            0x91 => "packet_identifier_in_use",
            0x97 => "quota_exceeded",
            0x99 => "payload_format_invalid",
            _ => "other",
        }
    }

    /// Position in [`Reason::KNOWN`], or `KNOWN.len()` for a code MQTT 5 does
    /// not define for PUBACK.
    pub fn index(self) -> usize {
        Self::KNOWN
            .iter()
            .position(|c| *c == self.0)
            .unwrap_or(Self::KNOWN.len())
    }

    /// Every label, in index order ("other" last).
    pub fn labels() -> impl Iterator<Item = &'static str> {
        Self::KNOWN
            .iter()
            .map(|c| Reason(*c).name())
            .chain(std::iter::once("other"))
    }
}

/// One spell of refusals.
#[derive(Debug)]
struct Spell {
    since: Instant,
    refused: u64,
    attempt: u32,
    /// Held back until then (`None`: retrying now).
    hold_until: Option<Instant>,
    /// Telemetry seqs refused and not accepted since.
    rows: BTreeSet<u64>,
    /// A retained publish was refused since the last retry sent them all
    /// again. One accepted is no sign for the others: status, listing and
    /// steering states are separate topics, and a broker's rules may change
    /// between two of them.
    retained: bool,
}

/// How a spell ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpellEnd {
    pub refused: u64,
    pub lasted: Duration,
}

/// What to send again when a hold ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Send every outbox row not yet acknowledged again, oldest first.
    pub telemetry: bool,
    /// Publish status, listing and steering states again.
    pub retained: bool,
}

/// The link's refusal state.
#[derive(Debug, Default)]
pub struct Refusals {
    spell: Option<Spell>,
}

impl Refusals {
    /// The broker refused a publish carrying `tag` at `now`. Returns true when
    /// this starts a spell (the one moment to log it).
    pub fn refused(&mut self, now: Instant, tag: Tag, random: u64) -> bool {
        let started = self.spell.is_none();
        let spell = self.spell.get_or_insert_with(|| Spell {
            since: now,
            refused: 0,
            attempt: 0,
            hold_until: None,
            rows: BTreeSet::new(),
            retained: false,
        });
        spell.refused += 1;
        match tag {
            Tag::Telemetry(seq) => {
                spell.rows.insert(seq);
            }
            Tag::Retained => spell.retained = true,
            Tag::Answer => {}
        }
        // The first refusal of a round holds back; the rest of the round (what
        // was already in flight) is counted into the same hold.
        if spell.hold_until.is_none() {
            spell.hold_until = Some(now + RETRY.full_jitter(spell.attempt, random));
            spell.attempt = spell.attempt.saturating_add(1);
        }
        started
    }

    /// The broker accepted a publish carrying `tag`. Returns how the spell went
    /// when this ends it.
    pub fn accepted(&mut self, now: Instant, tag: Tag) -> Option<SpellEnd> {
        let spell = self.spell.as_mut()?;
        match tag {
            Tag::Telemetry(seq) => {
                spell.rows.remove(&seq);
            }
            Tag::Retained | Tag::Answer => {}
        }
        if spell.hold_until.is_some() || !spell.rows.is_empty() || spell.retained {
            return None;
        }
        let end = SpellEnd {
            refused: spell.refused,
            lasted: now.saturating_duration_since(spell.since),
        };
        self.spell = None;
        Some(end)
    }

    /// True while a spell is on (the broker refused something that was not
    /// accepted again yet).
    pub fn active(&self) -> bool {
        self.spell.is_some()
    }

    /// When the current hold ends, if one is on.
    pub fn hold_until(&self) -> Option<Instant> {
        self.spell.as_ref().and_then(|s| s.hold_until)
    }

    /// Telemetry waits: refused rows are outstanding and the hold is on.
    pub fn holds_telemetry(&self) -> bool {
        self.spell
            .as_ref()
            .is_some_and(|s| s.hold_until.is_some() && !s.rows.is_empty())
    }

    /// Retained state waits: it was refused and the hold is on.
    pub fn holds_retained(&self) -> bool {
        self.spell
            .as_ref()
            .is_some_and(|s| s.hold_until.is_some() && s.retained)
    }

    /// Moves the end of the hold to `until` (the link waits for what is still in
    /// flight before it sends rows again).
    pub fn postpone(&mut self, until: Instant) {
        if let Some(s) = self.spell.as_mut().filter(|s| s.hold_until.is_some()) {
            s.hold_until = Some(until);
        }
    }

    /// The hold is over: says what to send again. `oldest_row` is the oldest
    /// seq still in the outbox: refused rows older than it were evicted by the
    /// cap and are not waited for.
    pub fn retry(&mut self, oldest_row: Option<u64>) -> Retry {
        let Some(s) = self.spell.as_mut() else {
            return Retry {
                telemetry: false,
                retained: false,
            };
        };
        s.hold_until = None;
        let telemetry = !s.rows.is_empty();
        match oldest_row {
            Some(oldest) => s.rows.retain(|seq| *seq >= oldest),
            None => s.rows.clear(),
        }
        Retry {
            telemetry,
            retained: std::mem::take(&mut s.retained),
        }
    }

    /// A new connection: it sends everything again anyway, so the hold ends.
    pub fn reconnected(&mut self) {
        if let Some(s) = self.spell.as_mut() {
            s.hold_until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn reasons_have_names_and_slots() {
        assert_eq!(Reason(0x87).name(), "not_authorized");
        assert_eq!(Reason(0x97).index(), 5);
        assert_eq!(Reason(0x42).index(), Reason::KNOWN.len());
        assert_eq!(Reason(0x42).name(), "other");
        assert_eq!(Reason::labels().count(), Reason::KNOWN.len() + 1);
    }

    #[test]
    fn a_spell_holds_retries_with_growing_delays_and_ends_on_acceptance() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        assert!(!r.active() && r.hold_until().is_none());
        // Refused: a spell starts and telemetry is held for the first window.
        assert!(r.refused(t0, Tag::Telemetry(1), 999));
        assert!(r.holds_telemetry() && !r.holds_retained());
        assert_eq!(r.hold_until(), Some(t0 + ms(999)));
        // What was in flight is refused too: same spell, same hold.
        assert!(!r.refused(t0 + ms(1), Tag::Telemetry(2), 0));
        assert!(!r.refused(t0 + ms(1), Tag::Retained, 0));
        assert_eq!(r.hold_until(), Some(t0 + ms(999)));
        assert!(r.holds_retained());
        // Accepted rows during the hold do not end it.
        assert_eq!(r.accepted(t0 + ms(2), Tag::Telemetry(3)), None);
        let retry = r.retry(Some(1));
        assert_eq!(
            retry,
            Retry {
                telemetry: true,
                retained: true
            }
        );
        assert!(!r.holds_telemetry());
        // Refused again: the next window is twice as wide.
        assert!(!r.refused(t0 + ms(1000), Tag::Telemetry(1), 1999));
        assert_eq!(r.hold_until(), Some(t0 + ms(1000) + ms(1999)));
        r.retry(Some(1));
        // Both rows and the retained state get through: the spell ends with the
        // last of them.
        assert_eq!(r.accepted(t0 + ms(3000), Tag::Telemetry(1)), None);
        assert_eq!(r.accepted(t0 + ms(3000), Tag::Retained), None);
        assert_eq!(
            r.accepted(t0 + ms(3500), Tag::Telemetry(2)),
            Some(SpellEnd {
                refused: 4,
                lasted: ms(3500)
            })
        );
        assert!(!r.active());
        // A new spell starts from the first window again.
        assert!(r.refused(t0 + ms(4000), Tag::Answer, 1000));
        assert_eq!(r.hold_until(), Some(t0 + ms(5000)));
        assert!(!r.holds_telemetry() && !r.holds_retained());
    }

    /// The retry publishes status and listing again; the broker's rules
    /// change between the two (the status refused, the listing accepted):
    /// the status is still sent again at the next retry.
    #[test]
    fn one_retained_publish_accepted_does_not_stand_for_another_refused() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        assert!(r.refused(t0, Tag::Retained, 100));
        assert!(r.retry(None).retained);
        assert!(!r.refused(t0 + ms(200), Tag::Retained, 100));
        assert_eq!(r.accepted(t0 + ms(201), Tag::Retained), None);
        assert!(r.holds_retained());
        assert!(r.retry(None).retained);
        // Both get through now: the spell ends with the next acceptance.
        assert!(r.accepted(t0 + ms(400), Tag::Retained).is_some());
        assert!(!r.active());
    }

    #[test]
    fn refused_rows_evicted_by_the_cap_are_not_waited_for() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        r.refused(t0, Tag::Telemetry(5), 0);
        r.refused(t0, Tag::Telemetry(9), 0);
        // The cap evicted everything up to 7: only 9 is outstanding.
        assert!(r.retry(Some(8)).telemetry);
        assert_eq!(
            r.accepted(t0, Tag::Telemetry(9)).map(|e| e.refused),
            Some(2)
        );
    }

    #[test]
    fn a_reconnect_ends_the_hold_and_postpone_moves_it() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        r.refused(t0, Tag::Telemetry(1), 500);
        r.postpone(t0 + ms(700));
        assert_eq!(r.hold_until(), Some(t0 + ms(700)));
        r.reconnected();
        assert_eq!(r.hold_until(), None);
        assert!(r.active());
        assert!(r.accepted(t0, Tag::Telemetry(1)).is_some());
        // Without a hold, postpone does nothing.
        r.postpone(t0);
        assert_eq!(r.hold_until(), None);
    }
}
