//! `sitegate grid-events`: the evidence log of grid-operator events between
//! two times, read from the agent's database beside a running agent, as
//! CSV (`--csv`) or one line an event for a person.

use std::path::Path;
use std::process::ExitCode;

use super::{complain, load_config, say};
use crate::EXIT_USAGE;
use sitegate::grid_events::{csv, store, Event};

/// A time as given: RFC 3339 (`2026-11-01T00:00:00Z`) or a date
/// (`2026-11-01`, UTC midnight).
pub fn parse_time(flag: &str, s: &str) -> Result<i64, String> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    s.parse::<jiff::civil::Date>()
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map(|z| z.timestamp().as_millisecond())
        .ok_or_else(|| {
            format!(
                "{flag} {s:?}: give a date (2026-11-01) or an RFC 3339 time (2026-11-01T06:00:00Z)"
            )
        })
}

fn line(e: &Event) -> String {
    let t = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms)
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    let w = |w: Option<f64>| w.map_or("-".to_string(), |w| format!("{} W", w.round()));
    format!(
        "{} → {}  {} {} {} {} W{}  [{}]  most imported {}, exported {}",
        t(e.start_ms),
        e.end_ms.map_or("open".to_string(), t),
        e.site,
        e.source,
        e.kind,
        e.limit_w.round(),
        if e.failsafe { " (failsafe)" } else { "" },
        e.reference,
        w(e.max_import_w),
        w(e.max_export_w),
    )
}

pub fn run(file: &Path, since: &str, until: Option<&str>, as_csv: bool) -> ExitCode {
    let config = match load_config(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let since_ms = match parse_time("--since", since) {
        Ok(t) => t,
        Err(e) => {
            complain(&e);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let until_ms = match until.map(|u| parse_time("--until", u)).transpose() {
        Ok(t) => t.unwrap_or(i64::MAX),
        Err(e) => {
            complain(&e);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let db = &config.storage.path;
    let conn = match sitegate::store::open_read_only(db) {
        Ok(c) => c,
        Err(e) => {
            complain(&format!("{}: {e}", db.display()));
            return ExitCode::from(1);
        }
    };
    match store::between(&conn, since_ms, until_ms) {
        Ok(events) if as_csv => {
            say(csv::render(&events).trim_end());
            ExitCode::SUCCESS
        }
        Ok(events) => {
            for e in &events {
                say(&line(e));
            }
            if events.is_empty() {
                say("no grid operator events in that time");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            complain(&format!(
                "{}: the evidence log cannot be read ({e}); has this version of the agent run on it?",
                db.display()
            ));
            ExitCode::from(1)
        }
    }
}
