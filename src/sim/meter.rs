//! A simulated three-phase grid meter: models 1 and 203, or the float model
//! 213 in noisy mode.
//!
//! Shows the site balance it is given (W + import, − export) and integrates the
//! import and export counters separately. Its registers are refreshed every
//! period of its `SimResponse`, with the power of its reporting lag before, as a
//! real meter's are, and with its noise of that real second (`show.rs`);
//! `ac_power_w` stays the power of the moment. It must not compute the balance
//! itself: the site does that from its own devices.

use super::build::Build;
use super::common;
use super::noise::Jitter;
use super::physics::Tick;
use super::response::Reporter;
use super::SimResponse;
use crate::modbus::sunspec::layout::map::RegisterMap;
use crate::modbus::sunspec::layout::meter as layout;

mod show;

use show::Models;

pub struct Meter {
    models: Models,
    /// Site power, + import.
    w: f64,
    import_wh: f64,
    export_wh: f64,
    response: SimResponse,
    reporter: Reporter,
    jitter: Jitter,
}

impl Meter {
    /// The map starts at `base`; `build.site_max_w` bounds the power it may
    /// ever show (sets the scale factors).
    pub fn build(
        (base, unit_id, serial): (u16, u8, &str),
        response: SimResponse,
        build: Build,
    ) -> (RegisterMap, Meter) {
        let mut b = RegisterMap::sunspec(base);
        let model = if build.float {
            "SIM-MTR-3P-F"
        } else {
            "SIM-MTR-3P"
        };
        common::common(&mut b, model, serial, unit_id);
        let models = if build.float {
            Models::Float(layout::float(&mut b))
        } else {
            Models::Int(layout::int(&mut b, build.site_max_w, build.fine()))
        };
        let mut meter = Meter {
            models,
            w: 0.0,
            // Plausible lifetime counters (an acc32 of 0 reads "not implemented").
            import_wh: 2_500_000.0,
            export_wh: 1_800_000.0,
            response,
            reporter: Reporter::default(),
            jitter: build.jitter,
        };
        let mut map = b.finish();
        meter.step(&mut map, 0.0, Tick::default());
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

    /// Takes `site_w` (+ import) for one step, integrates the counters and, at
    /// a refresh, shows the power of the reporting lag before.
    pub fn step(&mut self, map: &mut RegisterMap, site_w: f64, tick: Tick) {
        self.w = site_w;
        if site_w > 0.0 {
            self.import_wh += site_w * tick.real_dt_s / 3600.0;
        } else {
            self.export_wh += -site_w * tick.real_dt_s / 3600.0;
        }
        if let Some(shown) = self.reporter.observe(tick.real_s, site_w, &self.response) {
            self.show(map, shown, tick);
        }
    }
}
