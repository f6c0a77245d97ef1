use super::*;
use crate::model::DeviceType;
use crate::model::Property;
use crate::register::codec::{ValueType, WordOrder};
use crate::register::plan::Table;
use crate::register::point::Scale;

fn problems(text: &str) -> Vec<String> {
    match parse("t", "t.toml", text) {
        Err(ProfileError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn every_builtin_profile_is_valid_and_steerable() {
    for (family, text) in BUILTIN {
        let parsed = parse(family, "built-in", text).unwrap_or_else(|e| panic!("{family}: {e}"));
        // A family is checked member by member.
        let members: Vec<Profile> = if parsed.variants.is_empty() {
            vec![parsed]
        } else {
            let names: Vec<String> = parsed.variants.iter().map(|v| v.name.clone()).collect();
            names
                .iter()
                .map(|v| parsed.with_variant(v).unwrap())
                .collect()
        };
        for p in members {
            let name = format!("{family} {:?}", p.variant.as_ref().map(|v| &v.name));
            assert!(p.manufacturer.is_some(), "{name}");
            let [ty] = p.device_types[..] else {
                panic!("{name}: one device type");
            };
            let mut needs = vec![Property::ActivePower];
            match ty {
                DeviceType::Battery => needs.push(Property::Soc),
                DeviceType::Meter => {
                    needs.extend([Property::TotalEnergyConsumed, Property::TotalEnergyProduced])
                }
                DeviceType::Inverter => needs.push(Property::TotalEnergyProduced),
            }
            for prop in needs {
                assert!(
                    p.points.iter().any(|x| x.property == prop),
                    "{name} maps {prop:?}"
                );
            }
            // Controls fit the type: storage power on batteries, a limit on inverters.
            assert!(
                p.controls.ess_power.is_none() || ty == DeviceType::Battery,
                "{name}"
            );
            assert!(
                p.controls.production_limit.is_none() || ty == DeviceType::Inverter,
                "{name}"
            );
        }
    }
}

#[test]
fn a_point_with_units_and_word_order() {
    let p = parse(
        "t",
        "t.toml",
        r#"
[[points]]
property = "totalEnergyProduced"
register = 100
table = "input"
type = "u32"
word_order = "low_first"
scale = 0.1
unit = "kWh"
kind = "counter"
absent = 0xFFFFFFFF
"#,
    )
    .unwrap();
    let x = &p.points[0];
    assert_eq!(x.table, Table::Input);
    assert_eq!(x.order, WordOrder::LowFirst);
    assert_eq!(x.scale, Scale::Factor(100.0));
    assert_eq!(x.ty, ValueType::U32);
}

#[test]
fn problems_name_their_path_and_value() {
    let got = problems(
        r#"
[[points]]
property = "power"
register = 65535
type = "u32"
scale = 0
unit = "kWh"

[[points]]
property = "soc"
register = 1
type = "u16"
unit = "W"
kind = "counter"
"#,
    );
    let joined = got.join("\n");
    for want in [
        "points[0].property: \"power\" is not a property",
        "points[0].register: 65535 + 2 registers runs past 65535",
        "points[0].scale: must be a finite number other than 0, found 0",
        "points[1].unit: \"W\" cannot be converted to soc",
        "points[1].kind: \"counter\" does not match soc, which is a gauge",
    ] {
        assert!(joined.contains(want), "missing {want:?} in:\n{joined}");
    }
}

#[test]
fn shape_errors_name_their_path() {
    let got = problems("[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u17\"\n");
    assert!(
        got[0].starts_with("points[0].type: unknown variant `u17`"),
        "{got:?}"
    );
    let got =
        problems("[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\ncolour = 1\n");
    assert!(got[0].contains("colour"), "{got:?}");
    let got = problems("manufacturer = \"x\"\n");
    assert_eq!(
        got,
        ["points: a profile needs at least one [[points]] entry (shared, or in every [[variants]])"]
    );
}

const SOC: &str = "[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\n";

#[test]
fn incomplete_controls_are_refused() {
    let got = problems(&format!(
        "{SOC}[controls.ess_power]\npower = {{ register = 5, type = \"u16\" }}\n"
    ));
    assert!(
        got.iter()
            .any(|g| g.starts_with("controls.ess_power.direction:")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|g| g.starts_with("controls.ess_power.release:")),
        "{got:?}"
    );
    let got = problems(&format!(
        "{SOC}[controls.ess_power]\nrelease = [{{ register = 1, value = 0 }}]\n"
    ));
    assert!(
        got[0].starts_with("controls.ess_power: give exactly one of"),
        "{got:?}"
    );
    let got = problems(&format!(
        "{SOC}[controls.production_limit]\nregister = 3\ntype = \"u16\"\nunit = \"VA\"\nrelease = []\n"
    ));
    assert!(
        got.iter()
            .any(|g| g.contains("production_limit.unit: \"VA\"")),
        "{got:?}"
    );
}

#[test]
fn several_absent_patterns_and_their_problems() {
    let p = parse(
        "t",
        "t.toml",
        "[[points]]\nproperty = \"temperature\"\nregister = 1\ntype = \"i16\"\nabsent = [0xFFFF, 0x7FFF]\n",
    )
    .unwrap();
    assert_eq!(
        p.points[0].absent,
        crate::register::codec::Absent::RawAny(
            crate::register::codec::Sentinels::new(&[0xFFFF, 0x7FFF]).unwrap()
        )
    );
    let got = problems(
        "[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\nabsent = [0x10000, 1, 2, 3, 4]\n",
    );
    let joined = got.join("\n");
    assert!(
        joined.contains("points[0].absent: 65536 does not fit in U16"),
        "{got:?}"
    );
    assert!(
        joined.contains("points[0].absent: give 1 to 4 raw patterns, found 5"),
        "{got:?}"
    );
    let got =
        problems("[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"i16\"\nabsent = [-1]\n");
    assert!(got[0].starts_with("points[0].absent"), "{got:?}");
    assert!(got[0].contains("-1 is negative"), "{got:?}");
}

#[test]
fn overlapping_points_are_refused() {
    let got = problems(
        r#"
[[points]]
property = "activePower"
register = 100
type = "i32"

[[points]]
property = "soc"
register = 101
type = "u16"

[[points]]
property = "stateOfHealth"
register = 101
table = "input"
type = "u16"
"#,
    );
    assert_eq!(
        got,
        [
            "points[1].register: registers 101 overlap points[0].register (registers 100-101): \
          two points cannot decode the same registers"
        ]
    );
}

#[test]
fn a_recipe_that_writes_a_register_twice_is_refused() {
    // The enable write to 47100 is overwritten by the direction in the same
    // recipe: its read-back could never confirm it.
    let got = problems(&format!(
        "{SOC}[controls.ess_power]\n\
         charge_power = {{ register = 47247, type = \"u32\" }}\n\
         discharge_power = {{ register = 47248, type = \"u32\" }}\n\
         direction = {{ register = 47100, charge = 1, discharge = 2, idle = 2 }}\n\
         enable = [{{ register = 47100, value = 5 }}]\n\
         release = [{{ register = 47100, value = 0 }}, {{ register = 47100, value = 1 }}]\n"
    ));
    let joined = got.join("\n");
    for want in [
        "controls.ess_power.discharge_power.register: registers 47248-47249 overlap \
         controls.ess_power.charge_power.register (registers 47247-47248)",
        "controls.ess_power.direction.register: registers 47100 overlap \
         controls.ess_power.enable[0].register (registers 47100)",
        "controls.ess_power.release[1].register: registers 47100 overlap \
         controls.ess_power.release[0].register",
    ] {
        assert!(joined.contains(want), "{want}\n{joined}");
    }
    let got = problems(&format!(
        "{SOC}[controls.production_limit]\nregister = 3\ntype = \"u16\"\nunit = \"%\"\n\
         enable = [{{ register = 3, value = 1 }}]\nrelease = [{{ register = 3, value = 1000 }}]\n"
    ));
    assert!(
        got[0].starts_with("controls.production_limit.register: registers 3 overlap"),
        "{got:?}"
    );
}

#[test]
fn victron_gx_reads_the_system_registers_with_function_3() {
    // Victron's ModbusTCP FAQ: the GX answers function 3 and 4 alike; the
    // profile keeps holding registers (function 3) for 842-844.
    let text = BUILTIN
        .iter()
        .find(|(n, _)| *n == "victron-gx")
        .map(|(_, t)| *t)
        .unwrap();
    let p = parse("victron-gx", "built-in", text).unwrap();
    let got: Vec<(Property, u16, Table)> = p
        .points
        .iter()
        .map(|x| (x.property, x.addr, x.table))
        .collect();
    assert_eq!(
        got,
        vec![
            (Property::ActivePower, 842, Table::Holding),
            (Property::Soc, 843, Table::Holding),
            (Property::OperatingState, 844, Table::Holding),
        ]
    );
}
