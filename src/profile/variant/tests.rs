//! Variants: how a family's file is checked, how a member is told from what
//! the device shows, and the errors that name the choices.

use crate::profile::{parse, Profile, ProfileError, VariantError, BUILTIN};
use crate::register::plan::{Image, Span, Table};
use crate::register::point::Scale;

const FAMILY: &str = r#"
[[points]]
property = "soc"
register = 10
type = "u16"

[[variants]]
name = "small"
when = [{ register = 0, values = [1, 2] }, { register = 1, below = 100 }]
[[variants.points]]
property = "activePower"
register = 20
type = "i16"

[[variants]]
name = "small-new"
when = [{ register = 0, values = [1, 2] }, { register = 1, at_least = 100 }]
[[variants.points]]
property = "activePower"
register = 20
type = "i16"
scale = 10

[[variants]]
name = "big"
models = "Big One"
when = [{ register = 0, values = [3] }]
[[variants.points]]
property = "activePower"
register = 30
type = "i32"

[[variants]]
name = "manual"
[[variants.points]]
property = "activePower"
register = 40
type = "i16"
"#;

fn family() -> Profile {
    parse("fam", "fam.toml", FAMILY).unwrap()
}

fn shows(type_code: u16, firmware: u16) -> Image {
    Image::holding(0, &[type_code, firmware])
}

#[test]
fn a_member_is_told_by_every_condition() {
    let f = family();
    assert_eq!(
        f.variant_spans(),
        [
            Span::new(Table::Holding, 0, 1),
            Span::new(Table::Holding, 1, 1)
        ]
    );
    for (type_code, firmware, want, addr, scale) in [
        (1, 99, "small", 20, Scale::One),
        (2, 100, "small-new", 20, Scale::Factor(10.0)),
        (3, 0, "big", 30, Scale::One),
    ] {
        let p = f.select_variant(&shows(type_code, firmware)).unwrap();
        assert_eq!(p.variant.as_ref().unwrap().name, want);
        assert!(p.variants.is_empty(), "a member is concrete");
        // The shared point first, then the member's own.
        assert_eq!(p.points.len(), 2, "{want}");
        assert_eq!((p.points[1].addr, p.points[1].scale), (addr, scale));
    }
    assert_eq!(
        f.select_variant(&shows(3, 0)).unwrap().model.as_deref(),
        Some("Big One")
    );
}

#[test]
fn a_member_that_cannot_be_told_is_an_error_naming_the_choices() {
    let f = family();
    let no_match = f.select_variant(&shows(9, 0)).unwrap_err();
    assert!(matches!(no_match, VariantError::NoMatch { .. }));
    let text = no_match.to_string();
    for want in [
        "holding 0 = 9 (0x0009)",
        "small (when holding 0 in [1 (0x0001), 2 (0x0002)] and holding 1 < 100)",
        "manual (only when named)",
        "it is not read",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    // A register that was not read tells nothing.
    let unread = f.select_variant(&Image::new()).unwrap_err().to_string();
    assert!(unread.contains("holding 0 unread"), "{unread}");
}

#[test]
fn a_member_named_in_config_is_taken_as_named() {
    let f = family();
    let p = f.with_variant("manual").unwrap();
    assert_eq!(p.points[1].addr, 40);
    // Without conditions nothing is read to confirm it.
    assert!(p.variant_spans().is_empty());
    assert_eq!(p.confirm_variant(&Image::new()), Ok(()));
    // With conditions, the device must not contradict them.
    let big = f.with_variant("big").unwrap();
    assert_eq!(big.variant_spans(), [Span::new(Table::Holding, 0, 1)]);
    assert_eq!(big.confirm_variant(&shows(3, 0)), Ok(()));
    let e = big.confirm_variant(&shows(1, 0)).unwrap_err();
    assert!(matches!(e, VariantError::Contradicts { .. }));
    let text = e.to_string();
    assert!(
        text.contains(
            "holding 0 = 1 (0x0001), which the configured variant \"big\" does not match"
        ),
        "{text}"
    );
    let e = f.with_variant("huge").unwrap_err();
    assert!(matches!(e, VariantError::Unknown { .. }));
    assert!(
        e.to_string()
            .contains("no variant \"huge\" (choices: small"),
        "{e}"
    );
    let plain = parse(
        "p",
        "p.toml",
        "[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\n",
    )
    .unwrap();
    assert!(matches!(
        plain.with_variant("small"),
        Err(VariantError::NoVariants { .. })
    ));
}

fn problems(text: &str) -> Vec<String> {
    match parse("t", "t.toml", text) {
        Err(ProfileError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

const POINT: &str = "[[variants.points]]\nproperty = \"soc\"\nregister = 5\ntype = \"u16\"\n";

#[test]
fn bad_variants_are_refused_with_their_path() {
    for (variants, want) in [
        (
            "[[variants]]\nname = \"Big One\"\n",
            "variants[0].name: \"Big One\" must be lower-case letters, digits, '-' or '_' (config names it)",
        ),
        (
            "[[variants]]\nname = \"a\"\nwhen = [{ register = 0 }]\n",
            "variants[0].when[0]: give `values`, or `at_least` and/or `below`",
        ),
        (
            "[[variants]]\nname = \"a\"\nwhen = [{ register = 0, values = [1], below = 3 }]\n",
            "variants[0].when[0]: give `values` or a range (`at_least`, `below`), not both",
        ),
        (
            "[[variants]]\nname = \"a\"\nwhen = [{ register = 0, at_least = 5, below = 5 }]\n",
            "variants[0].when[0]: at_least = 5 is not below below = 5: no value can match",
        ),
        (
            "[[variants]]\nname = \"a\"\nwhen = [{ register = 0, type = \"f32\", values = [1] }]\n",
            "variants[0].when[0].type: a variant is told by an integer register (u16, i16, u32, i32, u64, i64)",
        ),
        (
            "[[variants]]\nname = \"a\"\nwhen = [{ register = 0, values = [1], colour = 1 }]\n",
            "variants[0].when[0].colour: unknown field `colour`",
        ),
    ] {
        let text = format!("{variants}{POINT}");
        let got = problems(&text);
        assert!(
            got.iter().any(|g| g.contains(want)),
            "{want:?} in {got:#?}"
        );
    }
    // Two members of one name; a member's point over a shared point.
    let text = format!(
        "[[points]]\nproperty = \"activePower\"\nregister = 5\ntype = \"i16\"\n\
         [[variants]]\nname = \"a\"\n{POINT}[[variants]]\nname = \"a\"\n"
    );
    let got = problems(&text);
    assert!(
        got.contains(&"variants[1].name: \"a\" names an earlier variant too".to_string()),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|g| g
            .starts_with("variants[0].points[0].register: registers 5 overlap points[0].register")),
        "{got:#?}"
    );
    // A member with no points and no shared ones reads nothing.
    let got = problems("[[variants]]\nname = \"a\"\n");
    assert!(
        got[0].starts_with("points: a profile needs at least one"),
        "{got:#?}"
    );
}

#[test]
fn the_deye_family_tells_its_three_models_apart() {
    let (_, text) = BUILTIN.iter().find(|(n, _)| *n == "deye-hybrid").unwrap();
    let deye = parse("deye-hybrid", "built-in", text).unwrap();
    let at0 = |code: u16| deye.select_variant(&Image::holding(0, &[code]));
    for (code, want) in [
        (0x0005, "sg04lp3"),
        (0x0500, "sg04lp3"),
        (0x0003, "sg0xlp1"),
        (0x0300, "sg0xlp1"),
    ] {
        assert_eq!(at0(code).unwrap().variant.unwrap().name, want, "{code:#x}");
    }
    // HV: the firmware decides the counters' scale, and no register tells it.
    for code in [6, 7, 8, 0x0600, 0x0601] {
        let e = at0(code).unwrap_err().to_string();
        assert!(
            e.contains("matches sg01hp3 (") && e.contains(" or sg01hp3-fw1098 ("),
            "{e}"
        );
        assert!(e.contains("set `variant` on the device"), "{e}");
    }
    assert!(matches!(at0(2), Err(VariantError::NoMatch { .. })));
}
