//! Each device's online state, the devices online per site and type, and
//! when a device that is not online last answered, for `/metrics`.
//!
//! Per-device series carry the `device` label only (a scrape of a site of
//! 1,000 devices stays small); the site and type of a device are in
//! `sitegate_site_devices_online`'s labels, summed per site.

use super::Live;
use crate::metrics::{Collect, Encoder, Kind};

impl Collect for Live {
    fn collect(&self, out: &mut Encoder) {
        let devices = self.devices();
        let states: Vec<(bool, Option<i64>)> = devices
            .iter()
            .map(|d| self.inspect(d.id, |s| (s.online, s.last_seen)))
            .collect();
        let mut online = out.family(
            "sitegate_device_online",
            Kind::Gauge,
            "1 while the device's last poll succeeded.",
        );
        for (d, (on, _)) in devices.iter().zip(&states) {
            online.sample(
                &[("device", d.reference.as_str())],
                if *on { 1.0 } else { 0.0 },
            );
        }
        // (site, type) in config order, with the devices online of each.
        let mut per_site: Vec<(&str, &str, u32)> = Vec::new();
        for (d, (on, _)) in devices.iter().zip(&states) {
            let key = (d.site.as_str(), d.device_type.as_str());
            let i = match per_site.iter().position(|(s, t, _)| (*s, *t) == key) {
                Some(i) => i,
                None => {
                    per_site.push((key.0, key.1, 0));
                    per_site.len() - 1
                }
            };
            per_site[i].2 += u32::from(*on);
        }
        let mut sites = out.family(
            "sitegate_site_devices_online",
            Kind::Gauge,
            "Devices of the site and type whose last poll succeeded.",
        );
        for (site, ty, n) in per_site {
            sites.sample(&[("site", site), ("type", ty)], f64::from(n));
        }
        let mut seen = out.family(
            "sitegate_device_last_seen_timestamp_seconds",
            Kind::Gauge,
            "When a device that is not online last answered a poll, seconds since the Unix epoch (shown while it is not online).",
        );
        for (d, (on, last_seen)) in devices.iter().zip(&states) {
            if let (false, Some(ms)) = (on, last_seen) {
                seen.sample(&[("device", d.reference.as_str())], *ms as f64 / 1000.0);
            }
        }
    }
}
