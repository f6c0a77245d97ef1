//! A simulated three-phase PV inverter: models 1, 103 (or the float model 113
//! in noisy mode), 120, 121, 123.
//!
//! Output follows the sun curve, capped by `WMax` and, while `WMaxLim_Ena` = 1,
//! by `WMaxLimPct` % of `WMax`, with the lag and ramp of its `SimResponse` (in
//! real time: a setpoint or a sun step is followed in seconds); its
//! measurements carry its noise (`publish.rs`). Owns its register addresses
//! and its energy counter; it must not know about sockets, other devices or
//! the site balance.

use tokio::time::Instant;

use sunspec::models::model120::Model120;
use sunspec::models::model121::Model121;
use sunspec::models::model123::Model123;
use tokio_modbus::ExceptionCode;

use super::build::Build;
use super::common::{self, check_range, RevertTimer};
use super::noise::Jitter;
use super::physics::{sun_fraction, Tick};
use super::SimResponse;
use crate::modbus::sunspec::layout::inverter as layout;
use crate::modbus::sunspec::layout::map::{Block, RegisterMap};
use crate::register::codec::ValueType::{I16, U16};

mod publish;

use publish::Measure;

/// SunSpec `St` (models 103 and 113) values used here.
const ST_OFF: f64 = 1.0;
const ST_SLEEPING: f64 = 2.0;
const ST_MPPT: f64 = 4.0;
const ST_THROTTLED: f64 = 5.0;

pub struct Inverter {
    rated_w: f64,
    measure: Measure,
    m121: Block<Model121>,
    m123: Block<Model123>,
    /// Lifetime yield, Wh (starts non-zero: an acc32 of 0 reads "not implemented").
    wh: f64,
    ac_w: f64,
    available_w: f64,
    revert: RevertTimer,
    response: SimResponse,
    jitter: Jitter,
}

impl Inverter {
    /// Lays out the inverter's map with the "SunS" marker at `base`.
    pub fn build(
        (base, unit_id, serial): (u16, u8, &str),
        rated_w: f64,
        response: SimResponse,
        build: Build,
    ) -> (RegisterMap, Inverter) {
        let mut b = RegisterMap::sunspec(base);
        let family = if build.float { "SIM-INVF" } else { "SIM-INV" };
        let model = format!("{family}-{}", (rated_w / 1000.0).round());
        common::common(&mut b, &model, serial, unit_id);

        let measure = if build.float {
            Measure::Float(layout::measurement_float(&mut b))
        } else {
            Measure::Int(layout::measurement(&mut b, rated_w, build.fine()))
        };
        let n = common::nameplate(&mut b, rated_w, None);
        let w_rtg_sf = b.get(n, &Model120::W_RTG_SF, I16);
        let s = layout::settings(&mut b, rated_w, w_rtg_sf);
        let c = layout::controls(&mut b);

        let inv = Inverter {
            rated_w,
            measure,
            m121: s,
            m123: c,
            wh: (rated_w * 1000.0).max(1.0),
            ac_w: 0.0,
            available_w: 0.0,
            revert: RevertTimer::default(),
            response,
            jitter: build.jitter,
        };
        let mut map = b.finish();
        inv.publish(&mut map, Tick::default(), ST_SLEEPING);
        (map, inv)
    }

    /// Production now, W (+ produced).
    pub fn ac_power_w(&self) -> f64 {
        self.ac_w
    }

    /// What the sun offers now, W, before any limit.
    pub fn available_w(&self) -> f64 {
        self.available_w
    }

    pub fn energy_wh(&self) -> f64 {
        self.wh
    }

    /// The model-123 limit in % of `WMax` while `WMaxLim_Ena` = 1.
    pub fn limit_pct(&self, map: &RegisterMap) -> Option<f64> {
        let c = self.m123;
        (map.get(c, &Model123::W_MAX_LIM_ENA, U16) == 1.0).then(|| {
            map.get_scaled(
                c,
                &Model123::W_MAX_LIM_PCT,
                U16,
                &Model123::W_MAX_LIM_PCT_SF,
            )
        })
    }

    /// Range checks a device would make on its setpoints.
    pub fn validate(
        &self,
        map: &RegisterMap,
        addr: u16,
        values: &[u16],
    ) -> Result<(), ExceptionCode> {
        let c = self.m123;
        let pct_max = 100.0 / 10f64.powf(map.get(c, &Model123::W_MAX_LIM_PCT_SF, I16));
        check_range(
            c.addr(&Model123::W_MAX_LIM_PCT),
            addr,
            values,
            U16,
            0.0,
            pct_max,
        )?;
        let switches = [
            c.addr(&Model123::CONN),
            c.addr(&Model123::W_MAX_LIM_ENA),
            c.addr(&Model123::OUT_PF_SET_ENA),
            c.addr(&Model123::V_AR_PCT_ENA),
        ];
        for point in switches {
            check_range(point, addr, values, U16, 0.0, 1.0)?;
        }
        Ok(())
    }

    /// An accepted write arrived: restart the model-123 revert timer if it touched it.
    pub fn on_write(&mut self, addr: u16, count: u16, at: Instant) {
        if self.m123.overlaps(addr, count) {
            self.revert.touch(at);
        }
    }

    /// `WMaxLimPct_RvrtTms` expired without a write to model 123: disable the limit.
    pub fn check_revert(&mut self, map: &mut RegisterMap, now: Instant) {
        let c = self.m123;
        let timeout = map.get(c, &Model123::W_MAX_LIM_PCT_RVRT_TMS, U16);
        if self.revert.fire(now, timeout) {
            tracing::debug!(timeout, "model 123 revert timer fired: limit disabled");
            map.set(c, &Model123::W_MAX_LIM_ENA, U16, 0.0);
        }
    }

    /// Advances by one step; returns the AC output, W. `sun` overrides the sun
    /// curve (fraction of the rating the sun offers now).
    pub fn step(&mut self, map: &mut RegisterMap, tick: Tick, sun: Option<f64>) -> f64 {
        self.available_w = self.rated_w * sun.unwrap_or_else(|| sun_fraction(tick.sim_ms));
        let w_max = map
            .get_scaled(self.m121, &Model121::W_MAX, U16, &Model121::W_MAX_SF)
            .min(self.rated_w);
        let cap = match self.limit_pct(map) {
            Some(pct) => w_max * pct / 100.0,
            None => w_max,
        };
        let connected = map.get(self.m123, &Model123::CONN, U16) == 1.0;
        let (target, st) = if !connected {
            (0.0, ST_OFF)
        } else if self.available_w <= 0.0 {
            (0.0, ST_SLEEPING)
        } else if self.available_w > cap {
            (cap.max(0.0), ST_THROTTLED)
        } else {
            (self.available_w, ST_MPPT)
        };
        let w = self
            .response
            .follow(self.ac_w, target, tick.real_dt_s, self.rated_w);
        self.ac_w = w;
        // Real time, as the agent stamps its readings: the counter is what
        // the power carried (`docs/devices.md`, "The simulator").
        self.wh += w * tick.real_dt_s / 3600.0;
        self.publish(map, tick, st);
        w
    }
}
