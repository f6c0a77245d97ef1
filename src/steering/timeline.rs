//! One component's timeline: non-overlapping entries `[from, until)` with a value
//! and the request that set it, and the overwrite rule (a request from `F` on
//! replaces what was set from `F` on; `docs/steering.md`).
//!
//! Pure data over explicit times (epoch ms); it never reads the clock.

/// One entry: `value` holds for `from <= t < until`.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry<V> {
    pub from: i64,
    pub until: i64,
    pub value: V,
    pub request_id: String,
}

/// Entries sorted by `from`, never overlapping.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline<V> {
    entries: Vec<Entry<V>>,
}

impl<V> Default for Timeline<V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<V: Clone> Timeline<V> {
    pub fn entries(&self) -> &[Entry<V>] {
        &self.entries
    }

    /// Overwrites the timeline from `e.from` on: entries starting at or after it
    /// go, an entry spanning it is cut to end there, then `e` goes in. An empty
    /// entry (`from >= until`) only clears.
    pub fn insert(&mut self, e: Entry<V>) {
        self.clear_from(e.from);
        if e.from < e.until {
            self.entries.push(e);
        }
    }

    /// Removes everything from `t` on: what holds after `t` is the fallback.
    pub fn clear_from(&mut self, t: i64) {
        self.entries.retain(|x| x.from < t);
        if let Some(last) = self.entries.last_mut() {
            if last.until > t {
                last.until = t;
            }
        }
        // Cutting can leave an empty entry only when it started at `t`, which
        // `retain` already removed.
    }

    /// The entry that holds at `t`.
    pub fn at(&self, t: i64) -> Option<&Entry<V>> {
        self.entries.iter().find(|e| e.from <= t && t < e.until)
    }

    /// Entries that start after `t` (scheduled).
    pub fn after(&self, t: i64) -> impl Iterator<Item = &Entry<V>> {
        self.entries.iter().filter(move |e| e.from > t)
    }

    /// The first instant after `t` at which the value may change.
    pub fn next_change_after(&self, t: i64) -> Option<i64> {
        self.entries
            .iter()
            .flat_map(|e| [e.from, e.until])
            .filter(|&x| x > t)
            .min()
    }

    /// Drops entries that ended at or before `t`. Returns true when any went.
    pub fn prune(&mut self, t: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.until > t);
        self.entries.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(from: i64, until: i64, v: u32) -> Entry<u32> {
        Entry {
            from,
            until,
            value: v,
            request_id: format!("r{v}"),
        }
    }

    fn spans(t: &Timeline<u32>) -> Vec<(i64, i64, u32)> {
        t.entries()
            .iter()
            .map(|e| (e.from, e.until, e.value))
            .collect()
    }

    #[test]
    fn overwrite_from_cuts_the_spanning_entry_and_drops_later_ones() {
        let mut t = Timeline::default();
        t.insert(e(0, 100, 1));
        t.insert(e(200, 300, 2));
        t.insert(e(50, 120, 3));
        assert_eq!(spans(&t), [(0, 50, 1), (50, 120, 3)]);
        assert_eq!(t.at(49).map(|e| e.value), Some(1));
        assert_eq!(t.at(50).map(|e| e.value), Some(3));
        assert_eq!(t.at(120), None);
    }

    #[test]
    fn later_entry_keeps_earlier_ones() {
        let mut t = Timeline::default();
        t.insert(e(0, 100, 1));
        t.insert(e(150, 300, 2));
        assert_eq!(spans(&t), [(0, 100, 1), (150, 300, 2)]);
        assert_eq!(t.at(120), None);
        assert_eq!(t.next_change_after(100), Some(150));
        assert_eq!(t.after(100).count(), 1);
    }

    #[test]
    fn insert_at_the_same_start_replaces() {
        let mut t = Timeline::default();
        t.insert(e(0, 100, 1));
        t.insert(e(0, 50, 2));
        assert_eq!(spans(&t), [(0, 50, 2)]);
    }

    #[test]
    fn clear_and_prune() {
        let mut t = Timeline::default();
        t.insert(e(0, 100, 1));
        t.insert(e(100, 200, 2));
        t.clear_from(150);
        assert_eq!(spans(&t), [(0, 100, 1), (100, 150, 2)]);
        assert!(t.prune(100));
        assert_eq!(spans(&t), [(100, 150, 2)]);
        assert!(!t.prune(100));
        t.clear_from(0);
        assert!(t.entries().is_empty());
    }
}
