//! Every shipped register-map profile against a simulated device built from the
//! same map: the agent reads the values the device shows, in the vocabulary's
//! units and signs, and the profile's ESS writes are accepted by the device.

mod common;

use std::time::Duration;

use common::site::{self, SUMMER_MORNING_MS};
use common::wait_for;
use sitegate::modbus::plan::{Span, Table};
use sitegate::modbus::profile::BUILTIN;
use sitegate::modbus::{Controls, Op};
use sitegate::model::Property;

fn config(profile: &str) -> String {
    format!(
        r#"
gateway_id = "test"
{}
[polling]
min_backoff_ms = 100
max_backoff_ms = 400

[[sites]]
reference = "ste_test"
name = "Test site"

[[buses]]
name = "hybrid"
tcp = "127.0.0.1:0"
timeout_ms = 500

[[devices]]
reference = "dvc_bat"
name = "Battery"
type = "battery"
site = "ste_test"
bus = "hybrid"
unit_id = 7
profile = "{profile}"
poll_interval_ms = 200
"#,
        site::http_section()
    )
}

async fn value(site: &site::TestSite, p: Property) -> Option<f64> {
    let id = site.agent.live().find("dvc_bat")?;
    site.agent.live().latest(id, p).map(|r| r.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_shipped_profile_reads_and_steers_its_simulated_device() {
    // The battery profiles with a storage power control; the others (meters,
    // inverters, read-only batteries) are in tests/profile_library.rs.
    let steerable = BUILTIN.iter().filter_map(|(name, text)| {
        let p = sitegate::modbus::profile::parse(name, "built-in", text).ok()?;
        p.controls.ess_power.is_some().then_some((name, p))
    });
    for (name, profile) in steerable {
        let maps = |prop| profile.points.iter().any(|x| x.property == prop);
        let site = site::start(&config(name), 1.0, SUMMER_MORNING_MS).await;
        let dev = site.sim.device("hybrid", 7).expect("simulated device");
        // Charging: the vendors count it positive or flag it; the API says negative.
        assert!(dev.set_value(Property::ActivePower, -2300.0));
        // Whole percent: some vendors have no decimals.
        assert!(dev.set_value(Property::Soc, 61.0));
        wait_for(
            &format!("{name}: values"),
            Duration::from_secs(10),
            || async {
                let p = value(&site, Property::ActivePower).await?;
                let soc = value(&site, Property::Soc).await?;
                ((p - -2300.0).abs() < 1e-6 && (soc - 61.0).abs() < 1e-6).then_some(())
            },
        )
        .await;
        if maps(Property::TotalEnergyProduced) {
            let produced = value(&site, Property::TotalEnergyProduced).await.unwrap();
            assert!((produced - 1_234_500.0).abs() < 1e-3, "{name}: {produced}");
        }
        if maps(Property::TotalEnergyConsumed) {
            let consumed = value(&site, Property::TotalEnergyConsumed).await.unwrap();
            assert!((consumed - 1_345_600.0).abs() < 1e-3, "{name}: {consumed}");
        }
        if let Some(t) = value(&site, Property::Temperature).await {
            assert!((t - 24.5).abs() < 1e-6, "{name}: {t}");
        }

        // Steering's view: the profile's controls, written through the bus.
        let id = site.agent.live().find("dvc_bat").unwrap();
        let map = site.agent.device_maps().get(id).expect("discovered");
        let Controls::Profile(controls) = map.controls() else {
            panic!("{name}: expected profile controls");
        };
        let ess = controls.ess_power.as_ref().expect("ESS control");
        let bus = site.agent.bus("hybrid").unwrap();
        for (watts, writes) in [
            (-2000.0, ess.writes(-2000.0, 60).unwrap()),
            (1500.0, ess.writes(1500.0, 60).unwrap()),
            (0.0, ess.release_writes()),
        ] {
            let mut ops: Vec<Op> = writes
                .iter()
                .map(|w| Op::Write {
                    addr: w.addr,
                    values: w.values.clone(),
                })
                .collect();
            ops.extend(
                writes
                    .iter()
                    .map(|w| Op::Read(Span::new(Table::Holding, w.addr, w.values.len() as u16))),
            );
            let out = bus
                .transact(7, ops)
                .await
                .unwrap_or_else(|e| panic!("{name} {watts} W: {e}"));
            // The last write to each register is what a read-back shows.
            let reads = &out[writes.len()..];
            for (i, w) in writes.iter().enumerate() {
                let later = writes[i + 1..].iter().any(|x| x.addr == w.addr);
                if !later {
                    assert_eq!(
                        reads[i],
                        sitegate::modbus::OpOutput::Words(w.values.clone()),
                        "{name} {watts} W: register {}",
                        w.addr
                    );
                }
            }
        }
        site.stop().await;
    }
}
