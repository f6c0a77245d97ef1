//! Register layouts: the SunSpec chain per kind, values and sentinels as a client
//! decodes them, and the Modbus access rules.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use sunspec::models::model1::Model1;
use sunspec::models::model103::Model103;
use sunspec::models::model120::Model120;
use sunspec::models::model124::Model124;
use sunspec::models::model203::Model203;
use sunspec::models::model701::Model701;
use sunspec::models::model802::Model802;
use tokio_modbus::{ExceptionCode, Request, SlaveRequest};

use super::*;
use crate::register::codec::ValueType::{I16, U16, U32, U64};
use crate::sim::device::Device;
use crate::sim::physics;
use crate::sim::service::ServerShared;

#[test]
fn every_register_of_every_model_is_laid_out() {
    for (spec, ids) in [
        (inverter(1), vec![1, 103, 120, 121, 123]),
        (battery(2, 50.0), vec![1, 701, 120, 124, 802]),
        (meter(3), vec![1, 203]),
    ] {
        let d = Device::new(&spec, crate::sim::device::Build::calm(30_000.0));
        let got: Vec<u16> = d.map.models().iter().map(|m| m.id).collect();
        assert_eq!(got, ids);
        assert_eq!(d.map.undeclared(), Vec::<u16>::new(), "{:?}", spec.kind);
    }
}

#[tokio::test]
async fn each_kind_serves_its_sunspec_chain() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    for (unit, chain) in [
        (
            INVERTER,
            vec![
                (1, 40002, 66),
                (103, 40070, 50),
                (120, 40122, 26),
                (121, 40150, 30),
                (123, 40182, 24),
            ],
        ),
        (
            BATTERY,
            vec![
                (1, 40002, 66),
                (701, 40070, 153),
                (120, 40225, 26),
                (124, 40253, 24),
                (802, 40279, 62),
            ],
        ),
        (METER, vec![(1, 40002, 66), (203, 40070, 105)]),
    ] {
        let mut peer = Peer::connect(addr, unit).await;
        assert_eq!(peer.chain().await, chain, "unit {unit}");
        let (_, common) = peer.model(1).await;
        let s = |offset: u16, length: u16| {
            let o = usize::from(offset);
            codec::decode_string(&common[o..o + usize::from(length)])
        };
        let (mn, md, opt, sn) = (Model1::MN, Model1::MD, Model1::OPT, Model1::SN);
        assert_eq!(s(mn.offset, mn.length).as_deref(), Some("sitegate"));
        assert!(s(md.offset, md.length).unwrap().starts_with("SIM-"));
        assert_eq!(
            s(opt.offset, opt.length),
            None,
            "optional string unimplemented"
        );
        assert!(s(sn.offset, sn.length)
            .unwrap()
            .ends_with(&format!("-{unit}")));
        assert_eq!(raw(&common, &Model1::DA, U16), Some(f64::from(unit)));
    }
    site.shutdown().await;
}

#[tokio::test]
async fn values_decode_to_plausible_physics_and_sentinels() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    settle().await;

    let mut inv = Peer::connect(addr, INVERTER).await;
    let (_, m) = inv.model(103).await;
    type I = Model103;
    let w = scaled(&m, &I::W, I16, &I::W_SF).unwrap();
    assert!((9_000.0..=10_000.0).contains(&w), "PV at noon: {w}");
    approx(scaled(&m, &I::HZ, U16, &I::HZ_SF).unwrap(), 50.0, 0.05);
    approx(scaled(&m, &I::PH_VPH_A, U16, &I::V_SF).unwrap(), 230.0, 3.0);
    approx(scaled(&m, &I::A, U16, &I::A_SF).unwrap(), w / 230.0, 0.5);
    assert_eq!(raw(&m, &I::ST, U16), Some(4.0), "MPPT");
    assert!(scaled(&m, &I::WH, U32, &I::WH_SF).unwrap() > 0.0);
    assert_eq!(raw(&m, &I::TMP_SNK, I16), None, "TmpSnk unimplemented");
    assert_eq!(raw(&m, &I::PP_VPH_AB, U16), None);
    assert_eq!(raw(&m, &I::EVT_VND1, U32), None);
    assert_eq!(raw(&m, &I::W_SF, I16), Some(0.0));
    let (_, n) = inv.model(120).await;
    assert_eq!(raw(&n, &Model120::DER_TYP, U16), Some(4.0));
    assert_eq!(
        scaled(&n, &Model120::W_RTG, U16, &Model120::W_RTG_SF),
        Some(10_000.0)
    );
    assert_eq!(raw(&n, &Model120::WH_RTG, U16), None);

    let mut bat = Peer::connect(addr, BATTERY).await;
    let (_, m) = bat.model(701).await;
    type A = Model701;
    assert_eq!(raw(&m, &A::AC_TYPE, U16), Some(2.0));
    approx(scaled(&m, &A::HZ, U32, &A::HZ_SF).unwrap(), 50.0, 0.05);
    approx(scaled(&m, &A::LNV, U16, &A::V_SF).unwrap(), 230.0, 3.0);
    assert!(scaled(&m, &A::TOT_WH_INJ, U64, &A::TOT_WH_SF).unwrap() > 0.0);
    assert_eq!(raw(&m, &A::VA, I16), None);
    let (_, n) = bat.model(120).await;
    assert_eq!(raw(&n, &Model120::DER_TYP, U16), Some(82.0));
    assert_eq!(
        scaled(&n, &Model120::WH_RTG, U16, &Model120::WH_RTG_SF),
        Some(10_000.0)
    );
    assert_eq!(
        scaled(&n, &Model120::MAX_CHA_RTE, U16, &Model120::MAX_CHA_RTE_SF),
        Some(5_000.0)
    );
    let (_, c) = bat.model(124).await;
    type C = Model124;
    assert_eq!(
        scaled(&c, &C::W_CHA_MAX, U16, &C::W_CHA_MAX_SF),
        Some(5_000.0)
    );
    approx(
        scaled(&c, &C::CHA_STATE, U16, &C::CHA_STATE_SF).unwrap(),
        50.0,
        1.0,
    );
    assert_eq!(raw(&c, &C::IN_OUT_W_RTE_SF, I16), Some(-2.0));
    assert_eq!(
        scaled(&c, &C::IN_W_RTE, I16, &C::IN_OUT_W_RTE_SF),
        Some(100.0)
    );
    assert_eq!(raw(&c, &C::STOR_CTL_MOD, U16), Some(0.0));
    let (_, b) = bat.model(802).await;
    type B = Model802;
    approx(scaled(&b, &B::SOC, U16, &B::SOC_SF).unwrap(), 50.0, 1.0);
    assert_eq!(scaled(&b, &B::SOC_MAX, U16, &B::SOC_SF), Some(90.0));
    assert_eq!(scaled(&b, &B::SOC_MIN, U16, &B::SOC_SF), Some(10.0));
    assert_eq!(raw(&b, &B::TYP, U16), Some(4.0));
    assert_eq!(raw(&b, &B::STATE, U16), Some(3.0));
    assert_eq!(raw(&b, &B::DO_D, U16), None);
    let w802 = scaled(&b, &B::W, I16, &B::W_SF).unwrap();
    let w701 = scaled(&m, &A::W, I16, &A::W_SF).unwrap();
    assert!(
        w701 < 0.0,
        "PV surplus at noon: the battery charges, {w701}"
    );
    approx(w802, w701, 300.0);

    let mut mtr = Peer::connect(addr, METER).await;
    let (_, m) = mtr.model(203).await;
    type T = Model203;
    let w = scaled(&m, &T::W, I16, &T::W_SF).unwrap();
    let phases: f64 = [&T::WPH_A, &T::WPH_B, &T::WPH_C]
        .into_iter()
        .map(|p| scaled(&m, p, I16, &T::W_SF).unwrap())
        .sum();
    approx(phases, w, 3.0);
    approx(scaled(&m, &T::HZ, I16, &T::HZ_SF).unwrap(), 50.0, 0.05);
    assert!(scaled(&m, &T::TOT_WH_IMP, U32, &T::TOT_WH_SF).unwrap() > 0.0);
    assert_eq!(raw(&m, &T::VA, I16), None);
    assert_eq!(
        codec::decode(
            &m[usize::from(T::TOT_V_AH_EXP.offset)..],
            U32,
            WordOrder::HighFirst,
            Absent::SunspecAccumulator
        ),
        None,
        "acc32 unimplemented = 0"
    );
    // The meter balances the site: load − PV − battery discharge.
    let states = |u| site.device("sim", u).unwrap().state();
    let (pv, bat, grid) = (states(INVERTER), states(BATTERY), states(METER));
    let load = physics::load_w(site.now_ms(), 600.0);
    approx(
        grid.ac_power_w,
        load - pv.ac_power_w - bat.ac_power_w,
        100.0,
    );
    assert!(grid.ac_power_w < 0.0, "exporting at noon");
    site.shutdown().await;
}

#[tokio::test]
async fn access_rules_answer_modbus_exceptions() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    let mut peer = Peer::connect(addr, INVERTER).await;
    assert_eq!(
        peer.read(40000, 126).await,
        Err(ExceptionCode::IllegalDataValue)
    );
    assert_eq!(peer.read(40000, 125).await.map(|w| w.len()), Ok(125));
    assert_eq!(
        peer.read(0, 1).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    assert_eq!(
        peer.read(39999, 2).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    // The inverter map ends with 0xFFFF 0x0000 at 40208.
    assert_eq!(peer.read(40208, 2).await, Ok(vec![0xFFFF, 0]));
    assert_eq!(
        peer.read(40208, 3).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    assert_eq!(peer.read_input(40000, 4).await, peer.read(40000, 4).await);
    // Read-only points, the marker, headers and unmapped space refuse writes.
    let w = 40072 + Model103::W.offset;
    assert_eq!(
        peer.write1(w, 1).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    assert_eq!(
        peer.write1(40000, 1).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    assert_eq!(
        peer.write1(40182, 1).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    assert_eq!(
        peer.write(5, &[1, 2]).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    let mut nobody = Peer::connect(addr, 99).await;
    assert_eq!(
        nobody.read(40000, 2).await,
        Err(ExceptionCode::GatewayTargetDevice)
    );
    assert_eq!(
        nobody.write1(40000, 2).await,
        Err(ExceptionCode::GatewayTargetDevice)
    );
    site.shutdown().await;
}

#[test]
fn oversized_writes_and_other_functions_are_refused() {
    let (events, _) = tokio::sync::broadcast::channel(4);
    let device = Arc::new(Mutex::new(Device::new(
        &inverter(1),
        crate::sim::device::Build::calm(30_000.0),
    )));
    let shared = ServerShared::new("sim".into(), BTreeMap::from([(1, device)]), events);
    let req = |request| SlaveRequest { slave: 1, request };
    let limit = 40184 + sunspec::models::model123::Model123::W_MAX_LIM_PCT.offset;
    let big = Request::WriteMultipleRegisters(limit, Cow::Owned(vec![0; 124]));
    assert_eq!(
        shared.handle(req(big)),
        Err(ExceptionCode::IllegalDataValue)
    );
    let coils = Request::ReadCoils(0, 1);
    assert_eq!(
        shared.handle(req(coils)),
        Err(ExceptionCode::IllegalFunction)
    );
    let none = Request::ReadHoldingRegisters(40000, 0);
    assert_eq!(
        shared.handle(req(none)),
        Err(ExceptionCode::IllegalDataValue)
    );
}
