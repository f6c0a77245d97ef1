//! The support bundle's text: sections, each cut to its own bound, the whole
//! cut to [`BUNDLE_MAX`], and the chunks it is sent in. Pure: the sections'
//! contents come from `gather.rs`.
//!
//! It must not read any state itself.

use std::fmt::Write as _;
use std::ops::Range;

/// The largest bundle, in bytes.
pub const BUNDLE_MAX: usize = 1024 * 1024;
/// The largest chunk, in bytes of the bundle's text.
pub const CHUNK_BYTES: usize = 48 * 1024;

/// One section: a title and its text, cut to `max` bytes.
pub struct Section {
    pub title: &'static str,
    pub body: String,
    pub max: usize,
}

/// The bundle's text: a header line, then each section under `## title`,
/// cut where its bound or the whole's says (and marked there).
pub fn assemble(sections: Vec<Section>) -> String {
    let mut out = String::from("# sitegate support bundle\n");
    for s in sections {
        let mut body = s.body;
        cut(&mut body, s.max, "section");
        let _ = write!(out, "\n## {}\n\n{}", s.title, body);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    cut(&mut out, BUNDLE_MAX, "bundle");
    out
}

/// Cuts `text` to at most `max` bytes on a line or character boundary,
/// ending it with a line saying so.
fn cut(text: &mut String, max: usize, what: &str) {
    if text.len() <= max {
        return;
    }
    let note = format!("\n[{what} cut at {max} bytes of {}]\n", text.len());
    let mut end = max.saturating_sub(note.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(nl) = text[..end].rfind('\n') {
        end = nl;
    }
    text.truncate(end);
    text.push_str(&note);
}

/// Byte ranges of the chunks of `text`, each at most [`CHUNK_BYTES`] and
/// ending on a character boundary.
pub fn chunks(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + CHUNK_BYTES).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push(start..end);
        start = end;
    }
    if out.is_empty() {
        out.push(0..0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_the_whole_stay_within_their_bounds() {
        let b = assemble(vec![
            Section {
                title: "small",
                body: "one line".into(),
                max: 100,
            },
            Section {
                title: "big",
                body: "0123456789\n".repeat(1000),
                max: 500,
            },
        ]);
        assert!(b.starts_with("# sitegate support bundle\n\n## small\n\none line\n"));
        let big = &b[b.find("## big").expect("section")..];
        assert!(big.len() < 520, "{}", big.len());
        assert!(big.contains("[section cut at 500 bytes of 11000]"), "{big}");
        let huge = assemble(vec![Section {
            title: "huge",
            body: "é".repeat(BUNDLE_MAX),
            max: usize::MAX,
        }]);
        assert!(huge.len() <= BUNDLE_MAX);
        assert!(huge.contains(&format!("[bundle cut at {BUNDLE_MAX} bytes of ")));
    }

    #[test]
    fn chunks_cover_the_text_on_character_boundaries() {
        let text = "aé".repeat(CHUNK_BYTES);
        let parts = chunks(&text);
        assert_eq!(parts.first().map(|r| r.start), Some(0));
        assert_eq!(parts.last().map(|r| r.end), Some(text.len()));
        for w in parts.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        assert!(parts
            .iter()
            .all(|r| r.len() <= CHUNK_BYTES && text.is_char_boundary(r.end)));
        assert_eq!(chunks(""), vec![0..0]);
    }
}
