//! Whether `storage.max_size_mb` holds the configured retention at this
//! site's sample rate, estimated from the store's measured sizes at rest. The
//! store deletes the oldest raw samples first when the file would outgrow the
//! bound, then the oldest minute rollups (`docs/store.md`, "Retention"); this
//! says, before that happens, how much history the bound will really hold.
//!
//! An estimate from the config alone (devices, poll intervals): pure, no I/O.
//! It never refuses a config; it is a warning (`check-config`, the start log).

use super::site_rates::site_rates;
pub use super::site_rates::PROPERTIES_PER_DEVICE;
use super::size_floor::KEPT_NEWEST_MS;
use super::{Config, Problem};

/// Bytes at rest per raw sample in a chunk, and per chunk for its row and
/// keys: on noisy data with float models, 1.58 B a sample of chunk pages in
/// ten-minute chunks and 1.89 B in 150 s ones (`cargo bench --bench store`),
/// 2.5 B in the one-minute chunks of 1,000 devices under a small cap.
pub const RAW_BYTES_PER_SAMPLE: f64 = 1.5;
pub const BYTES_PER_CHUNK: f64 = 80.0;
/// Staged samples that start a compaction (`store::STAGED_MAX`), and the
/// interval that starts one otherwise (the default `compact_interval_s`).
const STAGED_MAX: f64 = 2_000_000.0;
/// Bytes at rest per rollup row (one series, one minute or hour).
pub use super::size_floor::ROLLUP_ROW_BYTES;

const MB: f64 = 1024.0 * 1024.0;

/// What the bound holds, when it does not hold everything configured.
#[derive(Clone, Debug, PartialEq)]
pub struct Shortfall {
    pub samples_per_s: f64,
    /// Bytes the configured retention needs.
    pub needed_mb: f64,
    /// Days of raw samples and of minute rollups the bound holds.
    pub raw_days: f64,
    pub minute_days: f64,
}

/// `None` when `max_size_mb` holds the configured retention.
pub fn shortfall(config: &Config) -> Option<Shortfall> {
    let (samples_per_s, series) = site_rates(config)?;
    let s = &config.storage;
    // A compaction every compact_interval_s, or sooner once STAGED_MAX
    // samples wait: the samples a chunk holds.
    let per_chunk = (samples_per_s * s.compact_interval_s as f64).min(STAGED_MAX) / series;
    let per_sample = RAW_BYTES_PER_SAMPLE + BYTES_PER_CHUNK / per_chunk.max(1.0);
    let raw_day = samples_per_s * 86_400.0 * per_sample;
    let minute_day = series * 1440.0 * ROLLUP_ROW_BYTES;
    let hour_day = series * 24.0 * ROLLUP_ROW_BYTES;
    let (raw_days, minute_days, hour_days) = (
        f64::from(s.retention_days),
        f64::from(s.minute_rollup_days()),
        f64::from(s.rollup_retention_days),
    );
    let needed = raw_day * raw_days + minute_day * minute_days + hour_day * hour_days;
    let cap = s.max_size_mb as f64 * MB;
    if needed <= cap {
        return None;
    }
    // The store keeps every tier's newest day while it can, shortens raw
    // history first, then the minute rollups, then the hour rollups.
    let hours = hour_day * hour_days;
    let after_raw = cap - hours - minute_day * minute_days;
    let (raw_held, minute_held) = if after_raw >= raw_day {
        ((after_raw / raw_day).min(raw_days), minute_days)
    } else if cap - hours - raw_day >= minute_day {
        // The newest day of each tier fits: fewer minute days.
        let minutes = (cap - hours - raw_day) / minute_day;
        (1.0_f64.min(raw_days), minutes.min(minute_days))
    } else {
        // A day does not fit: raw samples go by the minute down to the kept
        // window, then minute rollups; hour rollups go last.
        let window = KEPT_NEWEST_MS as f64 / 86_400_000.0;
        let raw = ((cap - hours - minute_day) / raw_day).clamp(window, 1.0);
        let minutes = ((cap - hours - raw * raw_day) / minute_day).clamp(0.0, 1.0);
        (raw.min(raw_days), minutes.min(minute_days))
    };
    Some(Shortfall {
        samples_per_s,
        needed_mb: needed / MB,
        raw_days: raw_held,
        minute_days: minute_held,
    })
}

/// The warning for `check-config` and the start log.
pub fn warning(config: &Config) -> Option<Problem> {
    let f = shortfall(config)?;
    let s = &config.storage;
    Some(Problem::new(
        "storage.max_size_mb",
        format!(
            "{} MB holds about {} of raw samples (configured: {} days) and {} of minute rollups (configured: {} days) at this site's ~{:.0} samples/s ({} devices); the configured retention needs about {:.0} MB. The oldest data goes first (docs/store.md, \"Retention and the size cap\"): raise max_size_mb or shorten retention_days / minute_rollup_retention_days",
            s.max_size_mb,
            days(f.raw_days),
            s.retention_days,
            days(f.minute_days),
            s.minute_rollup_days(),
            f.samples_per_s,
            config.devices.len(),
            f.needed_mb
        ),
    ))
}

fn days(d: f64) -> String {
    if d >= 2.0 {
        format!("{d:.0} days")
    } else if d * 24.0 >= 1.0 {
        format!("{:.0} hours", d * 24.0)
    } else {
        format!("{:.0} minutes", d * 1440.0)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A site of `devices` inverters polled at 1 Hz, under `max_size_mb`.
    pub(in crate::config) fn site(devices: usize, max_size_mb: u64) -> Config {
        let mut t = String::from(
            "[http]\nlisten = [\"127.0.0.1:0\"]\nauth = \"none\"\n[storage]\npath = \"x.db\"\n",
        );
        t += &format!(
            "max_size_mb = {max_size_mb}\n[[sites]]\nreference = \"ste_a\"\nname = \"A\"\n"
        );
        for b in 0..devices.div_ceil(200) {
            t += &format!(
                "[[buses]]\nname = \"b{b}\"\ntcp = \"127.0.0.1:{}\"\n",
                1000 + b
            );
        }
        for i in 0..devices {
            t += &format!(
                "[[devices]]\nreference = \"dvc_{i}\"\nname = \"d{i}\"\ntype = \"inverter\"\nsite = \"ste_a\"\nbus = \"b{}\"\nunit_id = {}\npoll_interval_ms = 1000\n",
                i / 200,
                i % 200 + 1
            );
        }
        crate::config::parse(&t).expect("valid")
    }

    #[test]
    fn a_bound_that_holds_everything_says_nothing_and_a_small_one_says_what_it_holds() {
        assert_eq!(shortfall(&site(0, 2048)), None);
        assert_eq!(shortfall(&site(2, 1 << 20)), None);
        // The demo's 5 devices fit the defaults.
        assert_eq!(shortfall(&site(5, 2048)), None);
        // 20 devices at 1 Hz: 260 samples/s; 35 days raw, 90 of minute and
        // 400 of hour rollups need about 3 GB, so 2 GB holds fewer raw days.
        let f = shortfall(&site(20, 2048)).expect("too small");
        assert!((f.samples_per_s - 260.0).abs() < 1e-9);
        assert!(f.needed_mb > 2048.0, "{f:?}");
        assert!(f.raw_days <= 35.0 && f.minute_days <= 400.0, "{f:?}");
        let w = warning(&site(20, 2048)).expect("a warning").to_string();
        assert!(w.contains("storage.max_size_mb"), "{w}");
        assert!(w.contains("configured: 35 days"), "{w}");
        // A thousand devices: hours, not days.
        let f = shortfall(&site(1000, 2048)).expect("too small");
        assert!(f.raw_days < 1.0 || f.minute_days < 400.0, "{f:?}");
    }

    /// The table in docs/store.md ("Retention and the size cap") is what this
    /// estimate gives: MB the defaults' retention needs, and raw days 2 GB holds.
    #[test]
    fn the_documented_table_is_what_the_estimate_gives() {
        for (devices, needed_mb, raw_days, minute_days) in [
            (20, 3986.0, 1.0, 63.8),
            (50, 9965.0, 1.0, 20.8),
            (200, 39_859.0, 0.0035, 0.5),
            (1000, 213_793.0, 0.0035, 0.0),
        ] {
            let f = shortfall(&site(devices, 2048)).expect("too small");
            assert!((f.needed_mb - needed_mb).abs() < 1.0, "{devices}: {f:?}");
            assert!((f.raw_days - raw_days).abs() < 0.05, "{devices}: {f:?}");
            assert!(
                (f.minute_days - minute_days).abs() < 0.05,
                "{devices}: {f:?}"
            );
        }
        // The demo's 5 devices: 1 GB, within the 2 GB default.
        assert!(shortfall(&site(5, 990)).is_some());
        assert_eq!(shortfall(&site(5, 1000)), None);
    }
}
