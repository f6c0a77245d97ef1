//! Each SunSpec family against a simulated device, through the agent: integer +
//! scale factor inverters (103) and meters (203), float inverters (113) and
//! meters (213), storage (124, 802) and the DER models (701, 702, 704, 713).
//! Unknown models in a chain (a vendor model, a model with repeating blocks)
//! are skipped, not fatal.

use std::time::Duration;

use crate::common::wait_for;
use crate::steering_support::{Kind, TestSite};
use sitegate::agent::Agent;
use sitegate::modbus::Controls;
use sitegate::model::Property;
use sitegate::sim::{
    fixed_values, SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec, Variant,
};

const RATED: f64 = 8000.0;

fn devices() -> Vec<(u8, &'static str, Kind, SimKind)> {
    let fixed = |variant| SimKind::Fixed {
        variant,
        rated_w: RATED,
    };
    vec![
        (
            1,
            "dvc_inv_int",
            Kind::Inverter,
            SimKind::Inverter { rated_w: RATED },
        ),
        (
            2,
            "dvc_inv_float",
            Kind::Inverter,
            fixed(Variant::InverterFloat),
        ),
        (3, "dvc_meter_int", Kind::Meter, SimKind::Meter),
        (
            4,
            "dvc_meter_float",
            Kind::Meter,
            fixed(Variant::MeterFloat),
        ),
        (5, "dvc_der", Kind::Battery, fixed(Variant::DerStorage)),
        (
            6,
            "dvc_storage",
            Kind::Battery,
            SimKind::Battery {
                rated_w: 5000.0,
                capacity_wh: 10_000.0,
                initial_soc: 40.0,
                soc_min: 5.0,
                soc_max: 95.0,
            },
        ),
    ]
}

/// The [`devices`] on the bus `lan` at `127.0.0.1:port`, polled every
/// 200 ms; the database in `dir`.
fn site(port: u16, dir: &std::path::Path) -> TestSite {
    let mut site = TestSite::bare("ste_s", "S")
        .storage_path(&dir.join("db"))
        .bus_key_of("lan", "tcp", format!("127.0.0.1:{port}"));
    for (unit, reference, kind, _) in devices() {
        site = site.device("lan", reference, kind).unit_id(unit);
    }
    site
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_maps_to_the_vocabulary() {
    let spec = SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "lan".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: devices()
                .into_iter()
                .map(|(unit_id, r, _, kind)| SimDeviceSpec {
                    unit_id,
                    kind,
                    serial: r.to_uppercase(),
                    refuse_writes: false,
                    sunspec_base: 40000,
                    response: sitegate::sim::SimResponse::IDEAL,
                })
                .collect(),
        }],
        time_factor: 1.0,
        start: Some(1_782_039_600_000),
        base_load_w: 500.0,
        ..SimSiteSpec::default()
    };
    let sim = SimSite::start(spec).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = site(sim.addr("lan").unwrap().port(), dir.path()).config();
    let agent = Agent::start(cfg).await.unwrap();
    let live = agent.live().clone();
    let id = |r: &str| live.find(r).unwrap();
    wait_for("every device polled", Duration::from_secs(10), || async {
        devices()
            .iter()
            .all(|(_, r, _, _)| live.latest(id(r), Property::ActivePower).is_some())
            .then_some(())
    })
    .await;

    for (reference, variant) in [
        ("dvc_inv_float", Variant::InverterFloat),
        ("dvc_meter_float", Variant::MeterFloat),
        ("dvc_der", Variant::DerStorage),
    ] {
        for (p, want) in fixed_values(variant, RATED) {
            let got = live.latest(id(reference), p).map(|r| r.value);
            assert!(
                got.is_some_and(|g| (g - want).abs() < 1e-6),
                "{reference} {p:?}: {got:?}, want {want}"
            );
        }
    }
    // Float "not implemented" (NaN) points are not offered.
    assert!(!live
        .snapshot(id("dvc_inv_float"))
        .offers(Property::ReactivePower));
    assert!(!live
        .snapshot(id("dvc_meter_float"))
        .offers(Property::ReactivePower));

    // Integer + scale-factor families, driven by the physics.
    let inv = live.snapshot(id("dvc_inv_int"));
    for p in [
        Property::Frequency,
        Property::TotalEnergyProduced,
        Property::ActivePowerLimit,
    ] {
        assert!(inv.reading(p).is_some(), "inverter 103 {p:?}");
    }
    let meter = live.snapshot(id("dvc_meter_int"));
    for p in [
        Property::TotalEnergyProduced,
        Property::TotalEnergyConsumed,
        Property::VoltageL3,
    ] {
        assert!(meter.reading(p).is_some(), "meter 203 {p:?}");
    }
    let storage = live.snapshot(id("dvc_storage"));
    assert_eq!(
        storage.reading(Property::Soc).map(|r| r.value.round()),
        Some(40.0)
    );
    assert!(storage.reading(Property::MaxChargePower).is_some());

    // The float inverter's chain holds a vendor model and model 160 with
    // repeating modules; both are listed, skipped, and 123 after them still maps.
    let info = live.snapshot(id("dvc_inv_float")).info;
    assert_eq!(info.sunspec_models, [1, 113, 64_110, 120, 121, 160, 123]);
    assert_eq!(info.rated_power_w, Some(RATED));

    // Where steering finds the controls.
    let maps = agent.device_maps();
    let der = maps.get(id("dvc_der")).unwrap();
    assert!(matches!(
        der.controls(),
        Controls::Sunspec {
            der: Some(_),
            storage: None,
            immediate: None
        }
    ));
    assert_eq!(der.info.capacity_wh, Some(10_000.0));
    let st = maps.get(id("dvc_storage")).unwrap();
    assert!(matches!(
        st.controls(),
        Controls::Sunspec {
            storage: Some(_),
            ..
        }
    ));
    let inv = maps.get(id("dvc_inv_float")).unwrap();
    assert!(matches!(inv.controls(), Controls::Sunspec { immediate: Some(b), .. } if b.id == 123));

    agent.shutdown().await;
    sim.shutdown().await;
}
