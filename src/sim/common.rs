//! Pieces every simulated device shares: the simulator's Common model and
//! the revert watchdog of the control models. The register layout they all
//! use (Common, Nameplate, scale factors, write checks) is the SunSpec
//! image's (`modbus::sunspec::layout::common`), re-exported here.
//!
//! No physics and no I/O here.

use tokio::time::Instant;

pub use crate::modbus::sunspec::layout::common::{
    check_range, common_as, fit_sf, nameplate, StorageRating, BATTERY_V, GRID_LL_V, GRID_V,
    I16_LIMIT,
};
use crate::modbus::sunspec::layout::map::MapBuilder;

/// Manufacturer in the Common model.
pub const MANUFACTURER: &str = "sitegate";

/// Appends the Common model (L = 66, trailing pad included).
pub fn common(b: &mut MapBuilder, model: &str, serial: &str, unit_id: u8) {
    common_as(b, MANUFACTURER, model, serial, unit_id);
}

/// The `*_RvrtTms` watchdog of a control model: real time, not simulated time
/// (the agent refreshes in real time). Any accepted write to the model restarts
/// it; a timeout of 0 never fires.
#[derive(Debug, Default)]
pub struct RevertTimer {
    last_write: Option<Instant>,
}

impl RevertTimer {
    pub fn touch(&mut self, at: Instant) {
        self.last_write = Some(at);
    }

    /// True once when `timeout_s` > 0 has passed since the last write; then the
    /// timer disarms until the next write.
    pub fn fire(&mut self, now: Instant, timeout_s: f64) -> bool {
        match self.last_write {
            Some(t)
                if timeout_s > 0.0
                    && now.saturating_duration_since(t).as_secs_f64() >= timeout_s =>
            {
                self.last_write = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn revert_timer_fires_once_after_timeout() {
        let t0 = Instant::now();
        let mut t = RevertTimer::default();
        assert!(!t.fire(t0 + Duration::from_secs(100), 1.0), "never written");
        t.touch(t0);
        assert!(!t.fire(t0 + Duration::from_millis(900), 1.0));
        assert!(!t.fire(t0 + Duration::from_secs(5), 0.0), "0 = no timeout");
        assert!(t.fire(t0 + Duration::from_secs(1), 1.0));
        assert!(!t.fire(t0 + Duration::from_secs(2), 1.0));
    }
}
