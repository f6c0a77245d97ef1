//! Validation of a profile's `[identify]` section: an integer type with at
//! least one value, or a string of 1 to 32 registers with a prefix, inside
//! the address space.

use super::{check_span, Problems};
use crate::modbus::codec::ValueType;
use crate::modbus::profile::identify::{Identify, IdentifyMatch};
use crate::modbus::profile::raw::RawIdentify;

fn integer_type(name: &str) -> Option<ValueType> {
    Some(match name {
        "u16" => ValueType::U16,
        "i16" => ValueType::I16,
        "u32" => ValueType::U32,
        "i32" => ValueType::I32,
        "u64" => ValueType::U64,
        "i64" => ValueType::I64,
        _ => return None,
    })
}

pub(super) fn identify(path: &str, r: &RawIdentify, p: &mut Problems) -> Option<Identify> {
    let before = p.0.len();
    let sub = |k: &str| format!("{path}.{k}");
    let expect = if r.ty == "string" {
        let words = r.words.unwrap_or(0);
        if !(1..=32).contains(&words) {
            p.push(
                sub("words"),
                format!("a string needs 1 to 32 registers, found {words}"),
            );
        } else if u32::from(r.register) + u32::from(words) > 65_536 {
            p.push(
                sub("register"),
                format!("{} + {words} registers runs past 65535", r.register),
            );
        }
        let prefix = r.prefix.clone().unwrap_or_default();
        if prefix.trim().is_empty() || prefix.len() > usize::from(words) * 2 {
            p.push(
                sub("prefix"),
                format!("needs text that fits in {words} registers, found {prefix:?}"),
            );
        }
        if !r.values.is_empty() {
            p.push(
                sub("values"),
                "a string is matched by `prefix`, not `values`",
            );
        }
        IdentifyMatch::Text { words, prefix }
    } else {
        let Some(ty) = integer_type(&r.ty) else {
            p.push(
                sub("type"),
                format!("{:?} is not u16, i16, u32, i32, u64, i64 or string", r.ty),
            );
            return None;
        };
        check_span(&sub("register"), r.register, ty, p);
        if r.values.is_empty() {
            p.push(
                sub("values"),
                "needs at least one value that identifies the device",
            );
        }
        if r.prefix.is_some() || r.words.is_some() {
            p.push(path, "`prefix` and `words` are for type = \"string\"");
        }
        IdentifyMatch::Number {
            ty,
            order: r.word_order,
            values: r.values.clone(),
        }
    };
    (p.0.len() == before).then_some(Identify {
        table: r.table,
        addr: r.register,
        expect,
    })
}
