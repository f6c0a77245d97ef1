//! The wire shapes of steering's typed values, member by member (number types
//! included: a whole-watt setpoint is a float, a time an integer), and history
//! records stored by the first releases rendered exactly as they were stored.

use serde_json::json;

use super::*;
use crate::model::PowerUnit;
use crate::steering::decide::{Command, GridStatus};
use crate::steering::hold::LoopMode;
use crate::steering::limits::{Direction, GridLimits, LimitSource};
use crate::steering::report::State;
use crate::steering::signal::Active;
use crate::steering::sqlite::rows::decode_record;
use crate::steering::view::{GridLoopState, SignalState};

fn at<T>(value: T, id: &str) -> Entry<T> {
    Entry {
        from: 1000,
        until: 9000,
        value,
        request_id: id.into(),
    }
}

fn kw(v: f64) -> PowerValue {
    PowerValue {
        value: v,
        unit: PowerUnit::KW,
    }
}

#[test]
fn site_state_shows_every_member() {
    let state = SiteState {
        site: "ste_home".into(),
        active: Active {
            ess: Some(at(
                EssSetting::UntilSoc {
                    power: kw(-5.0),
                    until_soc: 80.0,
                },
                "req_e",
            )),
            curtailment: Some(at(CurtailmentValue::Percent(40.0), "req_c")),
            maximize_grid_import: Some(at(false, "req_m")),
            grid_limit: Some(at(
                GridLimit {
                    max_import: None,
                    max_export: Some(PowerValue::watts(0.0)),
                },
                "req_g",
            )),
        },
        until_soc_reached: true,
        scheduled: vec![
            StoredEntry {
                component: Component::MaximizeGridImport,
                entry: at(ComponentValue::MaximizeGridImport(true), "req_s"),
            },
            StoredEntry {
                component: Component::Ess,
                entry: at(ComponentValue::Ess(EssSetting::Idle), "req_i"),
            },
        ],
        devices: vec![
            DeviceState {
                device: "dvc_bat".into(),
                component: Some(Component::GridLimit),
                setpoint_w: Some(-5000.0),
                state: State::Applied,
                written_at_ms: Some(1500),
                confirmed: true,
                error: None,
            },
            DeviceState {
                device: "dvc_inv".into(),
                component: None,
                setpoint_w: None,
                state: State::Pending,
                written_at_ms: None,
                confirmed: false,
                error: Some("device not discovered yet (no answer to polls)".into()),
            },
        ],
        limits: vec![LimitNote {
            component: Component::Ess,
            requested_w: None,
            applied_w: Some(-5000.0),
            reason: "maxExport 0 W (gridLimit)".into(),
            devices: vec!["dvc_bat".into()],
        }],
        grid_loop: GridLoopState {
            grid: GridStatus {
                mode: LoopMode::HoldingExport,
                limits: GridLimits {
                    import: None,
                    export: Some(Limit {
                        w: 0.0,
                        direction: Direction::Export,
                        source: LimitSource::GridLimit,
                    }),
                },
            },
            signals: vec![SignalState {
                name: "ripple control".into(),
                inputs: Some(2),
                online: false,
                failsafe: true,
                error: Some("timeout".into()),
            }],
            sources: vec![crate::steering::sources::SourceLimit {
                source: LimitSource::Csip,
                kind: crate::steering::sources::Kind::Export,
                value: 1500.0,
                until_ms: Some(8000),
                failsafe: false,
                since_ms: 1500,
                reference: Some("8F20".into()),
            }],
            csip: Some(crate::steering::sources::SourceStatus {
                state: "following".into(),
                server: "https://utility.example:443/dcap".into(),
                identity: "854D".into(),
                last_contact_ms: Some(1900),
                error: None,
            }),
            eebus: None,
        },
        evaluated_at_ms: Some(2000),
        durable: true,
    };
    let validity = |id: &str| json!({"validFrom": 1000, "validUntil": 9000, "requestId": id});
    let with = |id: &str, key: &str, v: Value| {
        let mut e = validity(id);
        e[key] = v;
        e
    };
    let mut ess = with(
        "req_e",
        "setting",
        json!({"value": -5, "unit": "kW", "untilSoc": 80}),
    );
    ess["untilSocReached"] = json!(true);
    let mut scheduled_mgi = with("req_s", "value", json!(true));
    scheduled_mgi["component"] = json!("maximizeGridImport");
    let mut scheduled_ess = with("req_i", "setting", json!({"mode": "idle"}));
    scheduled_ess["component"] = json!("ess");
    assert_eq!(
        site_state(&state),
        json!({
            "siteReference": "ste_home",
            "durable": true,
            "energyStorageSetting": ess,
            "productionCurtailment": with("req_c", "setting", json!({"value": 40, "unit": "%"})),
            "maximizeGridImport": with("req_m", "value", json!(false)),
            "gridLimit": with("req_g", "setting", json!({"maxExport": {"value": 0, "unit": "W"}})),
            "scheduled": [scheduled_mgi, scheduled_ess],
            "devices": [
                {"deviceReference": "dvc_bat", "component": "gridLimit",
                 "setpoint": {"value": -5000, "unit": "W"}, "state": "applied",
                 "writtenAt": 1500, "confirmed": true, "error": null},
                {"deviceReference": "dvc_inv", "component": null, "setpoint": null,
                 "state": "pending", "writtenAt": null, "confirmed": false,
                 "error": "device not discovered yet (no answer to polls)"},
            ],
            "limits": [{"component": "ess", "requested": null,
                        "applied": {"value": -5000, "unit": "W"},
                        "reason": "maxExport 0 W (gridLimit)", "devices": ["dvc_bat"]}],
            "gridLoop": {
                "mode": "holdingExport",
                "maxImport": null,
                "maxExport": {"value": 0, "unit": "W", "source": "gridLimit"},
                "signals": [{"name": "ripple control", "inputs": 2, "online": false, "failsafe": true, "error": "timeout"}],
                "sources": [{"source": "csip", "kind": "maxExport", "value": {"value": 1500, "unit": "W"},
                             "until": 8000, "since": 1500, "failsafe": false, "reference": "8F20"}],
                "csip": {"state": "following", "server": "https://utility.example:443/dcap", "lfdi": "854D",
                         "lastContact": 1900, "error": null},
                "eebus": null,
            },
            "evaluatedAt": 2000,
        })
    );
    // Nothing active: every component null, no `untilSocReached`.
    let idle = SiteState {
        active: Active::default(),
        ..state
    };
    let v = site_state(&idle);
    for key in [
        "energyStorageSetting",
        "productionCurtailment",
        "maximizeGridImport",
        "gridLimit",
    ] {
        assert_eq!(v[key], Value::Null, "{key}");
    }
}

#[test]
fn answers_and_dry_runs() {
    let a = Answer {
        body: RawBody(r#"{"setting":{"value":-5,"unit":"kW"},"validUntil":9000}"#.into()),
        request_id: "req_0123456789abcdef".into(),
        operation: "POST /sites/ste_a/steering/ess".into(),
    };
    assert_eq!(
        answer(&a, true),
        json!({"setting": {"value": -5, "unit": "kW"}, "validUntil": 9000,
               "requestId": "req_0123456789abcdef", "durable": true})
    );
    assert_eq!(answer(&a, false)["durable"], json!(false));
    let allocation = [
        Allocation {
            device: "dvc_bat".into(),
            component: Component::Ess,
            setpoint_w: Some(1000.0),
            fallback: false,
        },
        Allocation {
            device: "dvc_inv".into(),
            component: Component::Curtailment,
            setpoint_w: None,
            fallback: true,
        },
    ];
    assert_eq!(
        dry_run(&allocation),
        json!({"requestId": null, "allocation": [
            {"deviceReference": "dvc_bat", "component": "ess",
             "setpoint": {"value": 1000, "unit": "W"}, "fallback": false},
            {"deviceReference": "dvc_inv", "component": "curtailment",
             "setpoint": null, "fallback": true},
        ]})
    );
}

#[test]
fn history_records_render_as_the_first_releases_stored_them() {
    // Rows as the first releases wrote them: the history record itself.
    for stored in [
        r#"{"action":"POST /sites/ste_a/steering/ess","body":{"setting":{"mode":"idle"},"validUntil":1719478800000},"requestId":"req_0123456789abcdef","source":"mqtt","time":1719475200000,"token":"partner","type":"request"}"#,
        r#"{"action":"POST /sites/ste_a/steering","body":{"energyStorageSetting":{"unit":"kW","value":-2.5},"validFrom":null,"validUntil":1.7194788e12},"requestId":"req_1","source":"http","time":1719475200000,"token":"anonymous","type":"request"}"#,
        r#"{"action":"DELETE /sites/ste_a/steering","body":{"component":null},"requestId":null,"source":"http","time":1719475200001,"token":"partner","type":"request"}"#,
        r#"{"action":"DELETE /sites/ste_a/steering","body":{"component":"gridLimit"},"requestId":null,"source":"http","time":1719475200001,"token":"partner","type":"request"}"#,
        r#"{"action":"storage power","component":"ess","confirmed":true,"deviceReference":"dvc_a","error":null,"result":"ok","setpoint":{"unit":"W","value":-5000.0},"time":9,"type":"write"}"#,
        r#"{"action":"production limit released","component":null,"confirmed":false,"deviceReference":"dvc_b","error":"refused","result":"error","setpoint":null,"time":10,"type":"write"}"#,
    ] {
        let record = decode_record("ste_a", stored).expect(stored);
        // Numbers in today's one style: whole watts without a fraction.
        let expected = stored.replace("\"value\":-5000.0", "\"value\":-5000");
        assert_eq!(
            history_record(&record),
            serde_json::from_str::<Value>(&expected).unwrap(),
            "{stored}"
        );
    }
    // A write record shows whole watts.
    let e = AuditEvent {
        site: "ste_a".into(),
        at_ms: 3,
        kind: AuditKind::Write {
            device: "dvc_a".into(),
            component: Some(Component::Curtailment),
            command: Command::ProductionLimit(1234.6),
            error: None,
            confirmed: true,
        },
    };
    assert_eq!(
        history_record(&e)["setpoint"],
        json!({"value": 1235, "unit": "W"})
    );
}
