//! Validation of a profile's `[controls]`: complete setpoint forms, direction
//! registers for magnitudes, release writes, time units. Problems are collected
//! with their paths, like the points' in the parent module.

use super::release;
use super::writes::{fixed, value_register, written};
use super::{check_span, disjoint, Problems, Registers};
use crate::profile::controls::{
    Direction, EssControl, EssSetpoint, LimitControl, LimitUnit, RevertTimeout,
};
use crate::profile::raw::{RawEss, RawFixed, RawLimit, RawRevert, RawValueRegister};
use crate::register::codec::ValueType;

const SAME_RECIPE: &str =
    "one recipe writes each register once (the read-back could only confirm the last write)";

/// The registers of fixed writes, with their paths.
fn fixed_regs(path: &str, list: &[RawFixed]) -> Vec<Registers> {
    list.iter()
        .enumerate()
        .map(|(i, f)| written(format!("{path}[{i}].register"), f.register, f.ty.words()))
        .collect()
}

fn revert(path: &str, r: &RawRevert, p: &mut Problems) -> Option<RevertTimeout> {
    let seconds_per_unit = match r.unit.as_str() {
        "s" => 1,
        "min" => 60,
        other => {
            p.push(
                format!("{path}.unit"),
                format!("{other:?} is not a time unit (\"s\" or \"min\")"),
            );
            return None;
        }
    };
    if r.ty == ValueType::F32 {
        p.push(
            format!("{path}.type"),
            "a timer register must be an integer type",
        );
        return None;
    }
    check_span(&format!("{path}.register"), r.register, r.ty, p).then_some(RevertTimeout {
        addr: r.register,
        ty: r.ty,
        order: r.word_order,
        seconds_per_unit,
    })
}

pub(super) fn ess(path: &str, e: &RawEss, p: &mut Problems) -> Option<EssControl> {
    let before = p.0.len();
    let sub = |k: &str| format!("{path}.{k}");
    let setpoint = setpoint(path, e, p);
    let direction = e.direction.as_ref().map(|d| Direction {
        addr: d.register,
        charge: d.charge,
        discharge: d.discharge,
        idle: d.idle,
    });
    let unsigned = matches!(
        setpoint,
        Some(EssSetpoint::Magnitude { .. } | EssSetpoint::Split { .. })
    );
    if unsigned && direction.is_none() {
        p.push(
            sub("direction"),
            "a magnitude setpoint needs a direction register ({ register, charge, discharge, idle })",
        );
    }
    if e.release.is_empty() {
        p.push(
            sub("release"),
            "needs at least one write that hands control back to the device",
        );
    }
    let revert_timeout = e
        .revert_timeout
        .as_ref()
        .and_then(|r| revert(&sub("revert_timeout"), r, p));
    let writes = recipe_registers(path, e);
    disjoint(&writes, SAME_RECIPE, p);
    release::one_request(path, e, &writes, p);
    let unused = release::unused(path, e, p);
    let limits = release::limits(path, e, p);
    let on_timeout = release::on_timeout(path, e, p);
    disjoint(&fixed_regs(&sub("release"), &e.release), SAME_RECIPE, p);
    let enable = fixed(&sub("enable"), &e.enable, p);
    let release = fixed(&sub("release"), &e.release, p);
    if p.0.len() > before {
        return None;
    }
    Some(EssControl {
        setpoint: setpoint?,
        direction,
        enable,
        release,
        revert_timeout,
        unused,
        limits,
        one_request: e.one_request,
        on_timeout,
    })
}

/// The setpoint form: exactly one of `signed` (with which way is
/// positive), `power`, or `charge_power` with `discharge_power`.
fn setpoint(path: &str, e: &RawEss, p: &mut Problems) -> Option<EssSetpoint> {
    let sub = |k: &str| format!("{path}.{k}");
    match (&e.signed, &e.power, &e.charge_power, &e.discharge_power) {
        (Some(s), None, None, None) => {
            let discharge_positive = match s.positive.as_str() {
                "discharge" => Some(true),
                "charge" => Some(false),
                other => {
                    p.push(
                        sub("signed.positive"),
                        format!("{other:?} must be \"discharge\" or \"charge\""),
                    );
                    None
                }
            };
            let reg = RawValueRegister {
                register: s.register,
                ty: s.ty,
                word_order: s.word_order,
                scale: s.scale,
                offset: s.offset,
            };
            let register = value_register(&sub("signed"), &reg, p);
            match (register, discharge_positive) {
                (Some(register), Some(discharge_positive)) => Some(EssSetpoint::Signed {
                    register,
                    discharge_positive,
                }),
                _ => None,
            }
        }
        (None, Some(m), None, None) => {
            value_register(&sub("power"), m, p).map(|register| EssSetpoint::Magnitude { register })
        }
        (None, None, Some(c), Some(d)) => {
            let c = value_register(&sub("charge_power"), c, p);
            let d = value_register(&sub("discharge_power"), d, p);
            c.zip(d)
                .map(|(charge, discharge)| EssSetpoint::Split { charge, discharge })
        }
        _ => {
            p.push(
                path,
                "give exactly one of: signed, power, or charge_power with discharge_power",
            );
            None
        }
    }
}

/// The registers the setpoint recipe writes, in write order (timer,
/// enable, power, direction), then those its limits write; with their
/// paths.
fn recipe_registers(path: &str, e: &RawEss) -> Vec<Registers> {
    let sub = |k: &str| format!("{path}.{k}");
    let mut writes: Vec<Registers> = Vec::new();
    if let Some(r) = &e.revert_timeout {
        writes.push(written(
            sub("revert_timeout.register"),
            r.register,
            r.ty.words(),
        ));
    }
    writes.extend(fixed_regs(&sub("enable"), &e.enable));
    for (key, r) in [
        ("signed", e.signed.as_ref().map(|s| (s.register, s.ty))),
        ("power", e.power.as_ref().map(|r| (r.register, r.ty))),
        (
            "charge_power",
            e.charge_power.as_ref().map(|r| (r.register, r.ty)),
        ),
        (
            "discharge_power",
            e.discharge_power.as_ref().map(|r| (r.register, r.ty)),
        ),
    ] {
        if let Some((addr, ty)) = r {
            writes.push(written(sub(&format!("{key}.register")), addr, ty.words()));
        }
    }
    if let Some(d) = &e.direction {
        writes.push(written(sub("direction.register"), d.register, 1));
    }
    writes.extend(release::limit_regs(path, e));
    writes
}

pub(super) fn limit(path: &str, l: &RawLimit, p: &mut Problems) -> Option<LimitControl> {
    let before = p.0.len();
    let (unit, factor) = match l.unit.as_str() {
        "%" => (LimitUnit::Percent, 1.0),
        "W" => (LimitUnit::Watts, 1.0),
        "kW" => (LimitUnit::Watts, 1e3),
        other => {
            p.push(
                format!("{path}.unit"),
                format!("{other:?} must be \"%\", \"W\" or \"kW\""),
            );
            (LimitUnit::Percent, 1.0)
        }
    };
    let reg = RawValueRegister {
        register: l.register,
        ty: l.ty,
        word_order: l.word_order,
        scale: l.scale * factor,
        offset: l.offset,
    };
    let register = value_register(path, &reg, p);
    let revert_timeout = l
        .revert_timeout
        .as_ref()
        .and_then(|r| revert(&format!("{path}.revert_timeout"), r, p));
    if l.release.is_empty() {
        p.push(
            format!("{path}.release"),
            "needs at least one write that lifts the limit",
        );
    }
    let mut writes: Vec<Registers> = Vec::new();
    if let Some(r) = &l.revert_timeout {
        writes.push(written(
            format!("{path}.revert_timeout.register"),
            r.register,
            r.ty.words(),
        ));
    }
    writes.extend(fixed_regs(&format!("{path}.enable"), &l.enable));
    writes.push(written(
        format!("{path}.register"),
        l.register,
        l.ty.words(),
    ));
    disjoint(&writes, SAME_RECIPE, p);
    disjoint(
        &fixed_regs(&format!("{path}.release"), &l.release),
        SAME_RECIPE,
        p,
    );
    let enable = fixed(&format!("{path}.enable"), &l.enable, p);
    let release = fixed(&format!("{path}.release"), &l.release, p);
    (p.0.len() == before).then_some(LimitControl {
        register: register?,
        unit,
        enable,
        release,
        revert_timeout,
    })
}
