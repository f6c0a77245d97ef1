//! The control loop's view of a site: device limits from config completed by what
//! the devices report, and the site's measurements, read from the live state.
//!
//! Reads only; the tightest limit always wins. No decisions here.

use super::alloc::{BatteryView, InverterView};
use super::decide::{Measurements, SiteRules};
use crate::config::{DeviceConfig, SiteConfig};
use crate::model::{DeviceId, DeviceType, Property};
use crate::telemetry::{DeviceInfo, DeviceSnapshot, Live};

/// A site's devices by role, in config order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteDevices {
    pub batteries: Vec<DeviceId>,
    pub inverters: Vec<DeviceId>,
    pub meters: Vec<DeviceId>,
}

impl SiteDevices {
    pub fn of(site: &str, devices: &[DeviceConfig]) -> Self {
        let mut s = SiteDevices::default();
        for d in devices.iter().filter(|d| d.site == site) {
            match d.device_type {
                DeviceType::Battery => s.batteries.push(d.id),
                DeviceType::Inverter => s.inverters.push(d.id),
                DeviceType::Meter => s.meters.push(d.id),
            }
        }
        s
    }
}

fn value(s: &DeviceSnapshot, p: Property) -> Option<f64> {
    s.reading(p).map(|r| r.value).filter(|v| v.is_finite())
}

fn min_of(values: &[Option<f64>]) -> Option<f64> {
    values.iter().flatten().copied().reduce(f64::min)
}

/// Without an explicit priority a device comes after those with one.
fn priority(cfg: &DeviceConfig) -> u32 {
    cfg.priority.unwrap_or(u32::MAX)
}

/// A battery's rating: configured, else reported by the device, else the
/// tighter of its configured charge and discharge limits. `None` when nothing
/// says: the battery is then steered at 0 W (and its steering state says why).
pub fn battery_rating(cfg: &DeviceConfig, info: &DeviceInfo) -> Option<f64> {
    cfg.rated_power_w
        .or(info.rated_power_w)
        .or(min_of(&[cfg.max_charge_power_w, cfg.max_discharge_power_w]))
}

/// A battery's view. An offline battery can do nothing now (its share is spread
/// over the others).
pub fn battery_view(cfg: &DeviceConfig, s: &DeviceSnapshot) -> BatteryView {
    let rated = battery_rating(cfg, &s.info).unwrap_or(0.0);
    let online = s.online;
    let cap = |configured: Option<f64>, reported: Option<f64>| {
        if !online {
            return 0.0;
        }
        min_of(&[configured, reported, Some(rated)])
            .unwrap_or(0.0)
            .max(0.0)
    };
    BatteryView {
        rated_w: rated,
        max_charge_w: cap(cfg.max_charge_power_w, value(s, Property::MaxChargePower)),
        max_discharge_w: cap(
            cfg.max_discharge_power_w,
            value(s, Property::MaxDischargePower),
        ),
        soc: value(s, Property::Soc),
        soc_min: cfg.soc_min.unwrap_or(0.0),
        soc_max: cfg.soc_max.unwrap_or(100.0),
        capacity_wh: cfg.capacity_wh.or(s.info.capacity_wh),
        priority: priority(cfg),
    }
}

pub fn inverter_view(cfg: &DeviceConfig, s: &DeviceSnapshot) -> InverterView {
    InverterView {
        rated_w: cfg.rated_power_w.or(s.info.rated_power_w).unwrap_or(0.0),
        measured_w: if s.online {
            value(s, Property::ActivePower)
        } else {
            None
        },
        priority: priority(cfg),
    }
}

/// Everything the decision needs from the live state.
pub struct Inputs {
    pub batteries: Vec<BatteryView>,
    pub inverters: Vec<InverterView>,
    pub measurements: Measurements,
    pub rules: SiteRules,
}

/// The sum of `activePower` over `ids`, when every one is online with a reading.
fn sum_power(live: &Live, ids: &[DeviceId]) -> Option<f64> {
    ids.iter()
        .map(|id| {
            let s = live.snapshot(*id);
            if s.online {
                value(&s, Property::ActivePower)
            } else {
                None
            }
        })
        .sum()
}

pub fn gather(live: &Live, site: &SiteConfig, devices: &SiteDevices) -> Inputs {
    let batteries: Vec<BatteryView> = devices
        .batteries
        .iter()
        .map(|id| battery_view(live.config(*id), &live.snapshot(*id)))
        .collect();
    let inverters: Vec<InverterView> = devices
        .inverters
        .iter()
        .map(|id| inverter_view(live.config(*id), &live.snapshot(*id)))
        .collect();
    let grid_w = if devices.meters.is_empty() {
        None
    } else {
        sum_power(live, &devices.meters)
    };
    let measurements = Measurements {
        grid_w,
        battery_w: sum_power(live, &devices.batteries),
        production_w: sum_power(live, &devices.inverters),
    };
    let rules = SiteRules {
        ess: site.ess_fulfilment,
        curtailment: site.curtailment_fulfilment,
        ess_fallback: site.ess_fallback,
        max_import_w: site.max_import.map(|p| p.watts()),
        max_export_w: site.max_export.map(|p| p.watts()),
        rated_production_w: site
            .rated_production_power
            .map(|p| p.watts())
            .unwrap_or_else(|| inverters.iter().map(|i| i.rated_w).sum()),
    };
    Inputs {
        batteries,
        inverters,
        measurements,
        rules,
    }
}
