//! Validation of what a storage recipe leaves behind and how it goes out:
//! `unused` (what the register of the direction not commanded holds),
//! `limits` (charge/discharge power limits beside a signed or magnitude
//! setpoint), `one_request` (the setpoint's registers adjacent, so they can
//! go out in one write) and `on_timeout` (what the device does on its own
//! when the agent stops writing). Problems are collected with their paths.

use super::writes::{fixed, value_register, written};
use super::{Problems, Registers};
use crate::profile::controls::{OnTimeout, PowerLimits, Unused};
use crate::profile::raw::{RawEss, RawOnTimeout};

pub(super) fn unused(path: &str, e: &RawEss, p: &mut Problems) -> Unused {
    match e.unused.as_deref() {
        None | Some("zero") => Unused::Zero,
        Some("rated") if e.charge_power.is_some() => Unused::Rated,
        Some("rated") => {
            p.push(
                format!("{path}.unused"),
                "applies to a split setpoint (charge_power with discharge_power); \
                 give a signed or magnitude setpoint `limits` instead",
            );
            Unused::Zero
        }
        Some(other) => {
            p.push(
                format!("{path}.unused"),
                format!("{other:?} must be \"zero\" or \"rated\""),
            );
            Unused::Zero
        }
    }
}

pub(super) fn limits(path: &str, e: &RawEss, p: &mut Problems) -> Option<PowerLimits> {
    let l = e.limits.as_ref()?;
    if e.charge_power.is_some() {
        p.push(
            format!("{path}.limits"),
            "a split setpoint's registers are its limits already; use `unused = \"rated\"`",
        );
        return None;
    }
    let charge = value_register(&format!("{path}.limits.charge"), &l.charge, p);
    let discharge = value_register(&format!("{path}.limits.discharge"), &l.discharge, p);
    Some(PowerLimits {
        charge: charge?,
        discharge: discharge?,
    })
}

/// The registers of `limits`, for the overlap check of the setpoint recipe.
pub(super) fn limit_regs(path: &str, e: &RawEss) -> Vec<Registers> {
    e.limits
        .iter()
        .flat_map(|l| {
            [
                written(
                    format!("{path}.limits.charge.register"),
                    l.charge.register,
                    l.charge.ty.words(),
                ),
                written(
                    format!("{path}.limits.discharge.register"),
                    l.discharge.register,
                    l.discharge.ty.words(),
                ),
            ]
        })
        .collect()
}

/// `one_request`: the setpoint's registers (`writes`) must form one run.
pub(super) fn one_request(path: &str, e: &RawEss, writes: &[Registers], p: &mut Problems) {
    if !e.one_request {
        return;
    }
    let mut spans: Vec<(u32, u32)> = writes
        .iter()
        .map(|r| (u32::from(r.addr), u32::from(r.addr) + u32::from(r.len)))
        .collect();
    spans.sort_unstable();
    let gap = spans.windows(2).find(|w| w[0].1 != w[1].0);
    if let Some(w) = gap {
        p.push(
            format!("{path}.one_request"),
            format!(
                "the setpoint's registers are not adjacent (a gap between {} and {}): \
                 they cannot go out in one request",
                w[0].1 - 1,
                w[1].0
            ),
        );
    }
}

pub(super) fn on_timeout(path: &str, e: &RawEss, p: &mut Problems) -> Option<OnTimeout> {
    let t: &RawOnTimeout = e.on_timeout.as_ref()?;
    let at = format!("{path}.on_timeout");
    match (t.after_s, &e.revert_timeout) {
        (Some(_), Some(_)) => p.push(
            format!("{at}.after_s"),
            "the device's revert_timeout register gives the time; leave after_s out",
        ),
        (None, None) => p.push(
            &at,
            "needs after_s: the device has no revert_timeout register to give the time",
        ),
        (Some(0), None) => p.push(format!("{at}.after_s"), "must be above 0"),
        _ => {}
    }
    if t.writes.is_empty() {
        p.push(
            format!("{at}.writes"),
            "needs at least one word the device sets",
        );
    }
    let writes = fixed(&format!("{at}.writes"), &t.writes, p);
    Some(OnTimeout {
        after_s: t.after_s,
        writes,
    })
}
