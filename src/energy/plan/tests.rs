//! The plan end to end over plain summaries: which reads a site needs, and
//! the balance assembled from what the store would answer.

use super::*;

const H: i64 = HOUR_MS;
const M: i64 = MINUTE_MS;

fn device(reference: &str, t: DeviceType, offered: &[Property]) -> EnergyDevice {
    EnergyDevice {
        reference: reference.into(),
        device_type: t,
        offered: offered.to_vec(),
        poll_interval_ms: 1_000,
    }
}

fn query(prefer: Prefer) -> EnergyQuery {
    EnergyQuery {
        from_ms: 10 * H,
        to_ms: 12 * H,
        interval: Interval::Hour,
        prefer,
    }
}

use Property::{
    ActivePower as P, TotalEnergyConsumed as Consumed, TotalEnergyProduced as Produced,
};

#[test]
fn counters_where_offered_and_integrated_power_elsewhere() {
    let devices = [
        device("pv", DeviceType::Inverter, &[P, Produced]),
        device("bat", DeviceType::Battery, &[P, Produced]),
        device("grid", DeviceType::Meter, &[Consumed, Produced]),
        device("odd", DeviceType::Meter, &[]),
    ];
    let chosen = choose(&devices, Prefer::Counters);
    assert_eq!(chosen[0].flows, [(Flow::Produced, Source::Counter)]);
    assert_eq!(
        chosen[1].flows,
        [
            (Flow::Discharged, Source::Counter),
            (Flow::Charged, Source::IntegratedPower)
        ]
    );
    assert_eq!(
        chosen[2].flows,
        [
            (Flow::Imported, Source::Counter),
            (Flow::Exported, Source::Counter)
        ]
    );
    assert!(chosen[3].flows.is_empty(), "nothing to read it from");
    let kinds: Vec<(usize, ReadKind, Property, i64, i64)> =
        reads(&devices, &chosen, &query(Prefer::Counters))
            .into_iter()
            .map(|r| {
                (
                    r.device,
                    r.kind,
                    r.query.property,
                    r.query.start_ms,
                    r.query.width_ms,
                )
            })
            .collect();
    assert_eq!(
        kinds,
        [
            (
                0,
                ReadKind::CounterBefore(Flow::Produced),
                Produced,
                9 * H,
                H
            ),
            (0, ReadKind::Counter(Flow::Produced), Produced, 10 * H, H),
            (
                1,
                ReadKind::CounterBefore(Flow::Discharged),
                Produced,
                9 * H,
                H
            ),
            (1, ReadKind::Counter(Flow::Discharged), Produced, 10 * H, H),
            (1, ReadKind::Power, P, 10 * H, M),
            (
                2,
                ReadKind::CounterBefore(Flow::Imported),
                Consumed,
                9 * H,
                H
            ),
            (2, ReadKind::Counter(Flow::Imported), Consumed, 10 * H, H),
            (
                2,
                ReadKind::CounterBefore(Flow::Exported),
                Produced,
                9 * H,
                H
            ),
            (2, ReadKind::Counter(Flow::Exported), Produced, 10 * H, H),
        ]
    );
    let integrated = choose(&devices, Prefer::IntegratedPower);
    assert_eq!(
        integrated[0].flows,
        [(Flow::Produced, Source::IntegratedPower)]
    );
    assert!(integrated[2].flows.is_empty(), "the meter offers no power");
}

/// A summary of readings (ts, value).
fn agg(readings: &[(i64, f64)]) -> (i64, Agg) {
    let mut a = Agg::one(readings[0].0, readings[0].1);
    for (ts, v) in &readings[1..] {
        a.add(*ts, *v);
    }
    (readings[0].0.div_euclid(H) * H, a)
}

#[test]
fn the_balance_from_counters_and_power() {
    let devices = [
        device("pv", DeviceType::Inverter, &[P, Produced]),
        device("bat", DeviceType::Battery, &[P]),
    ];
    let q = query(Prefer::Counters);
    let chosen = choose(&devices, q.prefer);
    let plan = reads(&devices, &chosen, &q);
    // PV: 1000 Wh before the range, then 1500 at 10:30 and 4000 at 11:30.
    // Battery: charging 2 kW from 10:00 for one minute, read every second.
    let charging: Vec<(i64, f64)> = (0..60).map(|s| (10 * H + s * 1_000, -2_000.0)).collect();
    let results = vec![
        vec![agg(&[(9 * H + 59 * M, 1_000.0)])],
        vec![
            agg(&[(10 * H + 30 * M, 1_500.0)]),
            agg(&[(11 * H + 30 * M, 4_000.0)]),
        ],
        vec![agg(&charging)],
    ];
    let e = assemble(&devices, chosen, &plan, &results, q);
    assert_eq!(e.buckets.len(), 2);
    let (a, b) = (&e.buckets[0], &e.buckets[1]);
    // 500 Wh from 09:59 to 10:30, all in the range but 1/31 of it; then
    // 2500 Wh over 10:30 to 11:30, half in each hour.
    let first = 500.0 * 30.0 / 31.0 + 1_250.0;
    assert!((a.flow(Flow::Produced) - first).abs() < 1e-9, "{a:?}");
    assert_eq!(b.flow(Flow::Produced), 1_250.0);
    assert!(
        (a.flow(Flow::Charged) - 2_000.0 / 60.0).abs() < 1e-9,
        "{a:?}"
    );
    assert_eq!(a.flow(Flow::Discharged), 0.0);
    assert_eq!(a.sources[Flow::Charged.index()].name(), "integratedPower");
    assert_eq!(
        a.sources[Flow::Discharged.index()].name(),
        "integratedPower"
    );
    assert_eq!(b.sources[Flow::Charged.index()].name(), "none");
    assert_eq!(a.sources[Flow::Produced.index()].name(), "counter");
    let total = e.total.expect("total");
    assert!((total.flow(Flow::Produced) - (3_000.0 - 500.0 / 31.0)).abs() < 1e-9);
}
