//! A simulated three-phase grid meter: models 1 and 203.
//!
//! Shows the site balance it is given (W + import, − export) and integrates the
//! import and export counters separately. Its registers are refreshed every
//! period of its `SimResponse`, with the power of its reporting lag before, as a
//! real meter's are; `ac_power_w` stays the power of the moment. It must not
//! compute the balance itself: the site does that from the other devices.

use sunspec::models::model203::Model203;

use super::common::{self, fit_sf, GRID_LL_V, GRID_V, I16_LIMIT};
use super::map::{Block, RegisterMap};
use super::physics::wobble;
use super::response::Reporter;
use super::SimResponse;
use crate::register::codec::ValueType::{I16, U32};

pub struct Meter {
    m: Block<Model203>,
    /// Site power, + import.
    w: f64,
    import_wh: f64,
    export_wh: f64,
    response: SimResponse,
    reporter: Reporter,
}

impl Meter {
    /// The map starts at `base`; `max_w` bounds the power it may ever show
    /// (sets the scale factors).
    pub fn build(
        base: u16,
        unit_id: u8,
        serial: &str,
        max_w: f64,
        response: SimResponse,
    ) -> (RegisterMap, Meter) {
        type M = Model203;
        let mut b = RegisterMap::sunspec(base);
        common::common(&mut b, "SIM-MTR-3P", serial, unit_id);
        let m = b.model::<M>();
        let amps = max_w / (3.0 * GRID_V);
        b.set(
            m,
            &M::A_SF,
            I16,
            f64::from(fit_sf(amps * 3.3, I16_LIMIT, -2)),
        );
        b.set(m, &M::V_SF, I16, -1.0);
        b.set(m, &M::HZ_SF, I16, -2.0);
        b.set(
            m,
            &M::W_SF,
            I16,
            f64::from(fit_sf(max_w * 1.1, I16_LIMIT, 0)),
        );
        b.set(
            m,
            &M::VAR_SF,
            I16,
            f64::from(fit_sf(max_w * 1.1, I16_LIMIT, 0)),
        );
        b.set(m, &M::TOT_WH_SF, I16, 0.0);
        for p in [&M::VA, &M::V_APH_A, &M::V_APH_B, &M::V_APH_C, &M::VA_SF] {
            b.unimpl(m, p);
        }
        for p in [&M::VA_RPH_A, &M::VA_RPH_B, &M::VA_RPH_C] {
            b.unimpl(m, p);
        }
        for p in [&M::PF, &M::P_FPH_A, &M::P_FPH_B, &M::P_FPH_C, &M::PF_SF] {
            b.unimpl(m, p);
        }
        // Per-phase energies and apparent/reactive energies: accumulators left
        // unimplemented (0), with their scale factors unimplemented too.
        for p in [
            &M::TOT_WH_EXP_PH_A,
            &M::TOT_WH_EXP_PH_B,
            &M::TOT_WH_EXP_PH_C,
            &M::TOT_WH_IMP_PH_A,
            &M::TOT_WH_IMP_PH_B,
            &M::TOT_WH_IMP_PH_C,
            &M::TOT_V_AH_EXP,
            &M::TOT_V_AH_EXP_PH_A,
            &M::TOT_V_AH_EXP_PH_B,
            &M::TOT_V_AH_EXP_PH_C,
            &M::TOT_V_AH_IMP,
            &M::TOT_V_AH_IMP_PH_A,
            &M::TOT_V_AH_IMP_PH_B,
            &M::TOT_V_AH_IMP_PH_C,
            &M::TOT_V_ARH_IMP_Q1,
            &M::TOT_V_ARH_IMP_Q1_PH_A,
            &M::TOT_V_ARH_IMP_Q1_PH_B,
            &M::TOT_V_ARH_IMP_Q1_PH_C,
            &M::TOT_V_ARH_IMP_Q2,
            &M::TOT_V_ARH_IMP_Q2_PH_A,
            &M::TOT_V_ARH_IMP_Q2_PH_B,
            &M::TOT_V_ARH_IMP_Q2_PH_C,
            &M::TOT_V_ARH_EXP_Q3,
            &M::TOT_V_ARH_EXP_Q3_PH_A,
            &M::TOT_V_ARH_EXP_Q3_PH_B,
            &M::TOT_V_ARH_EXP_Q3_PH_C,
            &M::TOT_V_ARH_EXP_Q4,
            &M::TOT_V_ARH_EXP_Q4_PH_A,
            &M::TOT_V_ARH_EXP_Q4_PH_B,
            &M::TOT_V_ARH_EXP_Q4_PH_C,
        ] {
            b.unimpl_acc(m, p);
        }
        b.unimpl(m, &M::TOT_V_AH_SF);
        b.unimpl(m, &M::TOT_V_ARH_SF);
        b.set(m, &M::EVT, U32, 0.0);
        let mut meter = Meter {
            m,
            w: 0.0,
            // Plausible lifetime counters (an acc32 of 0 reads "not implemented").
            import_wh: 2_500_000.0,
            export_wh: 1_800_000.0,
            response,
            reporter: Reporter::default(),
        };
        let mut map = b.finish();
        meter.step(&mut map, 0.0, 0, (0.0, 0.0));
        (map, meter)
    }

    /// Site power, W, + import.
    pub fn ac_power_w(&self) -> f64 {
        self.w
    }

    /// (exported, imported) Wh.
    pub fn energy_wh(&self) -> (f64, f64) {
        (self.export_wh, self.import_wh)
    }

    /// Takes `site_w` (+ import) for one step of `dt_s` simulated seconds,
    /// integrates the counters and, at a refresh (`real_s`: real seconds since
    /// the site started), shows the power of the reporting lag before.
    pub fn step(
        &mut self,
        map: &mut RegisterMap,
        site_w: f64,
        sim_ms: i64,
        (dt_s, real_s): (f64, f64),
    ) {
        self.w = site_w;
        if site_w > 0.0 {
            self.import_wh += site_w * dt_s / 3600.0;
        } else {
            self.export_wh += -site_w * dt_s / 3600.0;
        }
        if let Some(shown) = self.reporter.observe(real_s, site_w, &self.response) {
            self.show(map, shown, sim_ms);
        }
    }

    fn show(&self, map: &mut RegisterMap, site_w: f64, sim_ms: i64) {
        type M = Model203;
        let m = self.m;
        let v = wobble(sim_ms, GRID_V, 1.5, 300.0);
        let amps = site_w / (3.0 * v);
        map.set_scaled(m, &M::A, I16, 3.0 * amps, &M::A_SF);
        for p in [&M::APH_A, &M::APH_B, &M::APH_C] {
            map.set_scaled(m, p, I16, amps, &M::A_SF);
        }
        map.set_scaled(m, &M::PH_V, I16, v, &M::V_SF);
        for (p, skew) in [
            (&M::PH_VPH_A, 0.0),
            (&M::PH_VPH_B, 0.4),
            (&M::PH_VPH_C, -0.3),
        ] {
            map.set_scaled(m, p, I16, v + skew, &M::V_SF);
        }
        let ll = GRID_LL_V + 1.7 * (v - GRID_V);
        for p in [&M::PPV, &M::PH_VPH_AB, &M::PH_VPH_BC, &M::PH_VPH_CA] {
            map.set_scaled(m, p, I16, ll, &M::V_SF);
        }
        map.set_scaled(m, &M::HZ, I16, wobble(sim_ms, 50.0, 0.02, 97.0), &M::HZ_SF);
        map.set_scaled(m, &M::W, I16, site_w, &M::W_SF);
        for p in [&M::WPH_A, &M::WPH_B, &M::WPH_C] {
            map.set_scaled(m, p, I16, site_w / 3.0, &M::W_SF);
        }
        map.set_scaled(m, &M::VAR, I16, -0.05 * site_w.abs(), &M::VAR_SF);
        map.set_scaled(
            m,
            &M::TOT_WH_EXP,
            U32,
            self.export_wh.floor(),
            &M::TOT_WH_SF,
        );
        map.set_scaled(
            m,
            &M::TOT_WH_IMP,
            U32,
            self.import_wh.floor(),
            &M::TOT_WH_SF,
        );
    }
}
