//! Validation of a profile's `[identify]` section: an integer type with at
//! least one value, or a string of 1 to 32 registers with a prefix, inside
//! the address space.

use super::{check_span, Problems};
use crate::profile::identify::{Identify, IdentifyMatch};
use crate::profile::raw::RawIdentify;
use crate::register::codec::ValueType;

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

#[cfg(test)]
mod tests {
    use crate::profile::{parse, ProfileError};

    const POINT: &str = "[[points]]\nproperty = \"activePower\"\nregister = 0\ntype = \"i16\"\n";

    fn problems(extra: &str) -> Vec<String> {
        match parse("t", "t.toml", &format!("{POINT}{extra}")) {
            Err(ProfileError::Invalid { problems, .. }) => {
                problems.iter().map(ToString::to_string).collect()
            }
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn identify_sections_are_checked_with_their_paths() {
        assert_eq!(
            problems("[identify]\nregister = 1\ntype = \"f32\"\nvalues = [1]\n"),
            ["identify.type: \"f32\" is not u16, i16, u32, i32, u64, i64 or string"]
        );
        assert_eq!(
            problems("[identify]\nregister = 1\ntype = \"u16\"\n"),
            ["identify.values: needs at least one value that identifies the device"]
        );
        let p =
            problems("[identify]\nregister = 1\ntype = \"string\"\nwords = 1\nprefix = \"ABC\"\n");
        assert_eq!(
            p,
            ["identify.prefix: needs text that fits in 1 registers, found \"ABC\""]
        );
        assert_eq!(
            problems(
                "[identify]\nregister = 65535\ntype = \"string\"\nwords = 2\nprefix = \"A\"\n"
            ),
            ["identify.register: 65535 + 2 registers runs past 65535"]
        );
    }

    #[test]
    fn release_values_must_fit_their_type() {
        assert_eq!(
            problems(
                "[controls.ess_power]\nsigned = { register = 1, type = \"i16\", positive = \"discharge\" }\n\
                 release = [{ register = 2, value = 1.5 }, { register = 3, value = 70000 }]\n"
            ),
            [
                "controls.ess_power.release[0].value: 1.5 is not a whole number for U16",
                "controls.ess_power.release[1].value: 70000 does not fit in U16"
            ]
        );
    }
}
