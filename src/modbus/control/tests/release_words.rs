//! What the storage recipes leave behind, pinned on the shipped profiles: no
//! charge or discharge limit written as 0 W except where idle holds the
//! battery with them, releases that free the limits, a setpoint and its mode
//! in one request; and the profile keys behind them refused where they
//! cannot apply.

use super::*;
use crate::profile::{parse, EssControl, ProfileError, BUILTIN};

fn w(addr: u16, values: &[u16]) -> RegWrite {
    RegWrite {
        addr,
        values: values.to_vec(),
    }
}

fn f32_lo(v: f32) -> Vec<u16> {
    let b = v.to_bits();
    vec![b as u16, (b >> 16) as u16]
}

fn builtin(name: &str) -> EssControl {
    let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name).unwrap();
    parse(name, "built-in", text)
        .unwrap()
        .controls
        .ess_power
        .unwrap()
}

const RATED: Option<f64> = Some(4000.0);

#[test]
fn shipped_recipes_leave_no_limit_at_zero() {
    let se = builtin("solaredge-storage");
    let ko = builtin("kostal-plenticore");
    let sma = builtin("sma-storage");
    let hi = |v: i32| vec![(v as u32 >> 16) as u16, v as u16];
    // (profile, control, W, the writes after the timer and enable writes)
    for (name, c, watts, tail) in [
        // SolarEdge: the direction not commanded stays free; idle is "off".
        (
            "solaredge charge",
            &se,
            -2000.0,
            vec![
                w(57358, &f32_lo(2000.0)),
                w(57360, &f32_lo(4000.0)),
                w(57357, &[3]),
            ],
        ),
        (
            "solaredge discharge",
            &se,
            1500.0,
            vec![
                w(57358, &f32_lo(4000.0)),
                w(57360, &f32_lo(1500.0)),
                w(57357, &[4]),
            ],
        ),
        (
            "solaredge idle",
            &se,
            0.0,
            vec![
                w(57358, &f32_lo(4000.0)),
                w(57360, &f32_lo(4000.0)),
                w(57357, &[0]),
            ],
        ),
        // KOSTAL: idle holds with both limits at 0 W, not with 1034 = 0 alone.
        (
            "kostal idle",
            &ko,
            0.0,
            vec![
                w(1034, &f32_lo(0.0)),
                w(1038, &f32_lo(0.0)),
                w(1040, &f32_lo(0.0)),
            ],
        ),
        (
            "kostal charge",
            &ko,
            -2500.0,
            vec![
                w(1034, &f32_lo(-2500.0)),
                w(1038, &f32_lo(4000.0)),
                w(1040, &f32_lo(4000.0)),
            ],
        ),
        // SMA: setpoint and mode in one request, setpoint first.
        (
            "sma charge",
            &sma,
            -1500.0,
            vec![w(40149, &[hi(-1500), vec![0, 802]].concat())],
        ),
    ] {
        let writes = ess_writes(c, watts, 30, RATED).unwrap();
        assert!(writes.ends_with(&tail), "{name}: {writes:?}");
        if name.starts_with("sma") {
            assert_eq!(writes, tail, "{name}: nothing else");
        }
    }
    // Releases free what the setpoints may have limited.
    for (name, c, want) in [
        (
            "solaredge",
            &se,
            vec![
                w(57357, &[7]),
                w(57358, &f32_lo(4000.0)),
                w(57360, &f32_lo(4000.0)),
            ],
        ),
        (
            "kostal",
            &ko,
            vec![
                w(1034, &f32_lo(0.0)),
                w(1038, &f32_lo(4000.0)),
                w(1040, &f32_lo(4000.0)),
            ],
        ),
        ("sma", &sma, vec![w(40151, &[0, 803])]),
    ] {
        assert_eq!(ess_release_writes(c, RATED).unwrap(), want, "{name}");
    }
    // Without a rating a free limit cannot be written: said, not guessed.
    assert!(matches!(
        ess_release_writes(&ko, None),
        Err(WriteError::Missing {
            what: "rated power",
            ..
        })
    ));
    // The device's own timeout, as the profile states it.
    let t = se.on_timeout.as_ref().unwrap();
    assert_eq!((t.after_s, t.writes[0].addr), (None, 57357));
    assert_eq!(ko.on_timeout.as_ref().unwrap().after_s, Some(60));
}

const SOC: &str = "[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\n";

fn problems(controls: &str) -> Vec<String> {
    match parse(
        "t",
        "t.toml",
        &format!("{SOC}[controls.ess_power]\n{controls}"),
    ) {
        Err(ProfileError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn release_keys_are_refused_where_they_cannot_apply() {
    let signed = "signed = { register = 10, type = \"i16\", positive = \"discharge\" }\n\
                  release = [{ register = 11, value = 0 }]\n";
    let split = "charge_power = { register = 10, type = \"u16\" }\n\
                 discharge_power = { register = 11, type = \"u16\" }\n\
                 direction = { register = 12, charge = 1, discharge = 2, idle = 0 }\n\
                 release = [{ register = 12, value = 0 }]\n";
    for (text, want) in [
        (
            format!("{signed}unused = \"rated\"\n"),
            "controls.ess_power.unused: applies to a split setpoint",
        ),
        (
            format!("{split}unused = \"full\"\n"),
            "controls.ess_power.unused: \"full\" must be \"zero\" or \"rated\"",
        ),
        (
            format!(
                "{split}limits = {{ charge = {{ register = 20, type = \"u16\" }}, \
                 discharge = {{ register = 21, type = \"u16\" }} }}\n"
            ),
            "controls.ess_power.limits: a split setpoint's registers are its limits already",
        ),
        (
            format!(
                "{signed}limits = {{ charge = {{ register = 10, type = \"u16\" }}, \
                 discharge = {{ register = 21, type = \"u16\" }} }}\n"
            ),
            "controls.ess_power.limits.charge.register: registers 10 overlap controls.ess_power.signed.register",
        ),
        (
            format!("{signed}enable = [{{ register = 13, value = 1 }}]\none_request = true\n"),
            "controls.ess_power.one_request: the setpoint's registers are not adjacent (a gap between 10 and 13)",
        ),
        (
            format!("{signed}on_timeout = {{ writes = [{{ register = 11, value = 0 }}] }}\n"),
            "controls.ess_power.on_timeout: needs after_s: the device has no revert_timeout register",
        ),
        (
            format!(
                "{signed}revert_timeout = {{ register = 30, type = \"u16\" }}\n\
                 on_timeout = {{ after_s = 5, writes = [{{ register = 11, value = 0 }}] }}\n"
            ),
            "controls.ess_power.on_timeout.after_s: the device's revert_timeout register gives the time",
        ),
        (
            format!("{signed}on_timeout = {{ after_s = 5, writes = [] }}\n"),
            "controls.ess_power.on_timeout.writes: needs at least one word the device sets",
        ),
    ] {
        let got = problems(&text);
        assert!(
            got.iter().any(|g| g.starts_with(want)),
            "{want:?} in {got:#?}"
        );
    }
}
