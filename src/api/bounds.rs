//! The largest values the API takes in a request where the code itself sets
//! the limit (a bundle's size, the width of a bucket in ms, a power in
//! floating point), each derived from the constants it comes from.
//! `openapi.json` states each as a `maximum` (or `minimum`), and
//! `tests/it/openapi_bounds.rs` checks that the document and these agree.
//!
//! Constants only: the parsers refuse what lies beyond, naming the field and
//! the bound.

use crate::ops::{BUNDLE_MAX, CHUNK_BYTES};

/// The highest chunk index of any bundle (`GET /admin/operations/{id}/bundle?chunk=N`).
/// A bundle holds at most [`BUNDLE_MAX`] bytes, cut into chunks of at most
/// [`CHUNK_BYTES`] that end on a character boundary, so every chunk but the
/// last holds at least `CHUNK_BYTES - 3` bytes (a UTF-8 character has at most
/// 4). A chunk index up to this one is looked up (`not_found` past the
/// bundle's own count); above it, `invalid_value`.
pub const BUNDLE_CHUNK_MAX: usize = BUNDLE_MAX.div_ceil(CHUNK_BYTES - 3) - 1;

/// The largest `resolution.value` of a time-series request: the largest whole
/// number of days whose width in ms fits an `i64`, so no unit's width
/// overflows.
pub const RESOLUTION_VALUE_MAX: u64 = i64::MAX as u64 / 86_400_000;

/// The largest magnitude of a power value in a steering request, in its own
/// unit (`W`, `kW` or `MW`): far above any site, and its watts (at most
/// 10^18) are finite, so no value up to it overflows.
pub const POWER_VALUE_MAX: f64 = 1e12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_the_codes_limits() {
        // 1 MiB in chunks of 48 KiB: 21 whole chunks and a part.
        assert_eq!(BUNDLE_CHUNK_MAX, 21);
        assert_eq!(BUNDLE_MAX.div_ceil(CHUNK_BYTES) - 1, BUNDLE_CHUNK_MAX);
        assert_eq!(RESOLUTION_VALUE_MAX, 106_751_991_167);
        let widest = (RESOLUTION_VALUE_MAX as i64).checked_mul(86_400_000);
        assert!(widest.is_some());
        assert!((RESOLUTION_VALUE_MAX as i64 + 1)
            .checked_mul(86_400_000)
            .is_none());
        assert!((POWER_VALUE_MAX * 1e6).is_finite());
    }
}
