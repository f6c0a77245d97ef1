//! How the API writes a number, in every answer and on the uplink: one style.
//!
//! - A whole number is written without a fraction (`65`, `100000`), never
//!   `100000.0`.
//! - No negative zero: `-0.0` is written `0`.
//! - [`Num`], a value the agent measured or computed (a reading, a time-series
//!   mean, a setpoint): at most [`DECIMALS`] decimals, so arithmetic leaves
//!   no noise (`50.800000000000004` is `50.8`). A thousandth of the unit (a
//!   milliwatt, a thousandth of a percent) is finer than any device reports.
//! - [`Exact`], a partner's own value echoed back (a steering setting): the
//!   number as sent, only with the two rules above.
//!
//! Not finite values do not reach here (the model refuses them); serde_json
//! would write them as `null`.

use serde::{Serialize, Serializer};

/// Decimals a measured or computed value keeps.
pub const DECIMALS: i32 = 3;

/// 2^53: integral f64 below it convert to i64 without loss.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// A measured or computed value, written with at most [`DECIMALS`] decimals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num(pub f64);

/// A partner's own value, written as sent (whole numbers without a fraction,
/// no negative zero).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exact(pub f64);

/// `x` rounded to [`DECIMALS`] decimals where that is exact enough to matter
/// (beyond 2^53 / 1000 an f64 has no such decimals left).
pub fn rounded(x: f64) -> f64 {
    let scale = 10f64.powi(DECIMALS);
    if x.abs() < EXACT_INT / scale {
        (x * scale).round() / scale
    } else {
        x
    }
}

fn write<S: Serializer>(x: f64, s: S) -> Result<S::Ok, S::Error> {
    if x == 0.0 {
        // Both zeros.
        return s.serialize_i64(0);
    }
    if x.fract() == 0.0 && x.abs() < EXACT_INT {
        s.serialize_i64(x as i64)
    } else {
        s.serialize_f64(x)
    }
}

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(rounded(self.0), s)
    }
}

impl Serialize for Exact {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.0, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::to_string;

    #[test]
    fn one_style_for_every_number() {
        let cases = [
            (65.0, "65", "65"),
            (100_000.0, "100000", "100000"),
            (-0.0, "0", "0"),
            (-0.0004, "0", "-0.0004"),
            (50.800000000000004, "50.8", "50.800000000000004"),
            (442.48327198322477, "442.483", "442.48327198322477"),
            (-1234.5, "-1234.5", "-1234.5"),
            (1e18, "1e+18", "1e+18"),
        ];
        for (x, num, exact) in cases {
            assert_eq!(to_string(&Num(x)).unwrap(), num, "Num({x})");
            assert_eq!(to_string(&Exact(x)).unwrap(), exact, "Exact({x})");
        }
    }
}
