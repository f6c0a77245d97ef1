//! The checks of one written register: a value register (scale, offset,
//! span), a fixed write encoded as its register's type, and the holding
//! span a write covers. `controls.rs` and `release.rs` build recipes from
//! them.
//!
//! Pure validation; problems are collected with their paths. It must not
//! judge a whole recipe.

use super::{check_scale, check_span, Problems, Registers};
use crate::profile::controls::{FixedWrite, ValueRegister};
use crate::profile::raw::{RawFixed, RawValueRegister};
use crate::register::codec::{self, ValueType};
use crate::register::plan::Table;

pub(super) fn value_register(
    path: &str,
    r: &RawValueRegister,
    p: &mut Problems,
) -> Option<ValueRegister> {
    let ok = check_scale(&format!("{path}.scale"), r.scale, p)
        & check_span(&format!("{path}.register"), r.register, r.ty, p);
    let offset_ok = r.offset.is_finite();
    if !offset_ok {
        p.push(
            format!("{path}.offset"),
            format!("must be a finite number, found {}", r.offset),
        );
    }
    (ok && offset_ok).then_some(ValueRegister {
        addr: r.register,
        ty: r.ty,
        order: r.word_order,
        scale: r.scale,
        offset: r.offset,
    })
}

pub(super) fn written(path: String, addr: u16, len: u16) -> Registers {
    Registers {
        path,
        table: Table::Holding,
        addr,
        len,
    }
}

/// Fixed writes, each value encoded as its register's type (a u32 mode
/// register gets both words in one write).
pub(super) fn fixed(path: &str, list: &[RawFixed], p: &mut Problems) -> Vec<FixedWrite> {
    let mut out = Vec::new();
    for (i, f) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if !check_span(&format!("{at}.register"), f.register, f.ty, p) {
            continue;
        }
        let integral = f.ty == ValueType::F32 || f.value.fract() == 0.0;
        match codec::encode(f.value, f.ty, f.word_order) {
            Ok(values) if integral => out.push(FixedWrite {
                addr: f.register,
                values,
            }),
            Ok(_) => p.push(
                format!("{at}.value"),
                format!("{} is not a whole number for {:?}", f.value, f.ty),
            ),
            Err(e) => p.push(format!("{at}.value"), e.to_string()),
        }
    }
    out
}
