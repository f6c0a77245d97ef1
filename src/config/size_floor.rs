//! The least `storage.max_size_mb` can be for a site: what the store never
//! deletes to stay under it. The staging ring (samples not yet compacted,
//! at most a fifth of the cap, and at least 45 s of the site's
//! samples) and the raw samples of the newest [`KEPT_NEWEST_MS`] with their
//! rollups
//! (`docs/store.md`, "Retention and the size cap"). `check-config` refuses a
//! cap below it and says what it is; the store sizes its ring by the cap
//! ([`staged_max`]).
//!
//! Estimates from the config alone (devices, poll intervals) and the
//! store's sizes measured on noisy data with float models (`cargo bench
//! --bench store`): pure, no I/O.

use super::site_rates::site_rates;
use super::{Config, Problem};

/// The newest raw samples the size cap never deletes: this long before the
/// newest sample, staged or at rest.
pub const KEPT_NEWEST_MS: i64 = 300_000;
/// The staging ring takes at most the cap divided by this: the store
/// compacts once its staged samples would take more.
pub const RING_SHARE: u64 = 5;
/// Bytes a staged sample takes in the ring (packed slots of 1 KiB; a float32
/// reading 5 bytes, a short decimal 3 to 5).
pub const STAGED_BYTES_PER_SAMPLE: f64 = 4.5;
/// Staged samples that start a compaction whatever the cap
/// (`store::STAGED_MAX`).
pub const STAGED_MAX: usize = 2_000_000;
/// The ring must hold at least this many seconds of the site's samples:
/// compactions more often than that write chunks too small to be worth
/// their keys.
pub const MIN_RING_S: f64 = 45.0;
/// Bytes at rest per raw sample in the kept window: chunks and their keys
/// (2.6 measured at 1,000 noisy devices with a compaction a minute), and the
/// chunks that straddle the window's start, kept whole. Rollups may go
/// before the window.
pub const KEPT_BYTES_PER_SAMPLE: f64 = 3.0;
/// Bytes per series of its rows that stay (`series`, its index,
/// `series_last`).
pub const SERIES_BYTES: f64 = 100.0;
/// Rollup rows per series that stay with the kept window: its five minutes
/// and the two its ends cut, the minute the ring is filling, and the hour
/// rows of the two hours the window may span. The cap does not delete them
/// (each compaction would write them again).
pub const KEPT_ROLLUP_ROWS: f64 = 9.0;
/// Bytes at rest per rollup row with its share of the pages: `cargo bench
/// --bench store` gives the rollups 1.36 B a sample of a 1 Hz series on
/// noisy data (docs/store.md), about 82 B a minute row with its hour row's
/// sixtieth.
pub const ROLLUP_ROW_BYTES: f64 = 80.0;

const MB: f64 = 1024.0 * 1024.0;

/// Staged samples from which the store compacts at once under a cap of
/// `max_bytes`: its ring takes at most a [`RING_SHARE`] of the cap.
pub fn staged_max(max_bytes: u64) -> usize {
    let fit = (max_bytes / RING_SHARE) as f64 / STAGED_BYTES_PER_SAMPLE;
    (fit as usize).clamp(1, STAGED_MAX)
}

/// What the store keeps whatever the cap, for a site.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    pub samples_per_s: f64,
    /// The ring at the least cap.
    pub ring_mb: f64,
    /// The newest [`KEPT_NEWEST_MS`] of raw samples at rest with their
    /// rollups, and the rows of every series.
    pub window_mb: f64,
    /// The least cap.
    pub needed_mb: f64,
}

/// The floor of a site with devices; `None` without any.
pub fn floor(config: &Config) -> Option<Floor> {
    let (samples_per_s, series) = site_rates(config)?;
    // The ring as it grows between compactions with no cap.
    let ring_samples =
        (samples_per_s * config.storage.compact_interval_s as f64).min(STAGED_MAX as f64);
    let ring = ring_samples * STAGED_BYTES_PER_SAMPLE;
    let window = samples_per_s * KEPT_NEWEST_MS as f64 / 1000.0 * KEPT_BYTES_PER_SAMPLE
        + series * (SERIES_BYTES + KEPT_ROLLUP_ROWS * ROLLUP_ROW_BYTES);
    let share = RING_SHARE as f64;
    // After a compaction the whole window is at rest and the ring's pages
    // stay: cap - ring >= window, the ring being at most cap / share.
    let for_window = if window < (share - 1.0) * ring {
        window * share / (share - 1.0)
    } else {
        ring + window
    };
    // A ring of at least MIN_RING_S of samples (or all it would stage).
    let for_ring = ring_samples.min(samples_per_s * MIN_RING_S) * STAGED_BYTES_PER_SAMPLE * share;
    let needed = for_window.max(for_ring);
    Some(Floor {
        samples_per_s,
        ring_mb: ring.min(needed / share) / MB,
        window_mb: window / MB,
        needed_mb: needed / MB,
    })
}

/// The problem `check-config` reports for a cap below the floor.
pub fn refusal(config: &Config) -> Option<Problem> {
    let f = floor(config)?;
    let cap = config.storage.max_size_mb;
    if cap as f64 >= f.needed_mb {
        return None;
    }
    Some(Problem::new(
        "storage.max_size_mb",
        format!(
            "{cap} is below the {:.0} MB this site needs at least ({} devices, ~{:.0} samples/s): the staging ring ({:.1} MB: samples not yet compacted, at most a fifth of the cap and at least 45 s of samples) and the newest {} minutes of raw samples with their rollups and every series' rows ({:.1} MB), which the store never deletes to stay under the cap (docs/store.md, \"Retention and the size cap\")",
            f.needed_mb.ceil(),
            config.devices.len(),
            f.samples_per_s,
            f.ring_mb,
            KEPT_NEWEST_MS / 60_000,
            f.window_mb,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A site of `devices` inverters with `max_size_mb` set after parsing
    /// (a cap below the floor does not parse).
    fn site(devices: usize, max_size_mb: u64) -> Config {
        let mut config = crate::config::capacity::tests::site(devices, 1_048_576);
        config.storage.max_size_mb = max_size_mb;
        config
    }

    #[test]
    fn the_ring_takes_a_fifth_of_the_cap_at_most() {
        assert_eq!(staged_max(16 << 20), ((16 << 20) / 5) as usize * 2 / 9);
        assert_eq!(staged_max(2048 << 20), STAGED_MAX);
        assert_eq!(staged_max(0), 1);
    }

    #[test]
    fn a_cap_below_the_ring_and_the_newest_minutes_is_refused_with_the_floor() {
        assert_eq!(floor(&site(0, 2048)), None);
        // 1,000 devices at 1 Hz: the ring and the newest five minutes with
        // their rollups need about 27 MB.
        let f = floor(&site(1000, 27)).expect("devices");
        assert!((f.samples_per_s - 13_000.0).abs() < 1e-6, "{f:?}");
        assert!(f.needed_mb > 26.0 && f.needed_mb <= 27.0, "{f:?}");
        assert_eq!(refusal(&site(1000, 27)), None);
        let p = refusal(&site(1000, 16)).expect("refused").to_string();
        assert!(
            p.starts_with("storage.max_size_mb: 16 is below the 27 MB"),
            "{p}"
        );
        assert!(
            p.contains("1000 devices") && p.contains("newest 5 minutes"),
            "{p}"
        );
        // The demo's five devices fit a megabyte.
        assert_eq!(refusal(&site(5, 1)), None);
        assert!(refusal(&site(200, 1)).is_some());
        // The least cap grows with the site.
        let mut last = 0.0;
        for devices in [1, 20, 100, 500, 1000, 3000] {
            let f = floor(&site(devices, 2048)).expect("devices");
            assert!(f.needed_mb > last, "{devices}: {f:?}");
            last = f.needed_mb;
        }
    }
}
