//! Fronius GEN24 storage over SunSpec model 124: how a Primo or Symo GEN24
//! (Plus) hybrid is told from its Common model, and its storage recipe.
//!
//! The GEN24 takes the same registers as any model-124 device but is steered
//! with one bit of `StorCtl_Mod` at a time (the sources are listed in
//! `docs/devices.md`, "Supported devices"):
//! - discharge p: `StorCtl_Mod = 1` (the charge limit) with `InWRte = −p`
//!   (a negative charge limit is a forced discharge) and `OutWRte = 100 %`;
//! - charge p: `StorCtl_Mod = 2` (the discharge limit) with `OutWRte = −p`
//!   (a forced charge) and `InWRte = 100 %`;
//! - idle: `StorCtl_Mod = 3` with both rates 0 (charging and discharging
//!   blocked);
//! - release: `StorCtl_Mod = 0`, both rates 100 %, as for any 124 device.
//!
//! Rates are in % of `WChaMax`, scaled by `InOutWRte_SF` (−2 on a GEN24);
//! `InOutWRte_RvrtTms` is written first, the rates next, the mode last.
//! `ChaGriSet` and `MinRsvPct` are never written: grid charging is the
//! installer's setting in the inverter's web interface, the reserve theirs.
//! Pure: no I/O; it must not write any other register.

use super::sunspec::Storage124;
use super::{RegWrite, WriteError};
use crate::modbus::sunspec::ModelBlock;
use crate::register::plan::{Image, Span};
use crate::telemetry::DeviceInfo;

/// What a GEN24's Common model says: `Mn` "Fronius".
const MANUFACTURER: &str = "fronius";
/// ... and an `Md` such as "Symo GEN24 10.0 Plus" or "Primo GEN24 6.0 Plus".
const MODEL_MARK: &str = "gen24";

/// True when the device's Common model names a Fronius GEN24 (case and
/// surrounding blanks ignored).
pub fn is_gen24(info: &DeviceInfo) -> bool {
    let lower = |s: &Option<String>| s.as_deref().unwrap_or("").trim().to_lowercase();
    lower(&info.manufacturer).starts_with(MANUFACTURER) && lower(&info.model).contains(MODEL_MARK)
}

/// Model 124 of a Fronius GEN24 at `block`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StorageGen24 {
    pub block: ModelBlock,
}

/// `StorCtl_Mod` bits.
const CHARGE_LIMIT: u16 = 1;
const DISCHARGE_LIMIT: u16 = 2;

impl StorageGen24 {
    fn plain(&self) -> Storage124 {
        Storage124 { block: self.block }
    }

    /// `WChaMax`, its scale factor and `InOutWRte_SF`, as for any 124 device.
    pub fn calibration(&self) -> Vec<Span> {
        self.plain().calibration()
    }

    /// `InOutWRte_RvrtTms`, the rates, `StorCtl_Mod` with the bit the
    /// direction needs.
    pub fn power(&self, w: f64, revert_s: u16, cal: &Image) -> Result<Vec<RegWrite>, WriteError> {
        let plain = self.plain();
        let pct = plain.percent_of_w_cha_max(w, cal)?;
        let (mode, out_pct, in_pct) = if w > 0.0 {
            (CHARGE_LIMIT, 100.0, -pct)
        } else if w < 0.0 {
            (DISCHARGE_LIMIT, -pct, 100.0)
        } else {
            (CHARGE_LIMIT | DISCHARGE_LIMIT, 0.0, 0.0)
        };
        plain.window_writes(mode, out_pct, in_pct, revert_s, cal)
    }

    /// `StorCtl_Mod = 0`, both rates 100 %.
    pub fn release(&self, cal: &Image) -> Result<Vec<RegWrite>, WriteError> {
        self.plain().release(cal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(mn: &str, md: &str) -> DeviceInfo {
        DeviceInfo {
            manufacturer: Some(mn.into()),
            model: Some(md.into()),
            ..DeviceInfo::default()
        }
    }

    #[test]
    fn a_gen24_is_told_by_its_common_model() {
        assert!(is_gen24(&info("Fronius", "Symo GEN24 10.0 Plus")));
        assert!(is_gen24(&info(" FRONIUS ", "Primo GEN24 6.0 Plus")));
        assert!(!is_gen24(&info("Fronius", "Symo 10.0-3-M")));
        assert!(!is_gen24(&info("Fronius", "Symo Hybrid 5.0-3-S")));
        assert!(!is_gen24(&info("sitegate", "GEN24")));
        assert!(!is_gen24(&DeviceInfo::default()));
    }
}
