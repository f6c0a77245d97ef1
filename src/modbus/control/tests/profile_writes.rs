//! Profile recipes' writes pinned on profiles written here and on the shipped
//! library: split, signed and offset setpoints, limits, releases.

use super::*;
use crate::profile::{parse, EssControl, BUILTIN};

const SOC: &str = "[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\n";
const POINT: &str = "[[points]]\nproperty = \"activePower\"\nregister = 0\ntype = \"i16\"\n";

fn w(addr: u16, values: &[u16]) -> RegWrite {
    RegWrite {
        addr,
        values: values.to_vec(),
    }
}

#[test]
fn split_ess_writes_in_device_order() {
    let (_, text) = BUILTIN
        .iter()
        .find(|(n, _)| *n == "huawei-luna2000")
        .unwrap();
    let p = parse("h", "h", text).unwrap();
    let ess = p.controls.ess_power.unwrap();
    // 2.5 kW charge for 90 s: 2 minutes, duration mode, charge from grid on,
    // charge power, charge.
    assert_eq!(
        ess_writes(&ess, -2500.0, 90, None).unwrap(),
        [
            w(47083, &[2]),
            w(47246, &[0]),
            w(47087, &[1]),
            w(47247, &[0, 2500]),
            w(47249, &[0, 0]),
            w(47100, &[1]),
        ]
    );
    let discharge = ess_writes(&ess, 70_000.0, 60, None).unwrap();
    assert_eq!(
        discharge[3..],
        [w(47247, &[0, 0]), w(47249, &[1, 4464]), w(47100, &[2])]
    );
    assert_eq!(ess_writes(&ess, 0.0, 60, None).unwrap()[5], w(47100, &[2]));
    // Release: charge from grid off again (the device's default), forcing stopped.
    assert_eq!(
        release_writes(&ess.release),
        [w(47087, &[0]), w(47100, &[0])]
    );
}

fn builtin(name: &str) -> EssControl {
    let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name).unwrap();
    parse(name, "built-in", text)
        .unwrap()
        .controls
        .ess_power
        .unwrap()
}

#[test]
fn goodwe_and_sungrow_writes_are_pinned() {
    // GoodWe ET: EMS power 47512 (W), then EMS mode 47511: 11 charge,
    // 12 discharge, 8 standby; release: 1 auto. No timer.
    let g = builtin("goodwe-et");
    assert_eq!(
        ess_writes(&g, -3000.0, 60, None).unwrap(),
        [w(47512, &[3000]), w(47511, &[11])]
    );
    assert_eq!(
        ess_writes(&g, 2500.0, 60, None).unwrap(),
        [w(47512, &[2500]), w(47511, &[12])]
    );
    assert_eq!(
        ess_writes(&g, 0.0, 60, None).unwrap(),
        [w(47512, &[0]), w(47511, &[8])]
    );
    assert_eq!(release_writes(&g.release), [w(47511, &[1])]);
    // Sungrow SH: forced mode 13049 = 2, power 13051 (W), command 13050:
    // 0xAA charge, 0xBB discharge, 0xCC stop; release: self-consumption, stop.
    let s = builtin("sungrow-sh");
    assert_eq!(
        ess_writes(&s, -1500.0, 60, None).unwrap(),
        [w(13049, &[2]), w(13051, &[1500]), w(13050, &[0xAA])]
    );
    assert_eq!(
        ess_writes(&s, 4000.0, 60, None).unwrap(),
        [w(13049, &[2]), w(13051, &[4000]), w(13050, &[0xBB])]
    );
    assert_eq!(ess_writes(&s, 0.0, 60, None).unwrap()[2], w(13050, &[0xCC]));
    assert_eq!(
        release_writes(&s.release),
        [w(13049, &[0]), w(13050, &[0xCC])]
    );
}

#[test]
fn signed_ess_and_limits() {
    let p = parse(
        "t",
        "t",
        &format!(
            r#"{SOC}
[controls.ess_power]
signed = {{ register = 10, type = "i16", scale = 10, positive = "charge" }}
release = [{{ register = 11, value = 0 }}]
revert_timeout = {{ register = 12, type = "u32", unit = "s" }}

[controls.production_limit]
register = 20
type = "u16"
scale = 0.1
unit = "%"
enable = [{{ register = 21, value = 1 }}]
release = [{{ register = 21, value = 0 }}]
"#
        ),
    )
    .unwrap();
    let ess = p.controls.ess_power.unwrap();
    assert_eq!(
        ess_writes(&ess, 1500.0, 30, None).unwrap(),
        [w(12, &[0, 30]), w(10, &[(-150i16) as u16])]
    );
    let lim = p.controls.production_limit.unwrap();
    assert_eq!(
        limit_writes(&lim, 2500.0, Some(10_000.0), 30).unwrap(),
        [w(21, &[1]), w(20, &[250])]
    );
    assert!(limit_writes(&lim, 2500.0, None, 30).is_err());
    assert_eq!(release_writes(&lim.release), [w(21, &[0])]);
}

#[test]
fn wide_fixed_writes_and_offsets() {
    let text = format!(
        "{POINT}[controls.ess_power]\n\
         signed = {{ register = 10, type = \"u32\", offset = 32000, positive = \"discharge\" }}\n\
         enable = [{{ register = 20, value = 802, type = \"u32\" }}]\n\
         release = [{{ register = 30, value = 0.5, type = \"f32\", word_order = \"low_first\" }}]\n"
    );
    let p = parse("t", "t.toml", &text).unwrap();
    let ess = p.controls.ess_power.unwrap();
    let w = ess_writes(&ess, -1500.0, 60, None).unwrap();
    assert_eq!(w[0].addr, 20);
    assert_eq!(w[0].values, [0, 802], "one request, both words");
    assert_eq!(w[1].values, [0, 30_500], "32000 - 1500");
    assert_eq!(
        release_writes(&ess.release)[0].values,
        [0, 0x3F00],
        "0.5 low word first"
    );
}
