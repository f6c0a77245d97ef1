//! Model 124 as a Fronius GEN24 takes it: the choice by the Common model and
//! the words of each recipe.

use ::sunspec::models::model124::Model124 as M124;

use super::*;
use crate::modbus::DeviceMap;
use crate::model::DeviceType;
use crate::telemetry::DeviceInfo;

fn map(manufacturer: &str, model: &str) -> DeviceMap {
    let info = DeviceInfo {
        manufacturer: Some(manufacturer.into()),
        model: Some(model.into()),
        rated_power_w: Some(10_000.0),
        ..DeviceInfo::default()
    };
    let chain = vec![B124, B123];
    DeviceMap::from_sunspec(chain, info, &Image::new(), DeviceType::Battery, false)
}

const GEN24: Recipe = Recipe::StorageGen24(StorageGen24 { block: B124 });

fn words(cmd: Command) -> Vec<RegWrite> {
    GEN24
        .plan(cmd, 30, &img(&B124, &words124()))
        .expect("a plan")
        .writes
}

fn neg(v: i16) -> u16 {
    v as u16
}

#[test]
fn a_gen24_battery_gets_the_gen24_recipe_and_nothing_else_changes() {
    let gen24 = map("Fronius", "Symo GEN24 10.0 Plus");
    assert_eq!(
        Recipe::for_device(DeviceType::Battery, None, &gen24),
        Ok(GEN24)
    );
    // The inverter side of a GEN24 keeps the model-123 limit.
    assert!(matches!(
        Recipe::for_device(DeviceType::Inverter, None, &gen24),
        Ok(Recipe::Limit(_))
    ));
    for (mn, md) in [("Fronius", "Symo 10.0-3-M"), ("SMA", "GEN24"), ("", "")] {
        assert_eq!(
            Recipe::for_device(DeviceType::Battery, None, &map(mn, md)),
            Ok(Recipe::Storage124(Storage124 { block: B124 })),
            "{mn} {md}"
        );
    }
}

#[test]
fn fronius_gen24_discharge_is_a_negative_charge_rate_under_the_charge_bit() {
    let out = at(&B124, M124::OUT_W_RTE.offset);
    assert_eq!(
        words(Command::EssPower(50_000.0)),
        [
            RegWrite {
                addr: at(&B124, M124::IN_OUT_W_RTE_RVRT_TMS.offset),
                values: vec![30]
            },
            // OutWRte 100 %, InWRte −25 % of WChaMax 200 kW (SF −2).
            RegWrite {
                addr: out,
                values: vec![10_000, neg(-2500)]
            },
            RegWrite {
                addr: at(&B124, M124::STOR_CTL_MOD.offset),
                values: vec![1]
            },
        ]
    );
}

#[test]
fn fronius_gen24_charge_is_a_negative_discharge_rate_under_the_discharge_bit() {
    let w = words(Command::EssPower(-150_000.0));
    assert_eq!(w[1].values, [neg(-7500), 10_000]);
    assert_eq!(w[2].values, [2]);
    // Beyond WChaMax the forced rate stays at 100 %.
    let big = words(Command::EssPower(-900_000.0));
    assert_eq!(big[1].values, [neg(-10_000), 10_000]);
}

#[test]
fn fronius_gen24_idle_blocks_both_ways_and_release_frees_both() {
    let idle = words(Command::EssPower(0.0));
    assert_eq!(idle[1].values, [0, 0]);
    assert_eq!(idle[2].values, [3]);
    let release = words(Command::EssRelease);
    assert_eq!(
        release,
        [
            RegWrite {
                addr: at(&B124, M124::STOR_CTL_MOD.offset),
                values: vec![0]
            },
            RegWrite {
                addr: at(&B124, M124::OUT_W_RTE.offset),
                values: vec![10_000, 10_000]
            },
        ]
    );
}

#[test]
fn fronius_gen24_writes_only_the_registers_of_the_plain_recipe() {
    let cal = img(&B124, &words124());
    let plain = Recipe::Storage124(Storage124 { block: B124 });
    assert_eq!(footprint(&GEN24, 30, &cal), footprint(&plain, 30, &cal));
    assert_eq!(GEN24.calibration(), plain.calibration());
    // No reference, no plan.
    assert!(matches!(
        GEN24.plan(Command::EssPower(1.0), 30, &Image::new()),
        Err(WriteError::Missing { .. })
    ));
}
