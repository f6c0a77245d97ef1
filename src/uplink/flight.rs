//! Pure bookkeeping for the link task: which packet id carries which publish (an
//! outbox row, retained state, an RPC answer) to which topic, and how fast the
//! backlog may drain.
//!
//! rumqttc reports `Sent(pkid)` for each QoS 1 publish in the order the requests
//! were queued, and the PUBACK (accepted or refused) with the same packet id.
//! [`Flight`] matches the two so that a PUBACK names the `seq` to delete, or the
//! topic the broker refused. [`Pacer`] is the backlog's token bucket. No I/O, no clock reads:
//! the caller passes `Instant`s.

use std::collections::{HashMap, VecDeque};

use tokio::time::Instant;

use crate::util::TokenBucket;

/// What a queued publish carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// An outbox row: deleted on an accepting PUBACK, kept on a refusal.
    Telemetry(u64),
    /// Status, listing or a steering state: published again after a refusal.
    Retained,
    /// An RPC answer: its requester retries with the same id.
    Answer,
}

/// A publish on its way, as the PUBACK will name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    pub tag: Tag,
    pub topic: String,
}

/// Publishes queued or unacknowledged on the current connection.
#[derive(Debug, Default)]
pub struct Flight {
    queued: VecDeque<Publish>,
    unacked: HashMap<u16, Publish>,
    telemetry: usize,
}

impl Flight {
    /// A publish to `topic` was handed to the client.
    pub fn queued(&mut self, tag: Tag, topic: impl Into<String>) {
        if let Tag::Telemetry(_) = tag {
            self.telemetry += 1;
        }
        self.queued.push_back(Publish {
            tag,
            topic: topic.into(),
        });
    }

    /// The client wrote the oldest queued publish with packet id `pkid`.
    pub fn sent(&mut self, pkid: u16) {
        match self.queued.pop_front() {
            Some(p) => {
                self.unacked.insert(pkid, p);
            }
            None => tracing::debug!(pkid, "publish sent that the uplink did not queue"),
        }
    }

    /// The PUBACK for `pkid` came (accepting or refusing): what it was for.
    pub fn settled(&mut self, pkid: u16) -> Option<Publish> {
        let p = self.unacked.remove(&pkid)?;
        if let Tag::Telemetry(_) = p.tag {
            self.telemetry -= 1;
        }
        Some(p)
    }

    /// Telemetry queued or sent but not acknowledged.
    pub fn telemetry_in_flight(&self) -> usize {
        self.telemetry
    }

    /// The connection is gone: nothing queued on it will be acknowledged.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

/// The backlog's pace: a [`TokenBucket`] of `drain_rate` rows a second with a
/// tenth of a second's worth (at least one) saved up, on tokio's clock.
#[derive(Debug, Clone)]
pub struct Pacer(TokenBucket);

impl Pacer {
    /// Starts full.
    pub fn new(rate_per_s: u32, now: Instant) -> Self {
        let rate = f64::from(rate_per_s.max(1));
        let burst = (rate / 10.0).max(1.0);
        Self(TokenBucket::full(rate, burst, now))
    }

    /// Takes up to `want` whole tokens; returns how many it took.
    pub fn take(&mut self, now: Instant, want: usize) -> usize {
        self.0.take_up_to(now, want)
    }

    /// When the next whole token is there.
    pub fn next_token(&self) -> Instant {
        self.0.next_token()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tag(p: Option<Publish>) -> Option<Tag> {
        p.map(|p| p.tag)
    }

    #[test]
    fn acks_name_the_rows_and_topics_their_publishes_carried() {
        let mut f = Flight::default();
        f.queued(Tag::Telemetry(10), "r/devices/a/measurements");
        f.queued(Tag::Retained, "r/status");
        f.queued(Tag::Telemetry(11), "r/devices/b/measurements");
        assert_eq!(f.telemetry_in_flight(), 2);
        f.sent(1);
        f.sent(2);
        f.sent(3);
        assert_eq!(
            f.settled(2),
            Some(Publish {
                tag: Tag::Retained,
                topic: "r/status".into()
            })
        );
        assert_eq!(f.telemetry_in_flight(), 2);
        assert_eq!(tag(f.settled(3)), Some(Tag::Telemetry(11)));
        let first = f.settled(1).unwrap();
        assert_eq!(first.tag, Tag::Telemetry(10));
        assert_eq!(first.topic, "r/devices/a/measurements");
        assert_eq!(f.settled(1), None);
        assert_eq!(f.telemetry_in_flight(), 0);
        f.sent(9); // unknown: ignored
        assert_eq!(f.settled(9), None);
    }

    #[test]
    fn reset_forgets_the_connection() {
        let mut f = Flight::default();
        f.queued(Tag::Telemetry(1), "t");
        f.queued(Tag::Answer, "a");
        f.sent(1);
        f.reset();
        assert_eq!(f.settled(1), None);
        assert_eq!(f.telemetry_in_flight(), 0);
    }

    #[test]
    fn the_pacer_saves_up_a_tenth_of_a_second_at_least_one() {
        let t0 = Instant::now();
        let mut p = Pacer::new(100, t0);
        assert_eq!(p.take(t0, 1000), 10);
        assert_eq!(p.take(t0, 1000), 0);
        let next = p.next_token() - t0;
        assert!(next > Duration::from_micros(9_999) && next <= Duration::from_micros(10_001));
        assert_eq!(p.take(t0 + Duration::from_secs(60), 1000), 10);
        let mut slow = Pacer::new(0, t0);
        assert_eq!(slow.take(t0 + Duration::from_secs(60), 1000), 1);
    }
}
