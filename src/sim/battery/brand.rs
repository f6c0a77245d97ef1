//! Which make a simulated battery presents: the strings of its Common model
//! and what its model-124 revert timer does when it runs out. Knows no
//! physics and no registers beyond those two choices.
//!
//! - `Sitegate`: the simulator's own battery; at the timeout it goes back to
//!   `StorCtl_Mod = 0` with both rates at 100 % (SunSpec: the rates revert).
//! - `FroniusGen24`: a Fronius Symo GEN24 Plus hybrid (Common model `Mn`
//!   "Fronius", `Md` `"Symo GEN24 <kW> Plus"`). At the timeout it returns to
//!   its automatic mode (`StorCtl_Mod = 0`) and leaves `InWRte`/`OutWRte` as
//!   they were: the sources say it returns to auto, none says it resets the
//!   rates, so the simulator keeps the worst case.

use crate::sim::common::MANUFACTURER;

/// The make of a simulated battery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Brand {
    Sitegate,
    FroniusGen24,
}

impl Brand {
    /// `Mn` of the Common model.
    pub fn manufacturer(self) -> &'static str {
        match self {
            Brand::Sitegate => MANUFACTURER,
            Brand::FroniusGen24 => "Fronius",
        }
    }

    /// `Md` of the Common model for a battery of `rated_w` and `capacity_wh`.
    pub fn model(self, rated_w: f64, capacity_wh: f64) -> String {
        match self {
            Brand::Sitegate => format!("SIM-BAT-{}", (capacity_wh / 1000.0).round()),
            Brand::FroniusGen24 => format!("Symo GEN24 {:.1} Plus", rated_w / 1000.0),
        }
    }

    /// Whether the revert timeout puts both rates back to 100 %.
    pub fn revert_resets_rates(self) -> bool {
        match self {
            Brand::Sitegate => true,
            Brand::FroniusGen24 => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gen24_names_itself_as_fronius_does_and_keeps_its_rates() {
        let b = Brand::FroniusGen24;
        assert_eq!(b.manufacturer(), "Fronius");
        assert_eq!(b.model(10_000.0, 10_000.0), "Symo GEN24 10.0 Plus");
        assert!(!b.revert_resets_rates());
        assert_eq!(Brand::Sitegate.model(5_000.0, 20_000.0), "SIM-BAT-20");
        assert!(Brand::Sitegate.revert_resets_rates());
    }
}
