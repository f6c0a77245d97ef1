//! Requests per poll against a simulated device, for several register layouts:
//! exactly the minimum the 125-register limit and the coalescing gap allow
//! (computed here independently, by dynamic programming), and, on a device that
//! refuses reads through its holes, a plan that learns the gapless minimum.
//! SunSpec devices of a site's mix (integer and float inverters with 123,
//! meters 203 and 213, batteries 124/802) read the minimum for what a poll
//! needs, their static points left out and read again only when due.

use std::sync::Arc;
use std::time::Duration;

use ::sunspec::models::{model121::Model121 as M121, model123::Model123 as M123};
use sitegate::config::{DeviceConfig, PollingConfig, ProfileRef, Transport};
use sitegate::modbus::link::{Port, UnitReader};
use sitegate::modbus::poll::{poll_device, DeviceState};
use sitegate::model::{DeviceType, Property};
use sitegate::profile::{self, Profile};
use sitegate::register::plan::{Span, Table};
use sitegate::sim::{SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec, Variant};

use crate::common::farm::{FarmInverter, Measurements};
use crate::steering_support::{Kind, TestSite};

fn unit(port: &mut Port) -> UnitReader<'_> {
    UnitReader { port, unit: 1 }
}

/// Polling with read-through gaps of at most `gap` registers.
fn gap(gap: u16) -> PollingConfig {
    PollingConfig {
        coalesce_gap: gap,
        ..PollingConfig::default()
    }
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
    let kind = SimKind::Profile {
        profile: profile.clone(),
        readable_gaps,
    };
    let (sim, port) = serve(vec![(1, kind, None)]).await;
    let mut dev = device(DeviceType::Battery, 1);
    dev.profile = ProfileRef::Registers(profile);
    (sim, port, dev)
}

#[tokio::test]
async fn requests_per_poll_are_the_computed_minimum() {
    for g in [0u16, 16, 40] {
        for (name, text) in layouts() {
            let profile = Arc::new(profile::parse(name, name, &text).unwrap());
            let (sim, mut port, cfg) = setup(profile.clone(), true).await;
            let dev = sim.device("dev", 1).unwrap();
            let mut state = DeviceState::default();
            for round in 0..3 {
                let before = dev.read_count();
                let polled = poll_device(&mut unit(&mut port), &cfg, &gap(g), &mut state)
                    .await
                    .unwrap_or_else(|e| panic!("{name} gap {g}: {e}"));
                let reads = (dev.read_count() - before) as usize;
                let needed = state.map.as_ref().unwrap().needed();
                assert_eq!(
                    reads,
                    minimum(&needed, g),
                    "{name}, gap {g}, poll {round}: {:?}",
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
    let first = poll_device(&mut unit(&mut port), &cfg, &gap(16), &mut state)
        .await
        .unwrap();
    assert_eq!(first.values.len(), 4, "every value despite the refusals");
    let needed = state.map.as_ref().unwrap().needed();
    assert!(minimum(&needed, 16) < minimum(&needed, 0));
    for _ in 0..2 {
        let before = dev.read_count();
        let polled = poll_device(&mut unit(&mut port), &cfg, &gap(16), &mut state)
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

/// A device of type `ty` on `unit` of the bus `dev`, read with the profile
/// `sunspec`.
fn device(ty: DeviceType, unit: u8) -> DeviceConfig {
    // The reference the agent derives for a device "D" of site "ste_a";
    // polled at the agent's default interval.
    let cfg = TestSite::bare("ste_a", "A")
        .poll_interval_ms(1000)
        .device("dev", "dvc_a_d", Kind::Meter)
        .name("D")
        .bus_key_of("dev", "tcp", "127.0.0.1:502")
        .config();
    DeviceConfig {
        device_type: ty,
        unit_id: unit,
        ..cfg.devices[0].clone()
    }
}

fn device_spec(unit_id: u8, kind: SimKind) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind,
        serial: format!("S{unit_id}"),
        refuse_writes: false,
        sunspec_base: 40000,
        response: sitegate::sim::SimResponse::IDEAL,
    }
}

/// One server, `dev`, with the devices of `units`; each farm inverter's image
/// laid over its device.
async fn serve(units: Vec<(u8, SimKind, Option<&FarmInverter>)>) -> (SimSite, Port) {
    let spec = SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "dev".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: units
                .iter()
                .map(|(u, kind, _)| device_spec(*u, kind.clone()))
                .collect(),
        }],
        // Noon, and the simulated clock all but stopped: the values compared
        // poll to poll stay as they are (wall time would move the sun).
        time_factor: 1e-9,
        start: Some(crate::steering_support::NOON),
        base_load_w: 0.0,
        ..SimSiteSpec::default()
    };
    let sim = SimSite::start(spec).await.unwrap();
    for (u, _, farm) in &units {
        if let Some(f) = farm {
            f.lay(&sim.device("dev", *u).unwrap());
        }
    }
    let addr = sim.addr("dev").unwrap();
    let port = Port::new(
        Transport::Tcp {
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        Duration::from_secs(2),
    );
    (sim, port)
}

/// The mix of a SunSpec site: the simulator's integer inverter (1, 103, 120,
/// 121, 123), inverters laid out as the official definitions have them with
/// 103 and with 113, a meter (203), a float meter (213) and a battery (1, 701,
/// 120, 124, 802). Each poll reads exactly the minimum the 125-register limit
/// allows for the registers it needs, and static points are not among them:
/// an inverter whose controls the agent does not write is one request a poll
/// with 103 (its measurements and its limit, 40073..40191, are 119 registers;
/// `WMaxLimPct_SF` at 40205 is static), and two with 113, whose measurements
/// and limit span 128 registers.
#[tokio::test]
async fn sunspec_polls_read_the_minimum_without_their_static_points() {
    let int = FarmInverter::new(Measurements::Int);
    let float = FarmInverter::new(Measurements::Float);
    let battery = SimKind::Battery {
        rated_w: 5000.0,
        capacity_wh: 10_000.0,
        initial_soc: 50.0,
        soc_min: 5.0,
        soc_max: 95.0,
    };
    let meter_f = SimKind::Fixed {
        variant: Variant::MeterFloat,
        rated_w: 10_000.0,
    };
    let (sim, mut port) = serve(vec![
        (1, SimKind::Inverter { rated_w: 10_000.0 }, None),
        (2, int.sim_kind(), Some(&int)),
        (3, float.sim_kind(), Some(&float)),
        (4, SimKind::Meter, None),
        (5, meter_f, None),
        (6, battery, None),
    ])
    .await;
    use DeviceType::{Battery, Inverter, Meter};
    // (unit, type, reads per poll where the layout fixes it)
    for (unit, ty, per_poll) in [
        (1, Inverter, Some(1)),
        (2, Inverter, Some(1)),
        (3, Inverter, Some(2)),
        (4, Meter, None),
        (5, Meter, None),
        (6, Battery, None),
    ] {
        let cfg = device(ty, unit);
        let dev = sim.device("dev", unit).unwrap();
        let mut state = DeviceState::default();
        let mut r = UnitReader {
            port: &mut port,
            unit,
        };
        let mut first = poll_device(&mut r, &cfg, &gap(0), &mut state)
            .await
            .unwrap_or_else(|e| panic!("unit {unit}: {e}"));
        // The simulated clock stands still, but a device follows its target
        // in real time from its start: poll until two polls agree.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let next = poll_device(&mut r, &cfg, &gap(0), &mut state)
                .await
                .unwrap_or_else(|e| panic!("unit {unit}: {e}"));
            if next.values == first.values {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "unit {unit}: its values still move: {:?}",
                next.values
            );
            first = next;
        }
        let map = state.map.clone().unwrap();
        let needed = map.needed();
        // A meter's models (1, 203, 213) have no static point.
        assert_eq!(map.statics.is_empty(), ty == Meter, "unit {unit}");
        for s in &map.statics {
            assert!(!needed.contains(s), "unit {unit}: static {s:?} in the poll");
        }
        let least = minimum(&needed, u16::MAX);
        eprintln!(
            "unit {unit} ({ty:?}, models {:?}): {least} request(s) a poll, {} static span(s)",
            map.info.sunspec_models,
            map.statics.len()
        );
        if let Some(n) = per_poll {
            assert_eq!(least, n, "unit {unit}: {needed:?}");
        }
        for round in 0..3 {
            let before = dev.read_count();
            let polled = poll_device(&mut r, &cfg, &gap(0), &mut state)
                .await
                .unwrap();
            let reads = (dev.read_count() - before) as usize;
            assert_eq!(reads, least, "unit {unit}, poll {round}: {:?}", state.plan);
            assert!(!polled.statics_read);
            assert_eq!(polled.values, first.values, "unit {unit}: the same values");
        }
        if ty == Inverter {
            let limit = first
                .values
                .iter()
                .find(|(p, _)| *p == Property::ActivePowerLimit);
            assert_eq!(
                limit,
                Some(&(Property::ActivePowerLimit, 100.0)),
                "unit {unit}"
            );
        }
    }
    sim.shutdown().await;
}

/// The value of `p` in a poll.
fn value(values: &[(Property, f64)], p: Property) -> Option<f64> {
    values.iter().find(|(q, _)| *q == p).map(|(_, v)| *v)
}

/// Static points change only when read again: after their interval, or at
/// once when a poll that reads one of them anyway finds another word; from
/// then on the device is decoded with the new values.
#[tokio::test]
async fn static_points_are_read_again_after_their_interval_or_when_seen_to_change() {
    let mut farm = FarmInverter::new(Measurements::Int);
    let (sim, mut port) = serve(vec![(1, farm.sim_kind(), Some(&farm))]).await;
    let dev = sim.device("dev", 1).unwrap();
    let cfg = device(DeviceType::Inverter, 1);
    let hourly = PollingConfig::default();
    let every_second = PollingConfig {
        static_refresh_s: 1,
        ..PollingConfig::default()
    };
    let mut state = DeviceState::default();
    let mut r = UnitReader {
        port: &mut port,
        unit: 1,
    };
    // A poll, the requests it took, and the rating the map shows after it.
    let mut poll = async |polling: &PollingConfig| {
        let before = dev.read_count();
        let p = poll_device(&mut r, &cfg, polling, &mut state)
            .await
            .unwrap();
        let rated = state.map.as_ref().unwrap().info().rated_power_w;
        (p, dev.read_count() - before, rated)
    };
    let (_, _, rated) = poll(&hourly).await;
    assert_eq!(rated, Some(25_000.0));
    // The device limits itself to 50.00 % (scale factor −2).
    farm.poke(&dev, 123, &M123::W_MAX_LIM_PCT, &[5000]);
    farm.poke(&dev, 123, &M123::W_MAX_LIM_ENA, &[1]);
    let (p, reads, _) = poll(&hourly).await;
    assert_eq!(
        (value(&p.values, Property::ActivePowerLimit), reads),
        (Some(50.0), 1)
    );

    // Its scale factor becomes −1: a static point, decoded as kept.
    farm.poke(&dev, 123, &M123::W_MAX_LIM_PCT_SF, &[(-1i16) as u16]);
    let (p, reads, _) = poll(&hourly).await;
    assert_eq!(
        (value(&p.values, Property::ActivePowerLimit), reads),
        (Some(50.0), 1)
    );
    assert!(!p.statics_read);

    // Past the interval (`every_second`: static_refresh_s = 1, by the real clock,
    // and 100 ms to spare), the poll reads them again (one more request) and
    // decodes with the new scale factor from then on.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (p, reads, _) = poll(&every_second).await;
    assert!(p.statics_read);
    assert_eq!(
        (value(&p.values, Property::ActivePowerLimit), reads),
        (Some(500.0), 2)
    );
    let (p, reads, _) = poll(&hourly).await;
    assert_eq!(
        (value(&p.values, Property::ActivePowerLimit), reads),
        (Some(500.0), 1)
    );

    // WMax (121), read through with every poll, changes: read again at once,
    // and the rating follows.
    farm.poke(&dev, 121, &M121::W_MAX, &[20_000]);
    let (p, reads, rated) = poll(&hourly).await;
    assert!(p.statics_read);
    assert_eq!((reads, rated), (2, Some(20_000.0)));
    sim.shutdown().await;
}
