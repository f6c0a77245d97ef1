//! The single-, split-phase and delta SunSpec families through the agent, each
//! against a simulated device laid out from its own model definition:
//! inverters 101, 102 (integer + scale factor) and 111, 112 (float), meters
//! 201, 202, 204 (integer + scale factor) and 211, 212, 214 (float). Values,
//! scale factors (−2 to +2) and signs arrive in the vocabulary of
//! `src/model/property.rs`; phases a device does not have are not offered; the
//! rated power comes from model 121's `WMax` before model 120's `WRtg`.
//! (Models 103, 113, 203, 213, 124, 802 and 7xx: `tests/it/modbus_sunspec.rs`.)

use std::time::Duration;

use crate::common::wait_for;
use crate::steering_support::{Kind, TestSite};
use sitegate::agent::Agent;
use sitegate::model::Property;
use sitegate::sim::{
    fixed_absent, fixed_values, SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec,
    Variant,
};

const RATED: f64 = 8000.0;

/// (unit id, reference, type, variant, SunSpec models the agent must list).
fn devices() -> Vec<(u8, &'static str, Kind, Variant, Vec<u16>)> {
    use Variant as V;
    vec![
        (
            1,
            "dvc_inv_101",
            Kind::Inverter,
            V::Inverter101,
            vec![1, 101, 120, 121],
        ),
        (
            2,
            "dvc_inv_102",
            Kind::Inverter,
            V::Inverter102,
            vec![1, 102, 120],
        ),
        (
            3,
            "dvc_inv_111",
            Kind::Inverter,
            V::Inverter111,
            vec![1, 111, 120],
        ),
        (
            4,
            "dvc_inv_112",
            Kind::Inverter,
            V::Inverter112,
            vec![1, 112],
        ),
        (5, "dvc_meter_201", Kind::Meter, V::Meter201, vec![1, 201]),
        (6, "dvc_meter_202", Kind::Meter, V::Meter202, vec![1, 202]),
        (7, "dvc_meter_204", Kind::Meter, V::Meter204, vec![1, 204]),
        (8, "dvc_meter_211", Kind::Meter, V::Meter211, vec![1, 211]),
        (9, "dvc_meter_212", Kind::Meter, V::Meter212, vec![1, 212]),
        (10, "dvc_meter_214", Kind::Meter, V::Meter214, vec![1, 214]),
    ]
}

/// A 212 meter of a brand that counts export as positive: `invert_power`.
const INVERTED: (u8, &str) = (11, "dvc_meter_212_inverted");

/// The [`devices`] and the [`INVERTED`] meter on the bus `lan` at
/// `127.0.0.1:port`, polled every 200 ms; the database in `dir`.
fn site(port: u16, dir: &std::path::Path) -> TestSite {
    let mut site = TestSite::bare("ste_s", "S")
        .storage_path(&dir.join("db"))
        .bus_key_of("lan", "tcp", format!("127.0.0.1:{port}"));
    for (unit, reference, kind, _, _) in devices() {
        site = site.device("lan", reference, kind).unit_id(unit);
    }
    site.device("lan", INVERTED.1, Kind::Meter)
        .unit_id(INVERTED.0)
        .key("invert_power", true)
}

fn spec(unit_id: u8, variant: Variant) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind: SimKind::Fixed {
            variant,
            rated_w: RATED,
        },
        serial: format!("FAM-{unit_id}"),
        refuse_writes: false,
        sunspec_base: 40000,
        response: sitegate::sim::SimResponse::IDEAL,
    }
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-6 * want.abs().max(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_split_phase_and_delta_families_map_to_the_vocabulary() {
    let mut sims: Vec<SimDeviceSpec> = devices()
        .into_iter()
        .map(|(unit, _, _, variant, _)| spec(unit, variant))
        .collect();
    sims.push(spec(INVERTED.0, Variant::Meter212));
    let sim = SimSite::start(SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "lan".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: sims,
        }],
        time_factor: 1.0,
        start: None,
        base_load_w: 500.0,
        ..SimSiteSpec::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = site(sim.addr("lan").unwrap().port(), dir.path()).config();
    let agent = Agent::start(cfg).await.unwrap();
    let live = agent.live().clone();
    let id = |r: &str| live.find(r).unwrap();
    let mut references: Vec<&str> = devices().iter().map(|d| d.1).collect();
    references.push(INVERTED.1);
    wait_for("every device polled", Duration::from_secs(20), || async {
        references
            .iter()
            .all(|r| live.latest(id(r), Property::ActivePower).is_some())
            .then_some(())
    })
    .await;

    for (_, reference, _, variant, models) in devices() {
        let snap = live.snapshot(id(reference));
        assert_eq!(snap.info.sunspec_models, models, "{reference}");
        for (p, want) in fixed_values(variant, RATED) {
            let got = snap.reading(p).map(|r| r.value);
            assert!(
                got.is_some_and(|g| close(g, want)),
                "{reference} {p:?}: {got:?}, want {want}"
            );
        }
        for p in fixed_absent(variant) {
            assert!(!snap.offers(p), "{reference} offers {p:?}, not implemented");
        }
    }

    // Signs per the vocabulary, spelled out: an exporting meter reads negative
    // and counts its export as produced energy; a reactive power and a
    // temperature below zero keep their sign through an int16 and its SF.
    let reading = |r: &str, p| live.latest(id(r), p).unwrap().value;
    assert!(reading("dvc_meter_201", Property::ActivePower) < 0.0);
    assert!(reading("dvc_meter_202", Property::ActivePower) > 0.0);
    assert!(reading("dvc_inv_101", Property::ReactivePower) < 0.0);
    assert!(reading("dvc_inv_101", Property::Temperature) < 0.0);
    assert!(reading("dvc_inv_101", Property::ActivePower) > 0.0);

    // `invert_power` flips active and reactive power, never the counters.
    let plain = fixed_values(Variant::Meter212, RATED);
    for (p, want) in plain {
        let want = if matches!(p, Property::ActivePower | Property::ReactivePower) {
            -want
        } else {
            want
        };
        let got = reading(INVERTED.1, p);
        assert!(close(got, want), "{} {p:?}: {got}, want {want}", INVERTED.1);
    }

    // Rated power: 121's WMax (the setting the limit percentages refer to)
    // before 120's WRtg; nothing without either.
    let maps = agent.device_maps();
    let rated = |r: &str| maps.get(id(r)).unwrap().info.rated_power_w;
    assert_eq!(rated("dvc_inv_101"), Some(0.9 * RATED), "121 WMax");
    assert_eq!(rated("dvc_inv_102"), Some(RATED), "120 WRtg");
    assert_eq!(rated("dvc_inv_111"), Some(RATED), "120 WRtg");
    assert_eq!(rated("dvc_inv_112"), None, "no 120 or 121");

    agent.shutdown().await;
    sim.shutdown().await;
}
