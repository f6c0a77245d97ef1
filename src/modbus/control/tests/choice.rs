//! Which recipe a device gets from its map's controls and its configured type.

use std::sync::Arc;

use super::*;
use crate::config::DeviceConfig;
use crate::modbus::DeviceMap;
use crate::model::DeviceType;
use crate::profile::{
    parse, LimitControl, LimitUnit, Profile, ProfileControls, ValueRegister, BUILTIN,
};
use crate::telemetry::DeviceInfo;

const B704: ModelBlock = ModelBlock {
    id: 704,
    addr: 40300,
    len: 65,
};

fn device(ty: DeviceType, rated_w: Option<f64>) -> DeviceConfig {
    let cfg = crate::config::parse(
        r#"
[http]
listen = ["127.0.0.1:0"]
auth = "none"
[[sites]]
reference = "ste_s"
name = "S"
[[buses]]
name = "lan"
tcp = "127.0.0.1:1502"
[[devices]]
reference = "dvc_d"
name = "D"
type = "inverter"
site = "ste_s"
bus = "lan"
unit_id = 1
"#,
    )
    .unwrap();
    DeviceConfig {
        device_type: ty,
        rated_power_w: rated_w,
        ..cfg.devices[0].clone()
    }
}

fn sunspec_map(chain: Vec<ModelBlock>, rated_w: Option<f64>) -> DeviceMap {
    let info = DeviceInfo {
        rated_power_w: rated_w,
        ..DeviceInfo::default()
    };
    DeviceMap::from_sunspec(chain, info, &Image::new(), DeviceType::Inverter, false)
}

fn profile_map(controls: ProfileControls, dev: &DeviceConfig) -> DeviceMap {
    let (name, text) = *BUILTIN
        .iter()
        .find(|(n, _)| *n == "goodwe-et")
        .expect("a shipped battery profile");
    let shipped = parse(name, "built-in", text).unwrap();
    DeviceMap::from_profile(
        Arc::new(Profile {
            controls,
            ..shipped
        }),
        dev,
        16,
    )
}

#[test]
fn sunspec_prefers_123_and_124_and_falls_back_to_704() {
    let inv = device(DeviceType::Inverter, None);
    let bat = device(DeviceType::Battery, None);
    let both = sunspec_map(vec![B123, B704, B124], Some(8_000.0));
    assert!(matches!(
        Recipe::for_device(inv.device_type, inv.rated_power_w, &both),
        Ok(Recipe::Limit(SunspecLimit { block, wmax_w })) if wmax_w == 8_000.0 && block == B123
    ));
    assert!(matches!(
        Recipe::for_device(bat.device_type, bat.rated_power_w, &both),
        Ok(Recipe::Storage124(_))
    ));
    let der = sunspec_map(vec![B704], Some(8_000.0));
    assert_eq!(
        Recipe::for_device(inv.device_type, inv.rated_power_w, &der),
        Ok(Recipe::Limit(SunspecLimit {
            block: B704,
            wmax_w: 8_000.0
        }))
    );
    assert_eq!(
        Recipe::for_device(bat.device_type, bat.rated_power_w, &der),
        Ok(Recipe::Storage704(Storage704 { block: B704 }))
    );
    // The SunSpec reference is the device's own WMax, not the configured rating.
    let unrated = sunspec_map(vec![B704], None);
    let rated_inv = device(DeviceType::Inverter, Some(5_000.0));
    assert!(matches!(
        Recipe::for_device(rated_inv.device_type, rated_inv.rated_power_w, &unrated),
        Err(WriteError::Missing { what: "WMax", .. })
    ));
    let none = sunspec_map(vec![], Some(8_000.0));
    assert!(matches!(
        Recipe::for_device(inv.device_type, inv.rated_power_w, &none),
        Err(WriteError::NoControl(_))
    ));
    let meter = device(DeviceType::Meter, None);
    assert!(Recipe::for_device(meter.device_type, meter.rated_power_w, &both).is_err());
}

#[test]
fn profiles_give_storage_or_limit_by_type() {
    let (name, text) = *BUILTIN
        .iter()
        .find(|(n, _)| *n == "goodwe-et")
        .expect("a shipped battery profile");
    let shipped = parse(name, "built-in", text).unwrap();
    let ess = shipped.controls.ess_power.clone().unwrap();
    let bat = device(DeviceType::Battery, None);
    let map = profile_map(shipped.controls.clone(), &bat);
    assert_eq!(
        Recipe::for_device(bat.device_type, bat.rated_power_w, &map),
        Ok(Recipe::ProfileStorage(ProfileEss {
            control: ess.clone(),
            rated_w: None,
        }))
    );
    assert!(Recipe::for_device(bat.device_type, bat.rated_power_w, &map)
        .unwrap()
        .calibration()
        .is_empty());
    let inv = device(DeviceType::Inverter, Some(6_000.0));
    assert!(matches!(
        Recipe::for_device(inv.device_type, inv.rated_power_w, &map),
        Err(WriteError::NoControl(_))
    ));
    let limit = LimitControl {
        register: ValueRegister {
            addr: 9,
            ty: crate::register::codec::ValueType::U16,
            order: crate::register::codec::WordOrder::HighFirst,
            scale: 1.0,
            offset: 0.0,
        },
        unit: LimitUnit::Percent,
        enable: Vec::new(),
        release: Vec::new(),
        revert_timeout: None,
    };
    let controls = ProfileControls {
        ess_power: None,
        production_limit: Some(limit.clone()),
    };
    let map = profile_map(controls, &inv);
    // The configured rating is the 100 % of the profile's percentage.
    assert_eq!(
        Recipe::for_device(inv.device_type, inv.rated_power_w, &map),
        Ok(Recipe::ProfileLimit(ProfileLimit {
            control: limit,
            rated_w: Some(6_000.0)
        }))
    );
    assert!(matches!(
        Recipe::for_device(bat.device_type, bat.rated_power_w, &map),
        Err(WriteError::NoControl(_))
    ));
}

#[test]
fn read_only_hybrids_have_no_control_when_steered() {
    // The hybrids whose sources share no recipe: steering them as a battery
    // is "no control", never a guessed write.
    let bat = device(DeviceType::Battery, Some(5_000.0));
    for name in [
        "foxess-h3",
        "growatt-sph",
        "sofar-hyd",
        "solax-hybrid-g4",
        "solis-hybrid",
    ] {
        let text = BUILTIN.iter().find(|(n, _)| *n == name).unwrap().1;
        let shipped = parse(name, "built-in", text).unwrap();
        assert_eq!(shipped.controls, ProfileControls::default(), "{name}");
        let map = DeviceMap::from_profile(Arc::new(shipped), &bat, 16);
        assert!(
            matches!(
                Recipe::for_device(bat.device_type, bat.rated_power_w, &map),
                Err(WriteError::NoControl(_))
            ),
            "{name}"
        );
    }
}
