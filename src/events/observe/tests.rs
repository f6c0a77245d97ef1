use super::*;

fn device(reference: &str, online: Option<bool>) -> DeviceObserved {
    DeviceObserved {
        reference: reference.into(),
        online,
        error: (online == Some(false)).then(|| "timeout after 500 ms".to_string()),
    }
}

fn kinds(events: &[Event]) -> Vec<Kind> {
    events.iter().map(|e| e.kind).collect()
}

#[test]
fn a_device_that_stops_answering_and_comes_back() {
    let up = Observed {
        devices: vec![device("dvc_pv", Some(true))],
        ..Observed::default()
    };
    let down = Observed {
        devices: vec![device("dvc_pv", Some(false))],
        ..Observed::default()
    };
    let e = changes(&up, &down, 5);
    assert_eq!(kinds(&e), [Kind::DeviceOffline]);
    assert_eq!(e[0].subject, Subject::Device("dvc_pv".into()));
    assert_eq!(e[0].detail, "timeout after 500 ms");
    assert_eq!(e[0].at_ms, 5);
    assert_eq!(kinds(&changes(&down, &up, 6)), [Kind::DeviceOnline]);
    assert!(
        changes(&down, &down, 7).is_empty(),
        "no repeat while offline"
    );
}

#[test]
fn a_device_is_reported_only_once_tried_and_not_for_answering_at_start() {
    let start = Observed {
        devices: vec![device("a", None), device("b", None)],
        ..Observed::default()
    };
    let first = Observed {
        devices: vec![device("a", Some(true)), device("b", Some(false))],
        ..Observed::default()
    };
    let e = changes(&start, &first, 1);
    assert_eq!(kinds(&e), [Kind::DeviceOffline]);
    assert_eq!(e[0].subject, Subject::Device("b".into()));
}

fn site(signals: Vec<SignalObserved>, limits: Vec<LimitObserved>, meter_lost: bool) -> Observed {
    Observed {
        sites: vec![SiteObserved {
            reference: "ste".into(),
            meter_lost,
            signals,
            limits,
        }],
        ..Observed::default()
    }
}

fn ess(request: &str, until_ms: i64) -> SignalObserved {
    SignalObserved {
        component: "energyStorageSetting",
        request_id: request.into(),
        until_ms,
    }
}

#[test]
fn a_signal_that_runs_out_expired_one_replaced_ended() {
    let idle = site(vec![], vec![], false);
    let on = site(vec![ess("r1", 100)], vec![], false);
    assert_eq!(kinds(&changes(&idle, &on, 10)), [Kind::SignalStarted]);
    let e = changes(&on, &idle, 100);
    assert_eq!(kinds(&e), [Kind::SignalExpired]);
    assert!(e[0].detail.contains("request r1"), "{}", e[0].detail);
    assert_eq!(kinds(&changes(&on, &idle, 99)), [Kind::SignalEnded]);
    let replaced = site(vec![ess("r2", 200)], vec![], false);
    assert_eq!(
        kinds(&changes(&on, &replaced, 50)),
        [Kind::SignalStarted, Kind::SignalEnded]
    );
}

#[test]
fn the_meter_and_the_operators_limits() {
    let lim = |value: f64, failsafe: bool| LimitObserved {
        key: "eebus consumption".into(),
        value,
        failsafe,
        reference: None,
    };
    let none = site(vec![], vec![], false);
    let limited = site(vec![], vec![lim(3000.0, false)], false);
    let failsafe = site(vec![], vec![lim(4200.0, true)], true);
    assert_eq!(kinds(&changes(&none, &limited, 1)), [Kind::LimitBegan]);
    assert_eq!(
        kinds(&changes(&limited, &failsafe, 2)),
        [Kind::MeterLost, Kind::FailsafeEntered]
    );
    assert_eq!(
        kinds(&changes(&failsafe, &none, 3)),
        [Kind::MeterBack, Kind::FailsafeLeft]
    );
    assert_eq!(kinds(&changes(&limited, &none, 4)), [Kind::LimitEnded]);
    let lower = site(vec![], vec![lim(2000.0, false)], false);
    assert_eq!(kinds(&changes(&limited, &lower, 5)), [Kind::LimitBegan]);
}

#[test]
fn the_store_and_the_clock() {
    let ok = Observed::default();
    let failing = Observed {
        store_problem: Some("disk full".into()),
        clock_step: Some(crate::clock::Step {
            size_ms: -3_600_000,
            at_ms: 1_717_200_000_000,
        }),
        ..Observed::default()
    };
    let e = changes(&ok, &failing, 1);
    assert_eq!(kinds(&e), [Kind::StoreFailing, Kind::ClockStepped]);
    assert_eq!(e[0].detail, "disk full");
    assert_eq!(e[1].detail, "3600000 ms backward, at 2024-06-01T00:00:00Z");
    let recovered = Observed {
        clock_step: failing.clock_step,
        ..Observed::default()
    };
    assert_eq!(
        kinds(&changes(&failing, &recovered, 2)),
        [Kind::StoreRecovered]
    );
}
