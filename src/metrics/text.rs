//! The Prometheus text exposition format (version 0.0.4): families with their
//! `# HELP` and `# TYPE` lines, samples grouped under their family whatever
//! order collectors report them in, label values escaped.

use std::collections::HashMap;
use std::fmt::Write;

use super::HistogramSnapshot;

/// `Content-Type` of the rendered text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

struct FamilyText {
    name: String,
    header: String,
    lines: String,
}

/// Collects families and renders them in the order they first appeared.
#[derive(Default)]
pub struct Encoder {
    families: Vec<FamilyText>,
    index: HashMap<String, usize>,
}

/// Samples of one family.
pub struct Family<'a> {
    name: &'a str,
    lines: &'a mut String,
}

impl Encoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The family `name`, declared on first use (later `help` and `kind` of the
    /// same name are ignored: one family has one type).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> Family<'_> {
        let i = match self.index.get(name) {
            Some(i) => *i,
            None => {
                let header = format!(
                    "# HELP {name} {}\n# TYPE {name} {}\n",
                    escape_help(help),
                    kind.name()
                );
                self.families.push(FamilyText {
                    name: name.to_string(),
                    header,
                    lines: String::new(),
                });
                self.index.insert(name.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        let f = &mut self.families[i];
        Family {
            name: &f.name,
            lines: &mut f.lines,
        }
    }

    pub fn finish(self) -> String {
        let mut out = String::new();
        for f in self.families {
            out.push_str(&f.header);
            out.push_str(&f.lines);
        }
        out
    }
}

impl Family<'_> {
    /// One sample of a counter or gauge.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Self {
        line(self.lines, self.name, "", labels, None, value);
        self
    }

    /// The `_bucket`, `_sum` and `_count` series of a histogram.
    pub fn histogram(&mut self, labels: &[(&str, &str)], h: &HistogramSnapshot) -> &mut Self {
        let mut cumulative = 0u64;
        for (bound, count) in h.bounds.iter().zip(&h.counts) {
            cumulative += count;
            let le = number(*bound);
            line(
                self.lines,
                self.name,
                "_bucket",
                labels,
                Some(&le),
                cumulative as f64,
            );
        }
        line(
            self.lines,
            self.name,
            "_bucket",
            labels,
            Some("+Inf"),
            h.count as f64,
        );
        line(self.lines, self.name, "_sum", labels, None, h.sum);
        line(
            self.lines,
            self.name,
            "_count",
            labels,
            None,
            h.count as f64,
        );
        self
    }
}

fn line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&str, &str)],
    le: Option<&str>,
    value: f64,
) {
    out.push_str(name);
    out.push_str(suffix);
    let extra = le.map(|v| ("le", v));
    let mut all = labels.iter().copied().chain(extra).peekable();
    if all.peek().is_some() {
        out.push('{');
        for (i, (k, v)) in all.enumerate() {
            if i > 0 {
                out.push(',');
            }
            // Writing to a String cannot fail.
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&number(value));
    out.push('\n');
}

/// Integers without a fraction, infinities as `+Inf`/`-Inf`.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Histogram;

    #[test]
    fn families_group_their_samples_and_escape_labels() {
        let mut e = Encoder::new();
        e.family("x_total", Kind::Counter, "X things.")
            .sample(&[("device", "a\"b\\c\nd")], 3.0);
        e.family("y", Kind::Gauge, "Y.").sample(&[], 0.5);
        e.family("x_total", Kind::Counter, "ignored")
            .sample(&[("device", "e")], 1.0);
        let text = e.finish();
        assert_eq!(
            text,
            "# HELP x_total X things.\n# TYPE x_total counter\n\
             x_total{device=\"a\\\"b\\\\c\\nd\"} 3\nx_total{device=\"e\"} 1\n\
             # HELP y Y.\n# TYPE y gauge\ny 0.5\n"
        );
    }

    #[test]
    fn histograms_are_cumulative_with_inf_sum_and_count() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.5);
        h.observe(0.5);
        h.observe(7.0);
        let mut e = Encoder::new();
        e.family("d_seconds", Kind::Histogram, "D.")
            .histogram(&[("bus", "b")], &h.snapshot());
        let text = e.finish();
        for want in [
            "d_seconds_bucket{bus=\"b\",le=\"0.1\"} 1\n",
            "d_seconds_bucket{bus=\"b\",le=\"1\"} 3\n",
            "d_seconds_bucket{bus=\"b\",le=\"+Inf\"} 4\n",
            "d_seconds_sum{bus=\"b\"} 8.05\n",
            "d_seconds_count{bus=\"b\"} 4\n",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
    }

    #[test]
    fn special_numbers() {
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(12.0), "12");
        assert_eq!(number(-0.25), "-0.25");
    }
}
