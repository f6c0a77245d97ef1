//! Each served site: the task that keeps its map (`site_map.rs`) current from
//! the devices' latest values and the steering state, and the SCADA limit a
//! client may write into it (held while refreshed within the heartbeat, then
//! the failsafe or nothing).
//!
//! The task is the only writer of a site's map; connections read the newest
//! one without waiting. A SCADA limit reaches the steering as the site's
//! `modbus` limit, which can only tighten the limits in force; it never
//! commands a device itself. Each change of the SCADA's limit (a write that
//! sets, changes or ends it, a lapsed heartbeat) is one record of the site's
//! steering history; a refresh that changes nothing is none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::frame::Exception;
use super::peer::Peer;
use super::site_map::{self, SiteFacts, SiteMap, SteeringFacts, NONE_U32};
use super::stats::ServerStats;
use crate::config::ServedSite;
use crate::model::time::now_ms;
use crate::model::{DeviceType, Property};
use crate::steering::audit::{limit_change, AuditEvent, AuditKind, LimitReason};
use crate::steering::limits::{LimitSource, OperatorLimits};
use crate::steering::runtime::SiteRuntime;
use crate::steering::SteeringService;
use crate::telemetry::Live;

/// How often a site's map is rebuilt.
const REFRESH: Duration = Duration::from_millis(250);

/// The served sites by unit id.
#[derive(Default)]
pub struct Sites {
    by_unit: HashMap<u8, Arc<SiteShare>>,
}

impl Sites {
    pub fn add(
        &mut self,
        unit_id: u8,
        config: ServedSite,
        steering: SteeringService,
    ) -> Arc<SiteShare> {
        let share = Arc::new(SiteShare {
            unit_id,
            config,
            steering,
            map: RwLock::new(None),
            scada: Mutex::new(Scada::default()),
            runtime: RwLock::new(None),
        });
        self.by_unit.insert(unit_id, share.clone());
        share
    }

    pub fn get(&self, unit: u8) -> Option<&Arc<SiteShare>> {
        self.by_unit.get(&unit)
    }
}

/// A SCADA's limit on one site.
#[derive(Clone, Debug, Default, PartialEq)]
struct Scada {
    /// The export limit written, W.
    export_w: Option<f64>,
    /// It holds until then without another write.
    until: Option<Instant>,
    /// The heartbeat stopped and the failsafe holds.
    failsafe: bool,
    /// The client that wrote last.
    client: Option<Peer>,
}

/// One site as the server shares it.
pub struct SiteShare {
    unit_id: u8,
    config: ServedSite,
    /// Where the history records go.
    steering: SteeringService,
    map: RwLock<Option<Arc<SiteMap>>>,
    scada: Mutex<Scada>,
    runtime: RwLock<Option<Arc<SiteRuntime>>>,
}

impl SiteShare {
    /// Registers of the newest map; 0x0B before the first one.
    pub fn read(&self, addr: u16, count: u16) -> Result<Vec<u16>, Exception> {
        let map = read(&self.map)
            .clone()
            .ok_or(Exception::GatewayTargetFailed)?;
        map.map
            .read(addr, count)
            .map_err(|_| Exception::IllegalDataAddress)
    }

    /// A SCADA's write: model 123 `WMaxLimPct` (a share of the rated
    /// production, as an export limit), `WMaxLim_Ena` (0 takes the SCADA's
    /// limit away), or the vendor model's export limit in W. Anything else
    /// is refused: 01 where the site takes no control, 02 for another
    /// register, 03 for a value out of range.
    pub fn write(
        &self,
        addr: u16,
        values: &[u16],
        peer: &Peer,
        stats: &ServerStats,
    ) -> Result<(), Exception> {
        if !self.config.control {
            return Err(Exception::IllegalFunction);
        }
        let (map, runtime) = (read(&self.map).clone(), read(&self.runtime).clone());
        let (Some(map), Some(runtime)) = (map, runtime) else {
            return Err(Exception::GatewayTargetFailed);
        };
        let w = map.writable;
        let rated = map.rated_production_w;
        let export_w = match (addr, values) {
            // A share of nothing: the site has no rated production to take
            // it of, and 0 W would be read as "export nothing".
            (a, [_]) if a == w.w_max_lim_pct && rated <= 0.0 => {
                return Err(Exception::IllegalDataValue)
            }
            (a, [raw]) if a == w.w_max_lim_pct => {
                let pct = crate::register::codec::apply_sf(f64::from(*raw), w.w_max_lim_pct_sf);
                if !(0.0..=100.0).contains(&pct) {
                    return Err(Exception::IllegalDataValue);
                }
                Some(rated * pct / 100.0)
            }
            (a, [1]) if a == w.w_max_lim_ena => return Ok(()),
            (a, [0]) if a == w.w_max_lim_ena => None,
            (a, [_]) if a == w.w_max_lim_ena => return Err(Exception::IllegalDataValue),
            (a, [hi, lo]) if a == w.scada_export => {
                let v = (u32::from(*hi) << 16) | u32::from(*lo);
                (v != NONE_U32).then_some(f64::from(v))
            }
            _ => return Err(Exception::IllegalDataAddress),
        };
        tracing::info!(
            site = %self.config.site,
            unit = self.unit_id,
            client = %peer,
            register = addr,
            values = ?values,
            export_limit_w = ?export_w,
            "SCADA limit written over Modbus"
        );
        stats.limit_taken();
        let mut s = lock(&self.scada);
        let reason = limit_change(s.export_w, s.failsafe, export_w);
        *s = Scada {
            export_w,
            until: export_w.map(|_| Instant::now() + Duration::from_secs(self.config.heartbeat_s)),
            failsafe: false,
            client: Some(peer.clone()),
        };
        let limits = OperatorLimits {
            max_export_w: export_w,
            ..OperatorLimits::default()
        };
        drop(s);
        runtime.set_modbus_limits(limits);
        if let Some(reason) = reason {
            self.note(peer.to_string(), Some(addr), export_w, reason);
        }
        Ok(())
    }

    /// One record of the site's history: the SCADA's limit changed.
    fn note(&self, client: String, register: Option<u16>, w: Option<f64>, reason: LimitReason) {
        self.steering.note(AuditEvent {
            site: self.config.site.clone(),
            at_ms: now_ms(),
            kind: AuditKind::ModbusLimit {
                client,
                unit_id: self.unit_id,
                register,
                max_export_w: w,
                reason,
            },
        });
    }

    /// Ends a SCADA limit whose heartbeat stopped: the failsafe holds (until
    /// a new write), or the configured limits alone.
    fn expire(&self, now: Instant, rated_w: f64, runtime: &SiteRuntime) {
        let mut s = lock(&self.scada);
        if s.until.is_none_or(|u| now < u) {
            return;
        }
        let failsafe = self.config.failsafe_export.map(|p| p.watts(rated_w));
        tracing::warn!(
            site = %self.config.site,
            heartbeat_s = self.config.heartbeat_s,
            failsafe_export_w = ?failsafe,
            "SCADA heartbeat stopped: its limit ends"
        );
        let client = s.client.as_ref().map_or_else(String::new, Peer::to_string);
        *s = Scada {
            export_w: failsafe,
            until: None,
            failsafe: failsafe.is_some(),
            client: s.client.take(),
        };
        drop(s);
        runtime.set_modbus_limits(OperatorLimits {
            max_export_w: failsafe,
            ..OperatorLimits::default()
        });
        let reason = match failsafe {
            Some(_) => LimitReason::HeartbeatFailsafe,
            None => LimitReason::HeartbeatEnded,
        };
        self.note(client, None, failsafe, reason);
    }
}

/// Keeps `share`'s map current until `cancel`.
pub async fn keep(
    share: Arc<SiteShare>,
    live: Arc<Live>,
    steering: SteeringService,
    cancel: CancellationToken,
) {
    let reference = share.config.site.clone();
    let Ok(runtime) = steering.site(&reference).cloned() else {
        tracing::warn!(site = %reference, "no steering for the site: its Modbus unit answers 0x0B");
        return;
    };
    *write(&share.runtime) = Some(runtime.clone());
    loop {
        let now = Instant::now();
        let rated = steering
            .site_view(&reference)
            .map(|v| v.rated_production_w)
            .unwrap_or(0.0);
        share.expire(now, rated, &runtime);
        let state = steering.state(&reference).await.ok();
        let mut facts = facts(&live, &reference, rated);
        facts.unit_id = share.unit_id;
        facts.steering = steering_facts(state.as_ref(), &lock(&share.scada), now);
        *write(&share.map) = Some(Arc::new(site_map::build(&facts)));
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(REFRESH) => {}
        }
    }
}

/// The site's devices' latest values, summed and weighted.
fn facts(live: &Live, site: &str, rated_production_w: f64) -> SiteFacts {
    let mut f = SiteFacts {
        reference: site.to_string(),
        rated_production_w,
        ..SiteFacts::default()
    };
    let add = |sum: &mut Option<f64>, v: Option<f64>| {
        if let Some(v) = v {
            *sum = Some(sum.unwrap_or(0.0) + v);
        }
    };
    let (mut limit_sum, mut limit_rated) = (0.0, 0.0);
    let (mut soc_sum, mut soc_cap, mut soc_plain, mut soc_n) = (0.0, 0.0, 0.0, 0);
    for d in live.devices().iter().filter(|d| d.site == site) {
        let snap = live.snapshot(d.id);
        let value = |p: Property| {
            snap.online
                .then(|| snap.reading(p).map(|r| r.value).filter(|v| v.is_finite()))
                .flatten()
        };
        let rated = d.rated_power_w.or(snap.info.rated_power_w).unwrap_or(0.0);
        match d.device_type {
            DeviceType::Inverter => {
                add(&mut f.production_w, value(Property::ActivePower));
                add(&mut f.produced_wh, value(Property::TotalEnergyProduced));
                if let Some(pct) = value(Property::ActivePowerLimit) {
                    limit_sum += pct * rated.max(1.0);
                    limit_rated += rated.max(1.0);
                }
            }
            DeviceType::Meter => add(&mut f.grid_w, value(Property::ActivePower)),
            DeviceType::Battery => {
                add(&mut f.storage_w, value(Property::ActivePower));
                let cap = d.capacity_wh.or(snap.info.capacity_wh).unwrap_or(0.0);
                f.capacity_wh += cap;
                f.storage_rated_w += rated;
                if let Some(soc) = value(Property::Soc) {
                    soc_sum += soc * cap;
                    soc_cap += cap;
                    soc_plain += soc;
                    soc_n += 1;
                }
            }
        }
    }
    f.production_limit_pct = (limit_rated > 0.0).then(|| limit_sum / limit_rated);
    f.soc = if soc_cap > 0.0 {
        Some(soc_sum / soc_cap)
    } else {
        (soc_n > 0).then(|| soc_plain / f64::from(soc_n))
    };
    f
}

fn steering_facts(
    state: Option<&crate::steering::view::SiteState>,
    scada: &Scada,
    now: Instant,
) -> SteeringFacts {
    let mut s = SteeringFacts {
        scada_export_w: scada.export_w,
        scada_left_s: scada.until.map_or(0, |u| {
            u.saturating_duration_since(now)
                .as_secs()
                .min(u64::from(u16::MAX)) as u16
        }),
        ..SteeringFacts::default()
    };
    let Some(state) = state else { return s };
    let a = &state.active;
    let untils = [
        a.ess.as_ref().map(|e| e.until),
        a.curtailment.as_ref().map(|e| e.until),
        a.maximize_grid_import.as_ref().map(|e| e.until),
        a.grid_limit.as_ref().map(|e| e.until),
    ];
    for (bit, until) in untils.iter().enumerate() {
        if until.is_some() {
            s.active |= 1 << bit;
        }
    }
    if scada.export_w.is_some() {
        s.active |= 1 << 4;
    }
    s.valid_until_s = untils
        .iter()
        .flatten()
        .min()
        .map(|ms| (ms / 1000).clamp(0, i64::from(u32::MAX - 1)) as u32);
    let g = &state.grid_loop.grid;
    s.loop_mode = match g.mode {
        crate::steering::hold::LoopMode::Off => 0,
        crate::steering::hold::LoopMode::Free => 1,
        crate::steering::hold::LoopMode::HoldingExport => 2,
        crate::steering::hold::LoopMode::HoldingImport => 3,
        crate::steering::hold::LoopMode::MeterLost => 4,
    };
    let source = |src: LimitSource| match src {
        LimitSource::Config => 1,
        LimitSource::GridLimit => 2,
        LimitSource::GridSignal => 3,
        LimitSource::Modbus => 4,
        LimitSource::Csip => 5,
        LimitSource::Eebus => 6,
    };
    s.max_import = g.limits.import.map(|l| (l.w, source(l.source)));
    s.max_export = g.limits.export.map(|l| (l.w, source(l.source)));
    s
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock holds plain values that are whole: keep using them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
