//! The evidence log as CSV: one line per event, times in RFC 3339 UTC and
//! ms, powers in W. What `sitegate grid-events --csv` prints and an
//! operator is handed.
//!
//! Pure.

use super::tracker::Event;

/// The header line.
pub const HEADER: &str = "site,source,kind,reference,limit_w,failsafe,start,end,start_ms,end_ms,max_import_w,max_export_w";

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn time(ms: Option<i64>) -> String {
    ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn watts(w: Option<f64>) -> String {
    w.map(|w| format!("{}", w.round())).unwrap_or_default()
}

/// `events` under [`HEADER`].
pub fn render(events: &[Event]) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for e in events {
        out.push_str(
            &[
                field(&e.site),
                field(&e.source),
                field(&e.kind),
                field(&e.reference),
                watts(Some(e.limit_w)),
                e.failsafe.to_string(),
                time(Some(e.start_ms)),
                time(e.end_ms),
                e.start_ms.to_string(),
                e.end_ms.map(|m| m.to_string()).unwrap_or_default(),
                watts(e.max_import_w),
                watts(e.max_export_w),
            ]
            .join(","),
        );
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_an_event_quoted_where_needed() {
        let e = Event {
            id: Some(1),
            site: "home".into(),
            source: "gridSignal".into(),
            kind: "maxExport".into(),
            reference: "relay, 60 %".into(),
            limit_w: 30_000.0,
            failsafe: false,
            start_ms: 1_796_000_000_000,
            end_ms: None,
            max_import_w: None,
            max_export_w: Some(29_812.4),
        };
        let text = render(&[e]);
        let line = text.lines().nth(1).expect("a line");
        assert_eq!(
            line,
            "home,gridSignal,maxExport,\"relay, 60 %\",30000,false,2026-11-30T00:53:20Z,,1796000000000,,,29812"
        );
    }
}
