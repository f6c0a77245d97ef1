//! The samples a second a site's devices give, and the series they fill,
//! estimated from the config alone: the one figure both size estimates start
//! from (`capacity.rs`, what the bound holds; `size_floor.rs`, the least it
//! can be).
//!
//! Pure arithmetic over the config; it must not judge a bound itself.

use super::Config;

/// Properties a device gives per poll, about: a SunSpec inverter 13, a
/// battery 10 to 14, a meter 12 to 16.
pub const PROPERTIES_PER_DEVICE: f64 = 13.0;

/// The samples a second the site's devices give at their poll intervals,
/// and the series they fill; `None` without devices.
pub fn site_rates(config: &Config) -> Option<(f64, f64)> {
    let samples_per_s: f64 = config
        .devices
        .iter()
        .map(|d| PROPERTIES_PER_DEVICE * 1000.0 / d.poll_interval_ms.max(1) as f64)
        .sum();
    if samples_per_s == 0.0 {
        return None;
    }
    Some((
        samples_per_s,
        PROPERTIES_PER_DEVICE * config.devices.len() as f64,
    ))
}
