//! The control loop's view of a site: device limits from config completed by what
//! the devices report, and the site's measurements, read from the live state.
//!
//! Reads only; the tightest limit always wins. No decisions here.

use super::alloc::{BatteryView, InverterView};
use super::decide::{Measurements, SiteRules};
use super::hold::{LoopSettings, Meter};
use super::limits::OperatorLimits;
use super::request::ConfiguredLimits;
use super::sources::OperatorSet;
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

/// `limit_w`: the limit the inverter was last told, `None` while released.
pub fn inverter_view(cfg: &DeviceConfig, s: &DeviceSnapshot, limit_w: Option<f64>) -> InverterView {
    InverterView {
        limit_w,
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

/// A meter reading older than this many of its poll intervals is stale.
pub const STALE_POLLS: i64 = 3;

/// How old a reading of `device` may be before it is stale, ms:
/// [`STALE_POLLS`] of its poll intervals.
pub fn stale_after_ms(device: &DeviceConfig) -> i64 {
    STALE_POLLS * device.poll_interval_ms as i64
}

/// What the control loop adds to the live state.
#[derive(Clone, Debug, Default)]
pub struct Context<'a> {
    pub now_ms: i64,
    /// The limit each inverter was last told, in the order of `SiteDevices::inverters`.
    pub inverter_limits: &'a [Option<f64>],
    /// The setpoint each battery was last told, in the order of `SiteDevices::batteries`.
    pub battery_setpoints: &'a [Option<f64>],
    pub operator: OperatorLimits,
    /// Limits a SCADA set over the Modbus server.
    pub modbus: OperatorLimits,
    /// Limits a grid operator's utility server sets.
    pub sources: OperatorSet,
    /// The site's configured grid limits now (the site config's at start,
    /// a config change's applied live since).
    pub configured: ConfiguredLimits,
}

/// The power reading of an online device.
fn power_reading(live: &Live, id: DeviceId) -> Option<crate::telemetry::Reading> {
    live.inspect(id, |s| {
        s.online
            .then(|| s.reading(Property::ActivePower))
            .flatten()
            .filter(|r| r.value.is_finite())
    })
}

/// The sum of `activePower` over `ids`, when every one is online with a reading.
fn sum_power(live: &Live, ids: &[DeviceId]) -> Option<f64> {
    ids.iter()
        .map(|id| power_reading(live, *id).map(|r| r.value))
        .sum()
}

/// The site's meters as the grid loop sees them: every one with a reading
/// younger than [`STALE_POLLS`] poll intervals (a meter whose last poll
/// failed too: its last reading stands until then), or lost.
pub fn meter(live: &Live, meters: &[DeviceId], now_ms: i64) -> Option<Meter> {
    if meters.is_empty() {
        return None;
    }
    let mut sum = 0.0;
    let mut oldest = i64::MAX;
    let mut lag = 0;
    for id in meters {
        let cfg = live.config(*id);
        let (online, reading) = live.inspect(*id, |s| {
            let reading = s.reading(Property::ActivePower);
            (s.online, reading.filter(|r| r.value.is_finite()))
        });
        let max_age = stale_after_ms(&cfg);
        match reading {
            // One failed poll (a timeout on a loaded link, a garbled frame)
            // does not lose the meter: its last reading serves until it is
            // stale, as a slow meter's does.
            _ if !online && reading.is_none_or(|r| now_ms - r.ts_ms > max_age) => {
                return Some(Meter::Lost(format!("meter {} offline", cfg.reference)));
            }
            None => {
                return Some(Meter::Lost(format!(
                    "meter {} has no power reading",
                    cfg.reference
                )));
            }
            Some(r) if now_ms - r.ts_ms > max_age => {
                return Some(Meter::Lost(format!(
                    "no reading from meter {} for {} ms (more than {STALE_POLLS} poll intervals)",
                    cfg.reference,
                    now_ms - r.ts_ms
                )));
            }
            Some(r) => {
                sum += r.value;
                oldest = oldest.min(r.ts_ms);
                lag = lag.max(cfg.report_lag_ms as i64);
            }
        }
    }
    Some(Meter::Fresh {
        grid_w: sum,
        ts_ms: oldest,
        report_lag_ms: lag,
    })
}

pub fn gather(live: &Live, site: &SiteConfig, devices: &SiteDevices, ctx: &Context<'_>) -> Inputs {
    let batteries: Vec<BatteryView> = devices
        .batteries
        .iter()
        .map(|id| {
            let cfg = live.config(*id);
            live.inspect(*id, |s| battery_view(&cfg, s))
        })
        .collect();
    let inverters: Vec<InverterView> = devices
        .inverters
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let limit = ctx.inverter_limits.get(i).copied().flatten();
            let cfg = live.config(*id);
            live.inspect(*id, |s| inverter_view(&cfg, s, limit))
        })
        .collect();
    let meter = meter(live, &devices.meters, ctx.now_ms);
    let mut readings_from_ms = match &meter {
        Some(Meter::Fresh { ts_ms, .. }) => *ts_ms,
        _ => ctx.now_ms,
    };
    let mut online_battery_w = 0.0;
    let mut readings = Vec::new();
    for id in devices.batteries.iter().chain(&devices.inverters) {
        let reading = power_reading(live, *id);
        readings.push(reading.map(|r| (r.ts_ms, r.value)));
        if let Some(r) = reading {
            readings_from_ms = readings_from_ms.min(r.ts_ms);
            if devices.batteries.contains(id) {
                online_battery_w += r.value;
            }
        }
    }
    let measurements = Measurements {
        meter,
        battery_w: sum_power(live, &devices.batteries),
        production_w: sum_power(live, &devices.inverters),
        online_battery_w,
        readings_from_ms,
        readings,
        operator: ctx.operator,
        modbus: ctx.modbus,
        sources: ctx.sources.clone(),
        battery_setpoints: ctx.battery_setpoints.to_vec(),
    };
    let rated_production_w = site
        .rated_production_power
        .map(|p| p.watts())
        .unwrap_or_else(|| inverters.iter().map(|i| i.rated_w).sum());
    let slowest_poll = devices
        .meters
        .iter()
        .chain(&devices.batteries)
        .chain(&devices.inverters)
        .map(|id| live.config(*id).poll_interval_ms as i64)
        .max()
        .unwrap_or(1000);
    let report_lag = devices
        .meters
        .iter()
        .map(|id| live.config(*id).report_lag_ms as i64)
        .max()
        .unwrap_or(0);
    let ramp = site.grid_loop.ramp_percent_per_s / 100.0;
    let grid_loop = site.grid_loop.enabled.then(|| LoopSettings {
        export_order: site.grid_loop.export_order,
        curtailment: site.curtailment_fulfilment,
        storage_ramp_w_per_s: ramp * batteries.iter().map(|b| b.rated_w).sum::<f64>(),
        production_ramp_w_per_s: ramp * inverters.iter().map(|i| i.rated_w).sum::<f64>(),
        settle_ms: 2 * slowest_poll + report_lag + site.control_interval_ms as i64,
    });
    let rules = SiteRules {
        ess: site.ess_fulfilment,
        curtailment: site.curtailment_fulfilment,
        ess_fallback: site.ess_fallback,
        max_import_w: ctx.configured.max_import_w,
        max_export_w: ctx.configured.max_export_w,
        rated_production_w,
        grid_loop,
    };
    Inputs {
        batteries,
        inverters,
        measurements,
        rules,
    }
}
