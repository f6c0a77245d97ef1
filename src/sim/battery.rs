//! A simulated battery inverter: models 1, 701, 120, 124, 802, presented as
//! the simulator's own or as a Fronius GEN24 ([`Brand`]).
//!
//! With `StorCtl_Mod` = 0 it runs self-consumption (the site tells it its share of
//! the PV surplus or deficit); with bits set it keeps to the model-124 window.
//! It moves toward that power with the lag and ramp of its `SimResponse` (real
//! time). Ratings, SoC limits and `ChaGriSet` always win. Owns its registers, SoC and
//! energy counters; it must not know about sockets or other devices.

use tokio::time::Instant;

use sunspec::models::model124::Model124;
use tokio_modbus::ExceptionCode;

use super::build::Build;
use super::common::{self, check_range, RevertTimer, StorageRating};
use super::noise::Jitter;
use super::physics::{BatteryStep, Tick, Window};
use super::SimResponse;
use crate::modbus::sunspec::layout::battery as layout;
pub use crate::modbus::sunspec::layout::battery::BatteryRating;
use crate::modbus::sunspec::layout::map::{Block, RegisterMap};
use crate::register::codec::ValueType::{I16, U16};

mod brand;
mod publish;

pub use brand::Brand;
use layout::Blocks;
use publish::Publish;

/// Storage control as set in model 124, in percent of `WChaMax`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Controls {
    pub mode: u16,
    pub in_pct: f64,
    pub out_pct: f64,
}

pub struct Battery {
    rating: BatteryRating,
    blocks: Blocks,
    soc: f64,
    /// Energy discharged (injected) and charged (absorbed), Wh.
    injected_wh: f64,
    absorbed_wh: f64,
    /// AC power, + discharging.
    ac_w: f64,
    revert: RevertTimer,
    response: SimResponse,
    brand: Brand,
    jitter: Jitter,
}

impl Battery {
    pub fn build(
        (base, unit_id, serial): (u16, u8, &str),
        r: BatteryRating,
        response: SimResponse,
        brand: Brand,
        build: Build,
    ) -> (RegisterMap, Battery) {
        let mut b = RegisterMap::sunspec(base);
        let model = brand.model(r.rated_w, r.capacity_wh);
        common::common_as(&mut b, brand.manufacturer(), &model, serial, unit_id);
        let m701 = layout::ac_measurement(&mut b, r.rated_w, build.fine());
        let storage = StorageRating {
            capacity_wh: r.capacity_wh,
            max_charge_w: r.rated_w,
            max_discharge_w: r.rated_w,
        };
        common::nameplate(&mut b, r.rated_w, Some(storage));
        let m124 = layout::storage_controls(&mut b, &r);
        let m802 = layout::battery_base(&mut b, &r, build.fine());
        let soc = r.initial_soc.clamp(r.soc_min, r.soc_max);
        let bat = Battery {
            rating: r,
            blocks: Blocks { m701, m124, m802 },
            soc,
            // Plausible lifetime counters: about 50 full cycles.
            injected_wh: 48.0 * r.capacity_wh,
            absorbed_wh: 50.0 * r.capacity_wh,
            ac_w: 0.0,
            revert: RevertTimer::default(),
            response,
            brand,
            jitter: build.jitter,
        };
        let mut map = b.finish();
        bat.publish(&mut map, Tick::default());
        (map, bat)
    }

    pub fn rated_w(&self) -> f64 {
        self.rating.rated_w
    }

    /// AC power, W, + discharging.
    pub fn ac_power_w(&self) -> f64 {
        self.ac_w
    }

    pub fn soc(&self) -> f64 {
        self.soc
    }

    /// (discharged, charged) Wh.
    pub fn energy_wh(&self) -> (f64, f64) {
        (self.injected_wh, self.absorbed_wh)
    }

    fn m124(&self) -> Block<Model124> {
        self.blocks.m124
    }

    /// The model-124 controls as the registers hold them.
    pub fn controls(&self, map: &RegisterMap) -> Controls {
        let c = self.m124();
        let sf = &Model124::IN_OUT_W_RTE_SF;
        Controls {
            mode: map.get(c, &Model124::STOR_CTL_MOD, U16) as u16,
            in_pct: map.get_scaled(c, &Model124::IN_W_RTE, I16, sf),
            out_pct: map.get_scaled(c, &Model124::OUT_W_RTE, I16, sf),
        }
    }

    /// Range checks a device would make on its setpoints.
    pub fn validate(
        &self,
        map: &RegisterMap,
        addr: u16,
        values: &[u16],
    ) -> Result<(), ExceptionCode> {
        let c = self.m124();
        let pct = |sf: f64| 100.0 / 10f64.powf(sf);
        let rte_max = pct(map.get(c, &Model124::IN_OUT_W_RTE_SF, I16));
        for p in [&Model124::IN_W_RTE, &Model124::OUT_W_RTE] {
            check_range(c.addr(p), addr, values, I16, -rte_max, rte_max)?;
        }
        check_range(c.addr(&Model124::STOR_CTL_MOD), addr, values, U16, 0.0, 3.0)?;
        check_range(c.addr(&Model124::CHA_GRI_SET), addr, values, U16, 0.0, 1.0)?;
        let rsv_max = pct(map.get(c, &Model124::MIN_RSV_PCT_SF, I16));
        check_range(
            c.addr(&Model124::MIN_RSV_PCT),
            addr,
            values,
            U16,
            0.0,
            rsv_max,
        )?;
        layout::validate_802(self.blocks.m802, addr, values)
    }

    /// An accepted write arrived: restart the model-124 revert timer if it touched it.
    pub fn on_write(&mut self, addr: u16, count: u16, at: Instant) {
        if self.m124().overlaps(addr, count) {
            self.revert.touch(at);
        }
    }

    /// `InOutWRte_RvrtTms` expired without a write to model 124: release control
    /// (`StorCtl_Mod` = 0, both rates back to 100 % unless the brand keeps them).
    pub fn check_revert(&mut self, map: &mut RegisterMap, now: Instant) {
        let c = self.m124();
        let timeout = map.get(c, &Model124::IN_OUT_W_RTE_RVRT_TMS, U16);
        if self.revert.fire(now, timeout) {
            tracing::debug!(
                timeout,
                "model 124 revert timer fired: storage control released"
            );
            map.set(c, &Model124::STOR_CTL_MOD, U16, 0.0);
            if self.brand.revert_resets_rates() {
                let sf = &Model124::IN_OUT_W_RTE_SF;
                map.set_scaled(c, &Model124::IN_W_RTE, I16, 100.0, sf);
                map.set_scaled(c, &Model124::OUT_W_RTE, I16, 100.0, sf);
            }
        }
    }

    /// Advances by one step. `own_w` is its self-consumption wish
    /// (charge-positive); `pv_surplus_w` its share of PV left after the load,
    /// the most it may charge while `ChaGriSet` = PV. Returns AC power, +
    /// discharging.
    pub fn step(
        &mut self,
        map: &mut RegisterMap,
        (own_w, pv_surplus_w): (f64, f64),
        tick: Tick,
    ) -> f64 {
        let (dt_s, real_dt_s) = (tick.dt_s, tick.real_dt_s);
        let c = self.m124();
        let ctl = self.controls(map);
        let w_cha_max = map
            .get_scaled(c, &Model124::W_CHA_MAX, U16, &Model124::W_CHA_MAX_SF)
            .min(self.rating.rated_w);
        let min_rsv = map.get_scaled(c, &Model124::MIN_RSV_PCT, U16, &Model124::MIN_RSV_PCT_SF);
        let grid_charge = map.get(c, &Model124::CHA_GRI_SET, U16) == 1.0;
        let step = BatteryStep {
            own_w,
            window: (ctl.mode != 0)
                .then(|| Window::from_controls(ctl.mode, ctl.in_pct, ctl.out_pct, w_cha_max)),
            max_charge_w: w_cha_max,
            max_discharge_w: self.rating.rated_w,
            pv_only_cap_w: (!grid_charge).then_some(pv_surplus_w),
            soc: self.soc,
            soc_min: self.rating.soc_min.max(min_rsv).min(self.rating.soc_max),
            soc_max: self.rating.soc_max,
            capacity_wh: self.rating.capacity_wh,
            dt_s,
        };
        let connected = layout::connected(self.blocks.m802, map);
        let target = if connected { step.power() } else { 0.0 };
        let p = step.within_energy(self.response.follow(
            -self.ac_w,
            target,
            real_dt_s,
            self.rating.rated_w,
        ));
        self.soc = step.soc_after(p);
        // The SoC moves at the simulated speed (the demo's batteries fill in
        // minutes); the counters in real time, as the agent stamps them.
        if p > 0.0 {
            self.absorbed_wh += p * real_dt_s / 3600.0;
        } else {
            self.injected_wh += -p * real_dt_s / 3600.0;
        }
        self.ac_w = -p;
        self.publish(map, tick);
        self.ac_w
    }

    fn publish(&self, map: &mut RegisterMap, tick: Tick) {
        Publish {
            rating: &self.rating,
            soc: self.soc,
            ac_w: self.ac_w,
            injected_wh: self.injected_wh,
            absorbed_wh: self.absorbed_wh,
            tick,
            jitter: self.jitter.at(tick.real_s),
        }
        .write(&self.blocks, map);
    }
}
