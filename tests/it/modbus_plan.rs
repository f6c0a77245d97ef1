//! Requests per poll against a simulated device, for several register layouts:
//! exactly the minimum the 125-register limit and the coalescing gap allow
//! (computed here independently, by dynamic programming), and, on a device that
//! refuses reads through its holes, a plan that learns the gapless minimum.

use std::sync::Arc;
use std::time::Duration;

use sitegate::config::{parse, DeviceConfig, ProfileRef, Transport};
use sitegate::modbus::link::{Port, UnitReader};
use sitegate::modbus::poll::{poll_device, DeviceState};
use sitegate::profile::{self, Profile};
use sitegate::register::plan::{Span, Table};
use sitegate::sim::{SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec};

fn unit(port: &mut Port) -> UnitReader<'_> {
    UnitReader { port, unit: 1 }
}

/// Fewest requests reading `spans`: each request is a run of spans (sorted)
/// of one table with holes of at most `gap` and at most 125 registers.
fn minimum(spans: &[Span], gap: u16) -> usize {
    let mut s: Vec<Span> = spans.to_vec();
    s.sort();
    s.dedup();
    let mut best = vec![usize::MAX; s.len() + 1];
    best[0] = 0;
    for i in 0..s.len() {
        if best[i] == usize::MAX {
            continue;
        }
        let mut end = s[i].end();
        for j in i..s.len() {
            if j > i {
                let hole = i64::from(s[j].addr) - i64::from(end);
                if s[j].table != s[i].table || hole > i64::from(gap) {
                    break;
                }
            }
            end = end.max(s[j].end());
            if end - u32::from(s[i].addr) > 125 {
                break;
            }
            best[j + 1] = best[j + 1].min(best[i] + 1);
        }
    }
    best[s.len()]
}

fn point(property: &str, register: u16, table: &str, ty: &str) -> String {
    format!(
        "[[points]]\nproperty = \"{property}\"\nregister = {register}\ntable = \"{table}\"\ntype = \"{ty}\"\n"
    )
}

/// Register layouts: dense, holes below and above the gap, the 125 limit,
/// two tables, scale-factor and sign registers.
fn layouts() -> Vec<(&'static str, String)> {
    let h = |p, r, t| point(p, r, "holding", t);
    let i = |p, r, t| point(p, r, "input", t);
    vec![
        ("dense", [h("activePower", 0, "i16"), h("soc", 1, "u16"), h("frequency", 2, "u16")].concat()),
        (
            "holes",
            [
                h("activePower", 100, "i32"),
                h("soc", 110, "u16"),
                h("frequency", 140, "u16"),
                h("temperature", 157, "i16"),
            ]
            .concat(),
        ),
        (
            "limit",
            [
                h("activePower", 0, "i32"),
                h("soc", 60, "u16"),
                h("frequency", 122, "u32"),
                h("temperature", 124, "u32"),
                h("voltageL1", 240, "u16"),
            ]
            .concat(),
        ),
        (
            "tables",
            [
                i("activePower", 5, "u16"),
                h("soc", 5, "u16"),
                i("frequency", 9, "u16"),
                h("temperature", 300, "i16"),
            ]
            .concat(),
        ),
        (
            "flags",
            format!(
                "{}negative_when = {{ register = 30, table = \"input\", mask = 2 }}\n{}scale_factor = 12\n",
                i("activePower", 10, "u16"),
                h("soc", 11, "u16")
            ),
        ),
    ]
}

async fn setup(profile: Arc<Profile>, readable_gaps: bool) -> (SimSite, Port, DeviceConfig) {
    let spec = SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "dev".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: vec![SimDeviceSpec {
                unit_id: 1,
                kind: SimKind::Profile {
                    profile: profile.clone(),
                    readable_gaps,
                },
                serial: "S1".into(),
                refuse_writes: false,
                sunspec_base: 40000,
                response: sitegate::sim::SimResponse::IDEAL,
            }],
        }],
        time_factor: 1.0,
        start: None,
        base_load_w: 0.0,
    };
    let sim = SimSite::start(spec).await.unwrap();
    let addr = sim.addr("dev").unwrap();
    let port = Port::new(
        Transport::Tcp {
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        Duration::from_secs(2),
    );
    let cfg = parse(
        r#"
[http]
listen = ["127.0.0.1:0"]
auth = "none"
[[sites]]
reference = "ste_a"
name = "A"
[[buses]]
name = "dev"
tcp = "127.0.0.1:502"
[[devices]]
name = "D"
type = "battery"
site = "ste_a"
bus = "dev"
unit_id = 1
"#,
    )
    .unwrap();
    let mut dev = cfg.devices[0].clone();
    dev.profile = ProfileRef::Registers(profile);
    (sim, port, dev)
}

#[tokio::test]
async fn requests_per_poll_are_the_computed_minimum() {
    for gap in [0u16, 16, 40] {
        for (name, text) in layouts() {
            let profile = Arc::new(profile::parse(name, name, &text).unwrap());
            let (sim, mut port, cfg) = setup(profile.clone(), true).await;
            let dev = sim.device("dev", 1).unwrap();
            let mut state = DeviceState::default();
            for round in 0..3 {
                let before = dev.read_count();
                let polled = poll_device(&mut unit(&mut port), &cfg, gap, &mut state)
                    .await
                    .unwrap_or_else(|e| panic!("{name} gap {gap}: {e}"));
                let reads = (dev.read_count() - before) as usize;
                let needed = state.map.as_ref().unwrap().needed();
                assert_eq!(
                    reads,
                    minimum(&needed, gap),
                    "{name}, gap {gap}, poll {round}: {:?}",
                    state.plan
                );
                assert_eq!(polled.values.len(), profile.points.len(), "{name}");
            }
            sim.shutdown().await;
        }
    }
}

#[tokio::test]
async fn a_device_that_refuses_holes_gets_a_learned_gapless_plan() {
    let (_, text) = &layouts()[1];
    let profile = Arc::new(profile::parse("holes", "holes", text).unwrap());
    let (sim, mut port, cfg) = setup(profile.clone(), false).await;
    let dev = sim.device("dev", 1).unwrap();
    let mut state = DeviceState::default();
    let first = poll_device(&mut unit(&mut port), &cfg, 16, &mut state)
        .await
        .unwrap();
    assert_eq!(first.values.len(), 4, "every value despite the refusals");
    let needed = state.map.as_ref().unwrap().needed();
    assert!(minimum(&needed, 16) < minimum(&needed, 0));
    for _ in 0..2 {
        let before = dev.read_count();
        let polled = poll_device(&mut unit(&mut port), &cfg, 16, &mut state)
            .await
            .unwrap();
        assert_eq!(polled.values.len(), 4);
        assert_eq!((dev.read_count() - before) as usize, minimum(&needed, 0));
    }
    // The learned plan lives as long as the map: a fresh state starts over.
    assert_eq!(
        state.map.as_ref().unwrap().requests.len(),
        minimum(&needed, 16)
    );
    assert!(state.plan.iter().all(|r| r.table == Table::Holding));
    sim.shutdown().await;
}
