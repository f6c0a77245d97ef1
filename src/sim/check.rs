//! What the simulator refuses to run: the checks of a [`SimSiteSpec`] before
//! anything starts. Pure; each message names the server, unit or site and
//! the value at fault.

use std::collections::{BTreeMap, BTreeSet};

use super::{SimKind, SimSiteSpec, MAX_MAP_LEN};

impl SimSiteSpec {
    /// Refuses what the simulator cannot run: a non-positive time factor or
    /// rating, SoC limits out of order, a server name or a unit id used twice,
    /// a site named twice, with a negative base load, naming a device that does
    /// not exist or that another site holds.
    pub(crate) fn check(&self) -> Result<(), String> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.time_factor) {
            return Err(format!(
                "time_factor must be positive, found {}",
                self.time_factor
            ));
        }
        if !(self.base_load_w.is_finite() && self.base_load_w >= 0.0) {
            return Err(format!(
                "base_load_w must not be negative, found {}",
                self.base_load_w
            ));
        }
        let mut names = BTreeSet::new();
        let mut all = BTreeSet::new();
        for s in &self.servers {
            if !names.insert(&s.name) {
                return Err(format!("server name {:?} used twice", s.name));
            }
            for d in &s.devices {
                let at = format!("server {:?} unit {}", s.name, d.unit_id);
                if !all.insert((s.name.as_str(), d.unit_id)) {
                    return Err(format!("{at}: unit id used twice"));
                }
                check_device(&at, d)?;
            }
        }
        self.check_sites(&all)
    }

    fn check_sites(&self, devices: &BTreeSet<(&str, u8)>) -> Result<(), String> {
        let mut held: BTreeMap<(&str, u8), &str> = BTreeMap::new();
        let mut sites = BTreeSet::new();
        for g in &self.sites {
            if !sites.insert(&g.site) {
                return Err(format!("site {:?} given twice", g.site));
            }
            if !(g.base_load_w.is_finite() && g.base_load_w >= 0.0) {
                return Err(format!(
                    "site {:?}: base_load_w must not be negative, found {}",
                    g.site, g.base_load_w
                ));
            }
            for (server, unit) in &g.devices {
                let key = (server.as_str(), *unit);
                if !devices.contains(&key) {
                    return Err(format!(
                        "site {:?}: no device at server {server:?} unit {unit}",
                        g.site
                    ));
                }
                if let Some(other) = held.insert(key, &g.site) {
                    return Err(format!(
                        "server {server:?} unit {unit} is in sites {other:?} and {:?}",
                        g.site
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_device(at: &str, d: &super::SimDeviceSpec) -> Result<(), String> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if u32::from(d.sunspec_base) + MAX_MAP_LEN > 1 << 16 {
        return Err(format!(
            "{at}: sunspec_base {} leaves no room for the map below register 65535",
            d.sunspec_base
        ));
    }
    let r = d.response;
    let ramp_ok = r.ramp_percent_per_s.is_none_or(positive);
    if !(r.lag_s.is_finite() && r.lag_s >= 0.0 && ramp_ok) {
        return Err(format!(
            "{at}: need a lag of at least 0 s and a positive ramp, found {} s and {:?} %/s",
            r.lag_s, r.ramp_percent_per_s
        ));
    }
    if let SimKind::Inverter { rated_w } = d.kind {
        if !positive(rated_w) {
            return Err(format!("{at}: rated_w must be positive, found {rated_w}"));
        }
    }
    if let Some((r, _)) = d.kind.battery() {
        if !positive(r.rated_w) || !positive(r.capacity_wh) {
            return Err(format!("{at}: rated_w and capacity_wh must be positive"));
        }
        let ordered = 0.0 <= r.soc_min && r.soc_min < r.soc_max && r.soc_max <= 100.0;
        if !(ordered && r.initial_soc.is_finite()) {
            return Err(format!(
                "{at}: need 0 <= soc_min < soc_max <= 100 and a finite initial_soc, \
                 found {}, {}, {}",
                r.soc_min, r.soc_max, r.initial_soc
            ));
        }
    }
    Ok(())
}
