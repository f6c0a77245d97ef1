//! How the simulated battery's state is written into models 701, 124 and 802
//! (measurements, SoC, charge status), with the battery's noise of the
//! current real second. No decisions about power here.

use sunspec::models::model124::Model124;
use sunspec::models::model701::Model701;
use sunspec::models::model802::Model802;

use super::BatteryRating;
use crate::modbus::sunspec::layout::battery::{connected, Blocks};
use crate::modbus::sunspec::layout::map::RegisterMap;
use crate::register::codec::ValueType::{I16, U16, U32, U64};
use crate::sim::common::{BATTERY_V, GRID_LL_V, GRID_V};
use crate::sim::noise::{amplitude, channel as ch, Jitter};
use crate::sim::physics::{wobble, Tick};

/// `ChaSt` (models 124 and 802).
const CHA_ST_EMPTY: f64 = 2.0;
const CHA_ST_DISCHARGING: f64 = 3.0;
const CHA_ST_CHARGING: f64 = 4.0;
const CHA_ST_FULL: f64 = 5.0;
const CHA_ST_HOLDING: f64 = 6.0;
/// `InvSt` (model 701).
const INV_ST_RUNNING: f64 = 3.0;
const INV_ST_STANDBY: f64 = 7.0;
/// `State` (model 802).
const STATE_DISCONNECTED: f64 = 1.0;
const STATE_CONNECTED: f64 = 3.0;
/// The battery's state, to be written into its registers.
pub struct Publish<'a> {
    pub rating: &'a BatteryRating,
    pub soc: f64,
    /// + discharging.
    pub ac_w: f64,
    pub injected_wh: f64,
    pub absorbed_wh: f64,
    pub tick: Tick,
    /// The noise of this real second.
    pub jitter: Jitter,
}

impl Publish<'_> {
    fn cha_st(&self) -> f64 {
        if self.ac_w < 0.0 {
            CHA_ST_CHARGING
        } else if self.ac_w > 0.0 {
            CHA_ST_DISCHARGING
        } else if self.soc >= self.rating.soc_max {
            CHA_ST_FULL
        } else if self.soc <= self.rating.soc_min {
            CHA_ST_EMPTY
        } else {
            CHA_ST_HOLDING
        }
    }

    pub fn write(&self, b: &Blocks, map: &mut RegisterMap) {
        let cha_st = self.cha_st();
        let (j, sim_ms) = (self.jitter, self.tick.sim_ms);
        let rated = self.rating.rated_w;
        let v = wobble(sim_ms, GRID_V, 1.5, 300.0);
        let amps = self.ac_w.abs() / (3.0 * v);
        let w = j.power(ch::W, self.ac_w, rated);
        let volts = |i: u64, v: f64| j.plus(ch::V + i, v, amplitude::VOLTS);
        let current = |i: u64, a: f64| j.share(ch::A + i, a, amplitude::CURRENT);
        let ll = GRID_LL_V + 1.7 * (v - GRID_V);

        type A = Model701;
        let m = b.m701;
        map.set_scaled(m, &A::W, I16, w, &A::W_SF);
        map.set_scaled(m, &A::A, I16, current(3, 3.0 * amps), &A::A_SF);
        map.set_scaled(m, &A::LNV, U16, volts(6, v), &A::V_SF);
        map.set_scaled(m, &A::LLV, U16, volts(7, ll), &A::V_SF);
        for (i, (wp, a, vl, vll)) in [
            (&A::WL1, &A::AL1, &A::VL1, &A::VL1L2),
            (&A::WL2, &A::AL2, &A::VL2, &A::VL2L3),
            (&A::WL3, &A::AL3, &A::VL3, &A::VL3L1),
        ]
        .into_iter()
        .enumerate()
        {
            let i = i as u64;
            let w = j.power(ch::W_PHASE + i, self.ac_w / 3.0, rated / 3.0);
            map.set_scaled(m, wp, I16, w, &A::W_SF);
            map.set_scaled(m, a, I16, current(i, amps), &A::A_SF);
            map.set_scaled(m, vl, U16, volts(i, v), &A::V_SF);
            map.set_scaled(m, vll, U16, volts(3 + i, ll), &A::V_SF);
        }
        let hz = j.plus(ch::HZ, wobble(sim_ms, 50.0, 0.02, 97.0), amplitude::HZ);
        map.set_scaled(m, &A::HZ, U32, hz, &A::HZ_SF);
        map.set_scaled(
            m,
            &A::TOT_WH_INJ,
            U64,
            self.injected_wh.floor(),
            &A::TOT_WH_SF,
        );
        map.set_scaled(
            m,
            &A::TOT_WH_ABS,
            U64,
            self.absorbed_wh.floor(),
            &A::TOT_WH_SF,
        );
        let tmp = 24.0 + 12.0 * self.ac_w.abs() / rated.max(1.0);
        let tmp = j.plus(ch::TEMP, tmp, amplitude::CELSIUS);
        map.set_scaled(m, &A::TMP_CAB, I16, tmp, &A::TMP_SF);
        let inv_st = if self.ac_w == 0.0 {
            INV_ST_STANDBY
        } else {
            INV_ST_RUNNING
        };
        map.set(m, &A::INV_ST, U16, inv_st);

        let soc = j.soc(self.soc);
        type C = Model124;
        let c = b.m124;
        map.set_scaled(c, &C::CHA_STATE, U16, soc, &C::CHA_STATE_SF);
        let rsv = map.get_scaled(c, &C::MIN_RSV_PCT, U16, &C::MIN_RSV_PCT_SF);
        let aval = (self.soc - rsv).max(0.0) / 100.0 * self.rating.capacity_wh / BATTERY_V;
        map.set_scaled(c, &C::STOR_AVAL, U16, aval, &C::STOR_AVAL_SF);
        let dc_v = BATTERY_V - 40.0 + 0.8 * self.soc;
        let dc_v = j.plus(ch::DC_V, dc_v, amplitude::VOLTS);
        map.set_scaled(c, &C::IN_BAT_V, U16, dc_v, &C::IN_BAT_V_SF);
        map.set(c, &C::CHA_ST, U16, cha_st);

        type B = Model802;
        let s = b.m802;
        map.set_scaled(s, &B::SOC, U16, soc, &B::SOC_SF);
        let cycles = (self.absorbed_wh / self.rating.capacity_wh.max(1.0)).floor();
        map.set(s, &B::N_CYC, U32, cycles);
        map.set(s, &B::CHA_ST, U16, cha_st);
        map.set(s, &B::HB, U16, (self.tick.real_s.floor()) % 65_535.0);
        map.set_scaled(s, &B::V, U16, dc_v, &B::V_SF);
        map.set_scaled(s, &B::A, I16, current(4, self.ac_w / dc_v), &B::A_SF);
        map.set_scaled(s, &B::W, I16, w, &B::W_SF);
        let state = if connected(s, map) {
            STATE_CONNECTED
        } else {
            STATE_DISCONNECTED
        };
        map.set(s, &B::STATE, U16, state);
    }
}
