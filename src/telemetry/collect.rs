//! Each device's online state and last successful poll, for `/metrics`.

use super::Live;
use crate::metrics::{Collect, Encoder, Kind};

impl Collect for Live {
    fn collect(&self, out: &mut Encoder) {
        let devices = self.devices();
        let snapshots: Vec<_> = devices.iter().map(|d| self.snapshot(d.id)).collect();
        let mut online = out.family(
            "sitegate_device_online",
            Kind::Gauge,
            "1 while the device's last poll succeeded.",
        );
        for (d, s) in devices.iter().zip(&snapshots) {
            online.sample(
                &[
                    ("device", d.reference.as_str()),
                    ("site", d.site.as_str()),
                    ("type", d.device_type.as_str()),
                ],
                if s.online { 1.0 } else { 0.0 },
            );
        }
        let mut seen = out.family(
            "sitegate_device_last_seen_timestamp_seconds",
            Kind::Gauge,
            "When the device last answered a poll, seconds since the Unix epoch.",
        );
        for (d, s) in devices.iter().zip(&snapshots) {
            if let Some(ms) = s.last_seen {
                seen.sample(&[("device", d.reference.as_str())], ms as f64 / 1000.0);
            }
        }
    }
}
