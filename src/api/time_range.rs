//! The one check of a requested time range `[start, end)`: not empty, not
//! reversed, not longer than its endpoint allows. The time series (a JSON
//! body's `range`) and the energy view (`from`/`to` in the query) name their
//! fields their own way and map the answer to their own errors.
//!
//! Pure: no clock, no request, no error type of a layer.

use crate::model::time::format_utc;

/// What is wrong with a range, its detail ready to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeProblem {
    /// `end` is not after `start`.
    Backwards(String),
    /// Longer than the endpoint allows.
    TooLong(String),
}

/// Checks `[start_ms, end_ms)` against `max_ms` (`max_label` says it for
/// people: "30 days"), naming the bounds as the request does (`names`:
/// `("range.start", "range.end")` or `("from", "to")`).
pub fn check(
    start_ms: i64,
    end_ms: i64,
    max_ms: i64,
    max_label: &str,
    (start, end): (&str, &str),
) -> Result<(), RangeProblem> {
    if end_ms <= start_ms {
        let what = if end_ms == start_ms {
            "empty"
        } else {
            "reversed"
        };
        return Err(RangeProblem::Backwards(format!(
            "{end} must be after {start}: the range is {what} ({start} {}, {end} {})",
            format_utc(start_ms),
            format_utc(end_ms)
        )));
    }
    if end_ms - start_ms > max_ms {
        return Err(RangeProblem::TooLong(format!(
            "the range spans {} ms; at most {max_label} ({max_ms} ms) are allowed",
            end_ms - start_ms
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_reversed_and_too_long_ranges_are_named_by_their_fields() {
        let names = ("from", "to");
        assert_eq!(check(0, 10, 10, "10 ms", names), Ok(()));
        let Err(RangeProblem::Backwards(d)) = check(5, 5, 10, "10 ms", names) else {
            panic!("empty");
        };
        assert!(
            d.starts_with("to must be after from: the range is empty"),
            "{d}"
        );
        let Err(RangeProblem::Backwards(d)) = check(6, 5, 10, "10 ms", names) else {
            panic!("reversed");
        };
        assert!(d.contains("reversed"), "{d}");
        let Err(RangeProblem::TooLong(d)) = check(0, 11, 10, "10 ms", names) else {
            panic!("too long");
        };
        assert!(
            d.ends_with("spans 11 ms; at most 10 ms (10 ms) are allowed"),
            "{d}"
        );
    }
}
