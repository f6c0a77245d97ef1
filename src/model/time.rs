//! Wall-clock helpers: epoch milliseconds and RFC 3339 in UTC.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    // A clock before 1970 is a broken controller clock; report it as the epoch
    // rather than panic.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
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

/// Parses an RFC 3339 date-time with any offset into epoch ms (UTC).
pub fn parse_rfc3339(s: &str) -> Result<i64, String> {
    let ts: jiff::Timestamp = s
        .parse()
        .map_err(|e| format!("{s:?} is not an RFC 3339 date-time: {e}"))?;
    Ok(ts.as_millisecond())
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
}
