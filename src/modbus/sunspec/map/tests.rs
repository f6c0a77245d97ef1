use sunspec::models::{
    model101::Model101, model102::Model102, model111::Model111, model112::Model112,
    model201::Model201, model202::Model202, model204::Model204, model211::Model211,
    model212::Model212, model214::Model214,
};

use super::*;

fn block(id: u16, addr: u16, len: u16) -> ModelBlock {
    ModelBlock { id, addr, len }
}

/// The Fronius GEN24 chain worked out in the SunSpec reference (§1.4).
fn fronius_chain() -> Vec<ModelBlock> {
    vec![
        block(1, 40002, 65),
        block(103, 40069, 50),
        block(120, 40121, 26),
        block(121, 40149, 30),
        block(122, 40181, 44),
        block(123, 40227, 24),
        block(160, 40253, 88),
        block(124, 40343, 24),
    ]
}

fn find(points: &[PointSpec], p: Property) -> Vec<PointSpec> {
    points.iter().filter(|s| s.property == p).copied().collect()
}

#[test]
fn phase_variants_share_offsets() {
    // The map reads 101/102 with 103's offsets, 111/112 with 113's, and so on.
    assert_eq!(
        (Model101::W.offset, Model102::W.offset),
        (Inv::W.offset, Inv::W.offset)
    );
    assert_eq!(
        (Model101::WH.offset, Model102::WH_SF.offset),
        (Inv::WH.offset, Inv::WH_SF.offset)
    );
    assert_eq!(
        (Model111::W.offset, Model112::WH.offset),
        (InvF::W.offset, InvF::WH.offset)
    );
    assert_eq!(
        (Model201::W.offset, Model202::W.offset, Model204::W.offset),
        (Meter::W.offset, Meter::W.offset, Meter::W.offset)
    );
    assert_eq!(
        (Model201::TOT_WH_IMP.offset, Model204::TOT_WH_SF.offset),
        (Meter::TOT_WH_IMP.offset, Meter::TOT_WH_SF.offset)
    );
    assert_eq!(
        (
            Model211::W.offset,
            Model212::TOT_WH_IMP.offset,
            Model214::W.offset
        ),
        (
            MeterF::W.offset,
            MeterF::TOT_WH_IMP.offset,
            MeterF::W.offset
        )
    );
}

#[test]
fn fronius_addresses_match_the_reference() {
    let pts = points_for(&fronius_chain(), DeviceType::Inverter, false);
    let w = find(&pts, P::ActivePower)[0];
    // W at Off 14 of the 103 block at 40069; W_SF at Off 15.
    assert_eq!(w.addr, 40083);
    assert_eq!(w.scale, Scale::SunspecSf(40084));
    let soc = find(&pts, P::Soc)[0];
    // ChaState at Off 8 of the 124 block at 40343 (WChaMax at 40345 per [KB]).
    assert_eq!(soc.addr, 40351);
    let lim = find(&pts, P::ActivePowerLimit)[0];
    assert_eq!(lim.addr, 40227 + 5);
    assert_eq!(lim.gate.unwrap().addr, 40227 + 9);
}

#[test]
fn preference_puts_ac_models_first() {
    let chain = vec![
        block(1, 40002, 66),
        block(802, 40070, 62),
        block(701, 40134, 153),
        block(124, 40289, 24),
    ];
    let pts = points_for(&chain, DeviceType::Battery, false);
    let power = find(&pts, P::ActivePower);
    assert_eq!(power.len(), 2);
    assert_eq!(power[0].addr, 40134 + 2 + DerAc::W.offset, "701 before 802");
    let soc = find(&pts, P::Soc);
    assert_eq!(
        soc[0].addr,
        40070 + 2 + Battery::SOC.offset,
        "802 before 124"
    );
    assert_eq!(soc[1].addr, 40289 + 2 + Storage::CHA_STATE.offset);
}

#[test]
fn invert_power_flips_only_signed_power() {
    let chain = vec![block(1, 40002, 66), block(203, 40070, 105)];
    let pts = points_for(&chain, DeviceType::Meter, true);
    assert!(find(&pts, P::ActivePower)[0].negate);
    assert!(find(&pts, P::ReactivePower)[0].negate);
    assert!(!find(&pts, P::TotalEnergyConsumed)[0].negate);
    assert!(!find(&pts, P::Frequency)[0].negate);
}

#[test]
fn a_short_block_drops_points_beyond_its_length() {
    // A 103 block that stops before WH (Off 24): no energy point.
    let chain = vec![block(1, 40002, 66), block(103, 40070, 20)];
    let pts = points_for(&chain, DeviceType::Inverter, false);
    assert!(!find(&pts, P::ActivePower).is_empty());
    assert!(find(&pts, P::TotalEnergyProduced).is_empty());
}

#[test]
fn unknown_models_are_skipped() {
    let chain = vec![
        block(1, 40002, 66),
        block(64001, 40070, 10),
        block(203, 40082, 105),
    ];
    let pts = points_for(&chain, DeviceType::Meter, false);
    assert!(pts.iter().all(|p| p.addr >= 40082));
    assert!(!pts.is_empty());
}
