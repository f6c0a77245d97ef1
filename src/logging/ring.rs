//! The last log lines in memory, for the operations channel's `logs`
//! operation: a tracing layer writes every event the installed filter lets
//! through into one bounded ring (lines and bytes), and [`LogRing::tail`]
//! reads the newest lines at or above a level within a size bound.
//!
//! It must not do I/O, block on anything but its one short lock, or keep a
//! line longer than [`LINE_MAX`] bytes (longer ones are cut and marked).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Lines kept at most.
pub const RING_LINES: usize = 2_000;
/// Bytes of text kept at most (the sum of the lines' texts and targets).
pub const RING_BYTES: usize = 512 * 1024;
/// The longest line kept; the rest is cut and `…` appended.
pub const LINE_MAX: usize = 2_048;

/// One log line as the agent wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub ts_ms: i64,
    pub level: Level,
    pub target: String,
    /// The message followed by its fields as `key=value`.
    pub text: String,
}

impl LogLine {
    fn bytes(&self) -> usize {
        self.text.len() + self.target.len()
    }
}

/// What [`LogRing::tail`] returns: the newest matching lines, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogTail {
    pub lines: Vec<LogLine>,
    /// More lines matched than the count or the size bound let through.
    pub truncated: bool,
    /// Lines the ring let go since start to stay within its bounds.
    pub forgotten: u64,
}

#[derive(Default)]
struct Ring {
    lines: VecDeque<LogLine>,
    bytes: usize,
    forgotten: u64,
}

/// The ring. One per process ([`ring`]): the subscriber is global.
#[derive(Default)]
pub struct LogRing {
    inner: Mutex<Ring>,
}

impl LogRing {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        // A panic while holding the lock leaves a whole VecDeque behind.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `line`, letting the oldest go past the bounds.
    pub fn push(&self, mut line: LogLine) {
        cut(&mut line.text, LINE_MAX);
        let mut r = self.lock();
        r.bytes += line.bytes();
        r.lines.push_back(line);
        while r.lines.len() > RING_LINES || r.bytes > RING_BYTES {
            let Some(old) = r.lines.pop_front() else {
                break;
            };
            r.bytes -= old.bytes();
            r.forgotten += 1;
        }
    }

    /// The newest `max_lines` lines at `min_level` or more severe, whose
    /// texts and targets add up to at most `max_bytes`; oldest first.
    pub fn tail(&self, max_lines: usize, min_level: Level, max_bytes: usize) -> LogTail {
        let r = self.lock();
        let mut picked = Vec::new();
        let mut bytes = 0usize;
        let mut truncated = false;
        // `Level`'s order: TRACE > DEBUG > INFO > WARN > ERROR (more verbose is greater).
        for line in r.lines.iter().rev().filter(|l| l.level <= min_level) {
            if picked.len() == max_lines || bytes + line.bytes() > max_bytes {
                truncated = true;
                break;
            }
            bytes += line.bytes();
            picked.push(line.clone());
        }
        picked.reverse();
        LogTail {
            lines: picked,
            truncated,
            forgotten: r.forgotten,
        }
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut.
fn cut(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}

/// The process's ring.
pub fn ring() -> &'static LogRing {
    static RING: OnceLock<LogRing> = OnceLock::new();
    RING.get_or_init(LogRing::default)
}

/// The layer that feeds [`ring`]; `init` installs it, and a test subscriber
/// may add it too.
pub fn ring_layer() -> RingLayer {
    RingLayer
}

/// See [`ring_layer`].
pub struct RingLayer;

impl<S: Subscriber> Layer<S> for RingLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut text = Text::default();
        event.record(&mut text);
        let mut line = text.message;
        if !text.fields.is_empty() {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(&text.fields);
        }
        let meta = event.metadata();
        ring().push(LogLine {
            ts_ms: crate::model::time::now_ms(),
            level: *meta.level(),
            target: meta.target().to_string(),
            text: line,
        });
    }
}

#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.add(field, format_args!("{value:?}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            self.add(field, format_args!("{value:?}"));
        }
    }
}

impl Text {
    fn add(&mut self, field: &Field, value: std::fmt::Arguments<'_>) {
        if self.fields.len() > LINE_MAX {
            return;
        }
        if !self.fields.is_empty() {
            self.fields.push(' ');
        }
        let _ = write!(self.fields, "{}={value}", field.name());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(level: Level, text: &str) -> LogLine {
        LogLine {
            ts_ms: 0,
            level,
            target: "t".into(),
            text: text.into(),
        }
    }

    #[test]
    fn tail_filters_by_level_and_keeps_within_count_and_bytes() {
        let r = LogRing::default();
        for i in 0..10 {
            let level = if i % 2 == 0 { Level::INFO } else { Level::WARN };
            r.push(line(level, &format!("line {i}")));
        }
        let t = r.tail(3, Level::WARN, 10_000);
        let texts: Vec<_> = t.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["line 5", "line 7", "line 9"]);
        assert!(t.truncated);
        let all = r.tail(100, Level::TRACE, 10_000);
        assert_eq!(all.lines.len(), 10);
        assert!(!all.truncated);
        // Each line is 6 text bytes and 1 target byte.
        let small = r.tail(100, Level::TRACE, 15);
        assert_eq!(small.lines.len(), 2);
        assert!(small.truncated);
    }

    #[test]
    fn the_ring_forgets_the_oldest_past_its_bounds() {
        let r = LogRing::default();
        for i in 0..RING_LINES + 5 {
            r.push(line(Level::INFO, &format!("{i}")));
        }
        let t = r.tail(usize::MAX, Level::TRACE, usize::MAX);
        assert_eq!(t.lines.len(), RING_LINES);
        assert_eq!(t.forgotten, 5);
        assert_eq!(t.lines[0].text, "5");
        let long = "é".repeat(LINE_MAX);
        r.push(line(Level::INFO, &long));
        let last = r.tail(1, Level::TRACE, usize::MAX).lines.remove(0);
        assert!(last.text.len() <= LINE_MAX && last.text.ends_with('…'));
        for _ in 0..RING_BYTES / LINE_MAX + 10 {
            r.push(line(Level::INFO, &long));
        }
        let t = r.tail(usize::MAX, Level::TRACE, usize::MAX);
        let bytes: usize = t.lines.iter().map(LogLine::bytes).sum();
        assert!(bytes <= RING_BYTES, "{bytes}");
    }
}
