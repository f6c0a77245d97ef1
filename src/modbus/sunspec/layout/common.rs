//! What every SunSpec image shares: the Common model (1), the Nameplate
//! model (120), the nominal voltages, scale-factor choice, and reading one
//! point's value out of an incoming write.
//!
//! Pure register layout: no clock, no physics, no I/O.

use sunspec::models::model1::Model1;
use sunspec::models::model120::Model120;
use tokio_modbus::ExceptionCode;

use super::map::{Block, MapBuilder};
use crate::register::codec::ValueType;

/// Appends the Common model (L = 66, trailing pad included) with this
/// manufacturer, model, serial and unit id; the version is the agent's.
pub fn common_as(b: &mut MapBuilder, manufacturer: &str, model: &str, serial: &str, unit_id: u8) {
    let c = b.model::<Model1>();
    b.set_str(c, &Model1::MN, manufacturer);
    b.set_str(c, &Model1::MD, model);
    // Optional string left unimplemented (all NUL).
    b.set_str(c, &Model1::OPT, "");
    b.set_str(c, &Model1::VR, env!("CARGO_PKG_VERSION"));
    b.set_str(c, &Model1::SN, serial);
    b.set(c, &Model1::DA, ValueType::U16, f64::from(unit_id));
    b.pad_tail(c);
}

/// Nominal line-to-neutral AC voltage of the simulated grid.
pub const GRID_V: f64 = 230.0;
/// Nominal line-to-line AC voltage.
pub const GRID_LL_V: f64 = 400.0;
/// Nominal DC voltage of simulated batteries (for amp-hour figures).
pub const BATTERY_V: f64 = 400.0;

/// Storage ratings for the nameplate of a battery inverter.
pub struct StorageRating {
    pub capacity_wh: f64,
    pub max_charge_w: f64,
    pub max_discharge_w: f64,
}

/// Appends the Nameplate model (120): `DERTyp` 4 (PV) or 82 (PV_STOR), power
/// ratings, and the storage ratings when `storage` is given (else those optional
/// points are left unimplemented).
pub fn nameplate(
    b: &mut MapBuilder,
    rated_w: f64,
    storage: Option<StorageRating>,
) -> Block<Model120> {
    use ValueType::{I16, U16};
    let n = b.model::<Model120>();
    let der_typ = if storage.is_some() { 82.0 } else { 4.0 };
    b.set(n, &Model120::DER_TYP, U16, der_typ);
    let w_sf = fit_sf(rated_w, U16_LIMIT, 0);
    b.set(n, &Model120::W_RTG_SF, I16, f64::from(w_sf));
    b.set_scaled(n, &Model120::W_RTG, U16, rated_w, &Model120::W_RTG_SF);
    b.set(n, &Model120::VA_RTG_SF, I16, f64::from(w_sf));
    b.set_scaled(n, &Model120::VA_RTG, U16, rated_w, &Model120::VA_RTG_SF);
    let var = 0.6 * rated_w;
    b.set(
        n,
        &Model120::V_AR_RTG_SF,
        I16,
        f64::from(fit_sf(var, I16_LIMIT, 0)),
    );
    for (p, sign) in [
        (&Model120::V_AR_RTG_Q1, 1.0),
        (&Model120::V_AR_RTG_Q2, 1.0),
        (&Model120::V_AR_RTG_Q3, -1.0),
        (&Model120::V_AR_RTG_Q4, -1.0),
    ] {
        b.set_scaled(n, p, I16, sign * var, &Model120::V_AR_RTG_SF);
    }
    let amps = rated_w / (3.0 * GRID_V);
    b.set(
        n,
        &Model120::A_RTG_SF,
        I16,
        f64::from(fit_sf(amps, U16_LIMIT, -1)),
    );
    b.set_scaled(n, &Model120::A_RTG, U16, amps, &Model120::A_RTG_SF);
    b.set(n, &Model120::PF_RTG_SF, I16, -3.0);
    for (p, pf) in [
        (&Model120::PF_RTG_Q1, 0.8),
        (&Model120::PF_RTG_Q2, -0.8),
        (&Model120::PF_RTG_Q3, -0.8),
        (&Model120::PF_RTG_Q4, 0.8),
    ] {
        b.set_scaled(n, p, I16, pf, &Model120::PF_RTG_SF);
    }
    match storage {
        Some(s) => {
            let wh_sf = fit_sf(s.capacity_wh, U16_LIMIT, 0);
            b.set(n, &Model120::WH_RTG_SF, I16, f64::from(wh_sf));
            b.set_scaled(
                n,
                &Model120::WH_RTG,
                U16,
                s.capacity_wh,
                &Model120::WH_RTG_SF,
            );
            let ah = s.capacity_wh / BATTERY_V;
            b.set(
                n,
                &Model120::AHR_RTG_SF,
                I16,
                f64::from(fit_sf(ah, U16_LIMIT, -1)),
            );
            b.set_scaled(n, &Model120::AHR_RTG, U16, ah, &Model120::AHR_RTG_SF);
            let cha_sf = f64::from(fit_sf(s.max_charge_w, U16_LIMIT, 0));
            b.set(n, &Model120::MAX_CHA_RTE_SF, I16, cha_sf);
            b.set_scaled(
                n,
                &Model120::MAX_CHA_RTE,
                U16,
                s.max_charge_w,
                &Model120::MAX_CHA_RTE_SF,
            );
            let dis_sf = f64::from(fit_sf(s.max_discharge_w, U16_LIMIT, 0));
            b.set(n, &Model120::MAX_DIS_CHA_RTE_SF, I16, dis_sf);
            b.set_scaled(
                n,
                &Model120::MAX_DIS_CHA_RTE,
                U16,
                s.max_discharge_w,
                &Model120::MAX_DIS_CHA_RTE_SF,
            );
        }
        None => {
            b.unimpl(n, &Model120::WH_RTG);
            b.unimpl(n, &Model120::WH_RTG_SF);
            b.unimpl(n, &Model120::AHR_RTG);
            b.unimpl(n, &Model120::AHR_RTG_SF);
            b.unimpl(n, &Model120::MAX_CHA_RTE);
            b.unimpl(n, &Model120::MAX_CHA_RTE_SF);
            b.unimpl(n, &Model120::MAX_DIS_CHA_RTE);
            b.unimpl(n, &Model120::MAX_DIS_CHA_RTE_SF);
        }
    }
    b.pad_tail(n);
    n
}

/// The finest scale factor, starting at `preferred`, at which `max_value` still
/// fits under `limit` raw (e.g. 32767 for int16).
pub fn fit_sf(max_value: f64, limit: f64, preferred: i32) -> i32 {
    let mut sf = preferred;
    while sf < 10 && max_value.abs() / 10f64.powi(sf) > limit {
        sf += 1;
    }
    sf
}

/// Most an int16 register holds without hitting the "not implemented" value.
pub const I16_LIMIT: f64 = 32_767.0;
/// Most a uint16 register holds without hitting the "not implemented" value.
pub const U16_LIMIT: f64 = 65_534.0;

/// The value a write of `values` at `addr` puts into the register `point`, if it
/// covers it.
pub fn written(point: u16, addr: u16, values: &[u16]) -> Option<u16> {
    let i = usize::from(point.checked_sub(addr)?);
    values.get(i).copied()
}

/// Refuses a written value outside `lo..=hi` (raw register semantics given by `ty`)
/// with IllegalDataValue, as a device range-checking its setpoints would.
pub fn check_range(
    point: u16,
    addr: u16,
    values: &[u16],
    ty: ValueType,
    lo: f64,
    hi: f64,
) -> Result<(), ExceptionCode> {
    let Some(raw) = written(point, addr, values) else {
        return Ok(());
    };
    let v = match ty {
        ValueType::I16 => f64::from(raw as i16),
        _ => f64::from(raw),
    };
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ExceptionCode::IllegalDataValue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_factors_fit_the_type() {
        assert_eq!(fit_sf(10_000.0, I16_LIMIT, 0), 0);
        assert_eq!(fit_sf(50_000.0, I16_LIMIT, 0), 1);
        assert_eq!(fit_sf(2_000.0, I16_LIMIT, -1), -1);
        assert_eq!(fit_sf(5_000.0, I16_LIMIT, -1), 0);
    }

    #[test]
    fn written_values_are_found_and_checked() {
        assert_eq!(written(10, 8, &[1, 2, 3]), Some(3));
        assert_eq!(written(11, 8, &[1, 2, 3]), None);
        assert_eq!(written(7, 8, &[1, 2, 3]), None);
        let neg = (-5000i16) as u16;
        assert_eq!(
            check_range(8, 8, &[neg], ValueType::I16, -10000.0, 10000.0),
            Ok(())
        );
        assert_eq!(
            check_range(8, 8, &[20000], ValueType::I16, -10000.0, 10000.0),
            Err(ExceptionCode::IllegalDataValue)
        );
    }
}
