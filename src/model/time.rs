//! Wall-clock helpers: epoch milliseconds and RFC 3339 in UTC, and a
//! simulated site's clock as the wall clock sees it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now: the one place the agent reads
/// the wall clock (`clippy.toml`).
#[allow(clippy::disallowed_methods)]
pub fn now_ms() -> i64 {
    // A clock before 1970 is a broken controller clock; report it as the epoch
    // rather than panic.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A simulated site's clock as the agent shows it (`sitegate demo`):
/// simulated epoch ms `at_ms` at wall-clock epoch ms `wall_ms`, running
/// `speed` times faster than the wall clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimulatedClock {
    pub at_ms: i64,
    pub wall_ms: i64,
    pub speed: f64,
}

impl SimulatedClock {
    /// The simulated time at wall-clock epoch ms `wall_ms`.
    pub fn at(&self, wall_ms: i64) -> i64 {
        self.at_ms + ((wall_ms - self.wall_ms) as f64 * self.speed) as i64
    }
}

/// Formats epoch ms as RFC 3339 UTC with `Z`, whole seconds when the value has no
/// millisecond part (`2024-06-27T08:00:00Z`), else with milliseconds.
pub fn format_utc(ms: i64) -> String {
    let ts = match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts,
        Err(_) => return ms.to_string(),
    };
    if ms.rem_euclid(1000) == 0 {
        ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    }
}

/// Parses an RFC 3339 date-time with any offset into epoch ms (UTC). A
/// well-formed one outside the instants the agent can hold (after
/// 9999-12-30T22:00:00Z, or before -009999-01-02T01:59:59Z) is refused as out
/// of range, with the limits named.
pub fn parse_rfc3339(s: &str) -> Result<i64, String> {
    match s.parse::<jiff::Timestamp>() {
        Ok(ts) => Ok(ts.as_millisecond()),
        Err(e) if well_formed_with_offset(s) => Err(format!(
            "{s:?} is an RFC 3339 date-time outside the range this API can hold: {} to {} (UTC); {e}",
            jiff::Timestamp::MIN.strftime("%Y-%m-%dT%H:%M:%SZ"),
            jiff::Timestamp::MAX.strftime("%Y-%m-%dT%H:%M:%SZ"),
        )),
        Err(e) => Err(format!("{s:?} is not an RFC 3339 date-time: {e}")),
    }
}

/// A date, a time and an offset in RFC 3339's syntax, whatever instant they
/// name.
fn well_formed_with_offset(s: &str) -> bool {
    jiff::fmt::temporal::Pieces::parse(s).is_ok_and(|p| p.time().is_some() && p.offset().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_whole_seconds_and_millis() {
        assert_eq!(format_utc(1_719_475_200_000), "2024-06-27T08:00:00Z");
        assert_eq!(format_utc(1_719_475_200_123), "2024-06-27T08:00:00.123Z");
    }

    #[test]
    fn parses_offsets_as_utc() {
        assert_eq!(
            parse_rfc3339("2024-06-27T10:00:00+02:00"),
            Ok(1_719_475_200_000)
        );
        assert_eq!(parse_rfc3339("2024-06-27T08:00:00Z"), Ok(1_719_475_200_000));
        assert!(parse_rfc3339("2024-06-27").is_err());
        assert!(parse_rfc3339("yesterday").is_err());
    }

    #[test]
    fn an_instant_past_the_range_is_named_out_of_range() {
        let past = parse_rfc3339("9999-12-31T22:00:00+01:00").unwrap_err();
        assert!(past.contains("outside the range"), "{past}");
        assert!(past.contains("9999-12-30T22:00:00Z"), "{past}");
        let last = parse_rfc3339("9999-12-30T22:00:00Z").unwrap();
        assert_eq!(format_utc(last), "9999-12-30T22:00:00Z");
        let bad = parse_rfc3339("9999-12-32T22:00:00Z").unwrap_err();
        assert!(bad.contains("not an RFC 3339"), "{bad}");
    }
}
