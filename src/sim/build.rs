//! What a simulated device is built with beside its spec: its site's
//! largest meter reading, its noise, and integer or float models. Each kind
//! (`inverter.rs`, `battery.rs`, `meter.rs`) reads it; `device.rs` passes it.
//!
//! Plain data; it must not build a device itself.

use super::noise::Jitter;

/// What a device is built with beside its spec.
#[derive(Clone, Copy, Debug)]
pub struct Build {
    /// The most its site's meter may have to show, W (a meter's scale factors).
    pub site_max_w: f64,
    /// Its measurement noise ([`Jitter::CALM`] outside noisy mode).
    pub jitter: Jitter,
    /// Inverters and meters: the float models (113, 213) instead of 103, 203.
    pub float: bool,
}

impl Build {
    /// A calm, integer device on a site whose meter shows up to `site_max_w`.
    pub const fn calm(site_max_w: f64) -> Build {
        Build {
            site_max_w,
            jitter: Jitter::CALM,
            float: false,
        }
    }

    /// Noisy mode: scale factors as fine as each point's range allows.
    pub const fn fine(&self) -> bool {
        !self.jitter.is_calm()
    }
}
