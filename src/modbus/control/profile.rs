//! Register-map profile recipes: a profile's `[controls]` (`crate::profile`:
//! what the file says) turned into writes, in the order the device needs them
//! (`docs/devices.md`, "Profile format").
//!
//! Storage power: revert timer, enable writes, power register(s), direction,
//! power limits; a power of 0 W is the profile's idle, a release its
//! `release` writes and the registers it frees (`unused = "rated"`,
//! `limits`: set to the rated power, so that no limit is left at 0 W).
//! Production limit: revert timer, enable writes, limit. The revert timer gets
//! the requested seconds rounded up to the register's unit, so the device never
//! reverts earlier than asked.

use super::{RegWrite, WriteError};
use crate::profile::{
    EssControl, EssSetpoint, FixedWrite, LimitControl, LimitUnit, RevertTimeout, Unused,
    ValueRegister,
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
/// power register(s), direction, power limits; with `one_request`, adjacent
/// writes go out together in address order. `rated_w` is what an unused
/// register or a free limit holds when the profile says `rated`.
pub fn ess_writes(
    c: &EssControl,
    watts: f64,
    revert_s: u32,
    rated_w: Option<f64>,
) -> Result<Vec<RegWrite>, WriteError> {
    let encode = |e: EncodeError| WriteError::Encode(e.to_string());
    if !watts.is_finite() {
        return Err(encode(EncodeError::NotFinite(watts)));
    }
    let mut out = preamble(c.revert_timeout.as_ref(), &c.enable, revert_s).map_err(encode)?;
    let magnitude = watts.abs();
    match c.setpoint {
        EssSetpoint::Signed {
            register,
            discharge_positive,
        } => out.push(
            value(&register, if discharge_positive { watts } else { -watts }).map_err(encode)?,
        ),
        EssSetpoint::Magnitude { register } => {
            out.push(value(&register, magnitude).map_err(encode)?)
        }
        EssSetpoint::Split { charge, discharge } => {
            let unused = match c.unused {
                Unused::Zero => 0.0,
                Unused::Rated => rated(rated_w)?,
            };
            let (ch, dis) = if watts < 0.0 {
                (magnitude, unused)
            } else if watts > 0.0 {
                (unused, magnitude)
            } else {
                (unused, unused)
            };
            out.push(value(&charge, ch).map_err(encode)?);
            out.push(value(&discharge, dis).map_err(encode)?);
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
    if let Some(l) = c.limits {
        // Idle holds the battery with both limits at 0 W; any other
        // setpoint frees them, so none is left at 0 W behind it.
        let free = if watts == 0.0 { 0.0 } else { rated(rated_w)? };
        out.push(value(&l.charge, free).map_err(encode)?);
        out.push(value(&l.discharge, free).map_err(encode)?);
    }
    Ok(if c.one_request { joined(out) } else { out })
}

/// The rated power a free limit is set to, or why there is none.
fn rated(rated_w: Option<f64>) -> Result<f64, WriteError> {
    rated_w
        .filter(|w| *w > 0.0)
        .ok_or_else(|| WriteError::Missing {
            what: "rated power",
            detail: "the profile frees its power limits to the rated power; set `rated_power` \
                 on the device"
                .into(),
        })
}

/// Adjacent writes joined into one request, in address order.
fn joined(mut writes: Vec<RegWrite>) -> Vec<RegWrite> {
    writes.sort_by_key(|w| w.addr);
    let mut out: Vec<RegWrite> = Vec::new();
    for w in writes {
        match out.last_mut() {
            Some(last) if u32::from(last.addr) + last.values.len() as u32 == u32::from(w.addr) => {
                last.values.extend(w.values)
            }
            _ => out.push(w),
        }
    }
    out
}

/// Writes that hand storage control back to the device: the profile's
/// `release`, then the registers a release leaves free (an unused split
/// register or the power limits, at the rated power).
pub fn ess_release_writes(
    c: &EssControl,
    rated_w: Option<f64>,
) -> Result<Vec<RegWrite>, WriteError> {
    let encode = |e: EncodeError| WriteError::Encode(e.to_string());
    let mut out = release_writes(&c.release);
    let free: Vec<ValueRegister> = match (c.setpoint, c.unused, c.limits) {
        (EssSetpoint::Split { charge, discharge }, Unused::Rated, _) => vec![charge, discharge],
        (_, _, Some(l)) => vec![l.charge, l.discharge],
        _ => Vec::new(),
    };
    for r in free {
        out.push(value(&r, rated(rated_w)?).map_err(encode)?);
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

/// A profile's storage power control (`[controls.ess_power]`); `rated_w` is
/// what a free limit is set to.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileEss {
    pub control: EssControl,
    pub rated_w: Option<f64>,
}

impl ProfileEss {
    pub fn power(&self, w: f64, revert_s: u16) -> Result<Vec<RegWrite>, WriteError> {
        ess_writes(&self.control, w, u32::from(revert_s), self.rated_w)
    }

    pub fn release(&self) -> Result<Vec<RegWrite>, WriteError> {
        ess_release_writes(&self.control, self.rated_w)
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
