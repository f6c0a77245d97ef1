//! Answers of RPC reads (GET) kept in memory, so a duplicate delivery of a read
//! (same id, same caller) gets its first answer, as the contract promises for
//! every duplicate, without reads leaving anything on disk.
//!
//! Bounded three ways: an answer is kept [`WINDOW_MS`] at most, the memory holds
//! at most [`MAX_ANSWERS`] answers of [`MAX_BYTES`] together (the oldest
//! forgotten first), and an answer over [`MAX_ANSWER`] is not kept. A forgotten
//! read, or one from before a restart, is answered anew: a read applies nothing,
//! so answering it twice is harmless; only its content may be newer.
//!
//! Time is passed in; this file knows nothing of MQTT, HTTP or the clock.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// How long a read's answer is kept: the contract's duplicate window.
pub const WINDOW_MS: i64 = 24 * 3_600_000;
/// Answers kept at most.
pub const MAX_ANSWERS: usize = 256;
/// Bytes the kept answers and their keys take at most.
pub const MAX_BYTES: usize = 4 << 20;
/// A larger answer is not kept (a duplicate is answered anew).
pub const MAX_ANSWER: usize = 256 << 10;

/// Who asked and under which id: a duplicate must come from the same caller, so
/// an id reused under another token never sees the first caller's answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadKey {
    pub caller: String,
    pub id: String,
}

impl ReadKey {
    fn bytes(&self) -> usize {
        self.caller.len() + self.id.len()
    }
}

#[derive(Default)]
struct Kept {
    answers: HashMap<ReadKey, Vec<u8>>,
    /// Keys in the order they were kept, with the time: the oldest in front.
    order: VecDeque<(ReadKey, i64)>,
    bytes: usize,
}

impl Kept {
    fn forget_oldest(&mut self) {
        if let Some((key, _)) = self.order.pop_front() {
            if let Some(answer) = self.answers.remove(&key) {
                self.bytes -= key.bytes() + answer.len();
            }
        }
    }

    fn expire(&mut self, now_ms: i64) {
        while self
            .order
            .front()
            .is_some_and(|(_, at)| now_ms - at >= WINDOW_MS)
        {
            self.forget_oldest();
        }
    }
}

/// The kept read answers.
#[derive(Default)]
pub struct ReadAnswers {
    kept: Mutex<Kept>,
}

impl ReadAnswers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // Every update leaves the maps consistent before it can panic.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first answer to this read, when it is still kept.
    pub fn get(&self, key: &ReadKey, now_ms: i64) -> Option<Vec<u8>> {
        let mut kept = self.lock();
        kept.expire(now_ms);
        kept.answers.get(key).cloned()
    }

    /// Keeps `answer` unless this read already has one (a concurrent duplicate
    /// ran too), and returns the answer to send: always the first.
    pub fn keep(&self, key: ReadKey, answer: Vec<u8>, now_ms: i64) -> Vec<u8> {
        let mut kept = self.lock();
        kept.expire(now_ms);
        if let Some(first) = kept.answers.get(&key) {
            return first.clone();
        }
        let size = key.bytes() + answer.len();
        if answer.len() > MAX_ANSWER || size > MAX_BYTES {
            return answer;
        }
        while kept.answers.len() >= MAX_ANSWERS || kept.bytes + size > MAX_BYTES {
            kept.forget_oldest();
        }
        kept.bytes += size;
        kept.order.push_back((key.clone(), now_ms));
        kept.answers.insert(key, answer.clone());
        answer
    }

    /// Answers kept and the bytes they take.
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        let kept = self.lock();
        (kept.answers.len(), kept.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(caller: &str, id: &str) -> ReadKey {
        ReadKey {
            caller: caller.into(),
            id: id.into(),
        }
    }

    #[test]
    fn a_duplicate_gets_the_first_answer_within_the_window() {
        let reads = ReadAnswers::default();
        assert_eq!(reads.get(&key("mqtt", "r1"), 0), None);
        assert_eq!(
            reads.keep(key("mqtt", "r1"), b"first".to_vec(), 0),
            b"first"
        );
        assert_eq!(
            reads.keep(key("mqtt", "r1"), b"second".to_vec(), 5),
            b"first"
        );
        assert_eq!(
            reads.get(&key("mqtt", "r1"), WINDOW_MS - 1).as_deref(),
            Some(&b"first"[..])
        );
        assert_eq!(reads.get(&key("mqtt", "r1"), WINDOW_MS), None);
        assert_eq!(reads.size(), (0, 0));
    }

    #[test]
    fn another_caller_with_the_same_id_is_answered_anew() {
        let reads = ReadAnswers::default();
        reads.keep(key("mqtt", "r1"), b"first".to_vec(), 0);
        assert_eq!(reads.get(&key("installer", "r1"), 1), None);
    }

    #[test]
    fn the_oldest_go_first_past_the_count_and_byte_bounds() {
        let reads = ReadAnswers::default();
        for i in 0..MAX_ANSWERS + 10 {
            reads.keep(key("c", &i.to_string()), vec![0; 10], i as i64);
        }
        assert_eq!(reads.size().0, MAX_ANSWERS);
        assert_eq!(reads.get(&key("c", "9"), 1_000), None);
        assert!(reads.get(&key("c", "10"), 1_000).is_some());

        let reads = ReadAnswers::default();
        let big = MAX_ANSWER;
        for i in 0..MAX_BYTES / big + 3 {
            reads.keep(key("c", &i.to_string()), vec![0; big - 2], i as i64);
        }
        let (count, bytes) = reads.size();
        assert!(bytes <= MAX_BYTES, "{bytes}");
        assert!(count < MAX_BYTES / big + 3);
        assert_eq!(reads.get(&key("c", "0"), 1_000), None);
    }

    #[test]
    fn an_answer_over_the_bound_is_sent_but_not_kept() {
        let reads = ReadAnswers::default();
        let answer = reads.keep(key("c", "big"), vec![1; MAX_ANSWER + 1], 0);
        assert_eq!(answer.len(), MAX_ANSWER + 1);
        assert_eq!(reads.size(), (0, 0));
    }
}
