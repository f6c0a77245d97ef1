//! Register-map profile recipes: a profile's `[controls]` (`crate::profile`:
//! what the file says) turned into writes, in the order the device needs them
//! (`docs/devices.md`, "Profile format").
//!
//! Storage power: revert timer, enable writes, power register(s), direction; a
//! power of 0 W is the profile's idle, a release its `release` writes.
//! Production limit: revert timer, enable writes, limit. The revert timer gets
//! the requested seconds rounded up to the register's unit, so the device never
//! reverts earlier than asked.

use super::{RegWrite, WriteError};
use crate::profile::{
    EssControl, EssSetpoint, FixedWrite, LimitControl, LimitUnit, RevertTimeout, ValueRegister,
};
use crate::register::codec::{self, EncodeError};

fn value(r: &ValueRegister, value: f64) -> Result<RegWrite, EncodeError> {
    Ok(RegWrite {
        addr: r.addr,
        values: codec::encode(value / r.scale + r.offset, r.ty, r.order)?,
    })
}

fn fixed(f: &FixedWrite) -> RegWrite {
    RegWrite {
        addr: f.addr,
        values: f.values.clone(),
    }
}

/// Rounded up to whole units, so the device never reverts earlier than asked.
fn timer(t: &RevertTimeout, seconds: u32) -> Result<RegWrite, EncodeError> {
    let units = seconds.div_ceil(t.seconds_per_unit.max(1));
    Ok(RegWrite {
        addr: t.addr,
        values: codec::encode(f64::from(units), t.ty, t.order)?,
    })
}

/// The revert timer (when the profile names one), then the enable writes.
fn preamble(
    revert: Option<&RevertTimeout>,
    enable: &[FixedWrite],
    revert_s: u32,
) -> Result<Vec<RegWrite>, EncodeError> {
    let mut out = Vec::new();
    if let Some(t) = revert {
        out.push(timer(t, revert_s)?);
    }
    out.extend(enable.iter().map(fixed));
    Ok(out)
}

/// Writes that make the device run at `watts` (+ discharge, − charge, 0 idle),
/// reverting on its own after `revert_s` seconds without a new write (when
/// the profile names a revert register). Order: revert timer, enable writes,
/// power register(s), direction.
pub fn ess_writes(c: &EssControl, watts: f64, revert_s: u32) -> Result<Vec<RegWrite>, EncodeError> {
    if !watts.is_finite() {
        return Err(EncodeError::NotFinite(watts));
    }
    let mut out = preamble(c.revert_timeout.as_ref(), &c.enable, revert_s)?;
    let magnitude = watts.abs();
    match c.setpoint {
        EssSetpoint::Signed {
            register,
            discharge_positive,
        } => out.push(value(
            &register,
            if discharge_positive { watts } else { -watts },
        )?),
        EssSetpoint::Magnitude { register } => out.push(value(&register, magnitude)?),
        EssSetpoint::Split { charge, discharge } => {
            let (ch, dis) = if watts < 0.0 {
                (magnitude, 0.0)
            } else {
                (0.0, magnitude)
            };
            out.push(value(&charge, ch)?);
            out.push(value(&discharge, dis)?);
        }
    }
    if let Some(d) = c.direction {
        let word = if watts > 0.0 {
            d.discharge
        } else if watts < 0.0 {
            d.charge
        } else {
            d.idle
        };
        out.push(RegWrite {
            addr: d.addr,
            values: vec![word],
        });
    }
    Ok(out)
}

/// Writes that cap production at `limit_w`; `rated_w` is the 100 % of a
/// percentage register. Order: revert timer, enable writes, limit.
pub fn limit_writes(
    c: &LimitControl,
    limit_w: f64,
    rated_w: Option<f64>,
    revert_s: u32,
) -> Result<Vec<RegWrite>, WriteError> {
    let encode = |e: EncodeError| WriteError::Encode(e.to_string());
    if !limit_w.is_finite() {
        return Err(encode(EncodeError::NotFinite(limit_w)));
    }
    let v = match c.unit {
        LimitUnit::Watts => limit_w.max(0.0),
        LimitUnit::Percent => {
            let rated = rated_w
                .filter(|r| *r > 0.0)
                .ok_or_else(|| WriteError::Missing {
                    what: "rated power",
                    detail: "the profile's limit is in % of rated power; set `rated_power` \
                             on the device"
                        .into(),
                })?;
            (limit_w / rated * 100.0).clamp(0.0, 100.0)
        }
    };
    let mut out = preamble(c.revert_timeout.as_ref(), &c.enable, revert_s).map_err(encode)?;
    out.push(value(&c.register, v).map_err(encode)?);
    Ok(out)
}

/// Writes that hand control back to the device (a profile's `release`).
pub fn release_writes(release: &[FixedWrite]) -> Vec<RegWrite> {
    release.iter().map(fixed).collect()
}

/// A profile's storage power control (`[controls.ess_power]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileEss {
    pub control: EssControl,
}

impl ProfileEss {
    pub fn power(&self, w: f64, revert_s: u16) -> Result<Vec<RegWrite>, WriteError> {
        ess_writes(&self.control, w, u32::from(revert_s))
            .map_err(|e| WriteError::Encode(e.to_string()))
    }

    pub fn release(&self) -> Vec<RegWrite> {
        release_writes(&self.control.release)
    }
}

/// A profile's production limit control (`[controls.production_limit]`);
/// `rated_w` is the 100 % of a percentage register.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileLimit {
    pub control: LimitControl,
    pub rated_w: Option<f64>,
}

impl ProfileLimit {
    pub fn limit(&self, w: f64, revert_s: u16) -> Result<Vec<RegWrite>, WriteError> {
        limit_writes(&self.control, w, self.rated_w, u32::from(revert_s))
    }

    pub fn release(&self) -> Vec<RegWrite> {
        release_writes(&self.control.release)
    }
}
