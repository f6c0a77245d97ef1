//! Validation of a profile's `[[variants]]`: names that config can give
//! (unique, lower case), conditions on integer registers with a test that can
//! hold, and points checked like the shared ones, none decoding a register a
//! shared point or another point of the same variant decodes. Problems are
//! collected with their paths, like the points' in the parent module.

use super::{check_span, disjoint, point, point_registers, Problems, Registers};
use crate::profile::raw::{RawCondition, RawVariant};
use crate::profile::variant::{Condition, Test, Variant};
use crate::register::codec::ValueType;

fn condition(path: &str, r: &RawCondition, p: &mut Problems) -> Option<Condition> {
    let before = p.0.len();
    if matches!(r.ty, ValueType::F32) {
        p.push(
            format!("{path}.type"),
            "a variant is told by an integer register (u16, i16, u32, i32, u64, i64)",
        );
    }
    check_span(&format!("{path}.register"), r.register, r.ty, p);
    let test = match (r.values.is_empty(), r.at_least, r.below) {
        (false, None, None) => Some(Test::OneOf(r.values.clone())),
        (false, _, _) => {
            p.push(
                path,
                "give `values` or a range (`at_least`, `below`), not both",
            );
            None
        }
        (true, None, None) => {
            p.push(path, "give `values`, or `at_least` and/or `below`");
            None
        }
        (true, lo, hi) => {
            if let (Some(lo), Some(hi)) = (lo, hi) {
                if lo >= hi {
                    p.push(
                        path,
                        format!("at_least = {lo} is not below below = {hi}: no value can match"),
                    );
                }
            }
            Some(Test::Range {
                at_least: lo,
                below: hi,
            })
        }
    };
    (p.0.len() == before).then_some(Condition {
        table: r.table,
        addr: r.register,
        ty: r.ty,
        order: r.word_order,
        test: test?,
    })
}

fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// The variants, each checked on its own and against the shared points
/// (`shared`: their registers).
pub(super) fn variants(raw: &[RawVariant], shared: &[Registers], p: &mut Problems) -> Vec<Variant> {
    let mut out = Vec::new();
    for (i, v) in raw.iter().enumerate() {
        let at = format!("variants[{i}]");
        let before = p.0.len();
        if !name_ok(&v.name) {
            p.push(
                format!("{at}.name"),
                format!(
                    "{:?} must be lower-case letters, digits, '-' or '_' (config names it)",
                    v.name
                ),
            );
        } else if raw[..i].iter().any(|w| w.name == v.name) {
            p.push(
                format!("{at}.name"),
                format!("{:?} names an earlier variant too", v.name),
            );
        }
        let when: Vec<Condition> = v
            .when
            .iter()
            .enumerate()
            .filter_map(|(j, c)| condition(&format!("{at}.when[{j}]"), c, p))
            .collect();
        let points: Vec<_> = v
            .points
            .iter()
            .enumerate()
            .filter_map(|(j, rp)| point(&format!("{at}.points[{j}]"), rp, p))
            .collect();
        for (j, rp) in v.points.iter().enumerate() {
            if !rp.states.is_empty() {
                p.push(
                    format!("{at}.points[{j}].states"),
                    "a family names its states once, on its shared points",
                );
            }
        }
        let mut regs = shared.to_vec();
        regs.extend(point_registers(&format!("{at}.points"), &v.points));
        disjoint(&regs, "two points cannot decode the same registers", p);
        if p.0.len() == before {
            out.push(Variant {
                name: v.name.clone(),
                models: v.models.clone(),
                when,
                points,
            });
        }
    }
    out
}
