//! Round trips, and rows as the first releases wrote them (keys sorted, the
//! then API's shapes) still read.

use super::*;

fn kw(v: f64) -> PowerValue {
    PowerValue {
        value: v,
        unit: PowerUnit::KW,
    }
}

#[test]
fn values_round_trip() {
    for v in [
        ComponentValue::Ess(EssSetting::Power(kw(-2.5))),
        ComponentValue::Ess(EssSetting::UntilSoc {
            power: kw(-2.5),
            until_soc: 80.0,
        }),
        ComponentValue::Ess(EssSetting::Idle),
        ComponentValue::Curtailment(CurtailmentValue::Percent(40.0)),
        ComponentValue::Curtailment(CurtailmentValue::Power(PowerValue::watts(3.0))),
        ComponentValue::MaximizeGridImport(true),
        ComponentValue::GridLimit(GridLimit {
            max_import: None,
            max_export: Some(PowerValue::watts(0.0)),
        }),
        ComponentValue::GridLimit(GridLimit {
            max_import: Some(kw(60.0)),
            max_export: Some(kw(40.0)),
        }),
    ] {
        let stored = encode_value(&v);
        assert_eq!(
            decode_value(v.component(), &stored),
            Some(v.clone()),
            "{stored}"
        );
    }
}

#[test]
fn values_of_the_first_releases_read() {
    let cases = [
        (
            Component::Ess,
            r#"{"unit":"kW","value":-2.5}"#,
            ComponentValue::Ess(EssSetting::Power(kw(-2.5))),
        ),
        (
            Component::Ess,
            r#"{"unit":"kW","untilSoc":80.0,"value":-2.5}"#,
            ComponentValue::Ess(EssSetting::UntilSoc {
                power: kw(-2.5),
                until_soc: 80.0,
            }),
        ),
        (
            Component::Ess,
            r#"{"mode":"idle"}"#,
            ComponentValue::Ess(EssSetting::Idle),
        ),
        (
            Component::Curtailment,
            r#"{"unit":"%","value":40.0}"#,
            ComponentValue::Curtailment(CurtailmentValue::Percent(40.0)),
        ),
        (
            Component::Curtailment,
            r#"{"unit":"W","value":300000}"#,
            ComponentValue::Curtailment(CurtailmentValue::Power(PowerValue::watts(300_000.0))),
        ),
        (
            Component::MaximizeGridImport,
            "false",
            ComponentValue::MaximizeGridImport(false),
        ),
        (
            Component::GridLimit,
            r#"{"maxExport":{"unit":"W","value":0.0}}"#,
            ComponentValue::GridLimit(GridLimit {
                max_import: None,
                max_export: Some(PowerValue::watts(0.0)),
            }),
        ),
    ];
    for (component, stored, want) in cases {
        assert_eq!(decode_value(component, stored), Some(want), "{stored}");
    }
    for (component, stored) in [
        (Component::Ess, "true"),
        (Component::Ess, r#"{"unit":"%","value":40.0}"#),
        (Component::Ess, r#"{"mode":"busy"}"#),
        (
            Component::Curtailment,
            r#"{"unit":"kW","untilSoc":80.0,"value":1}"#,
        ),
        (Component::MaximizeGridImport, r#"{"mode":"idle"}"#),
        (
            Component::GridLimit,
            r#"{"maxExport":{"unit":"%","value":1}}"#,
        ),
        (Component::GridLimit, "not json"),
    ] {
        assert_eq!(decode_value(component, stored), None, "{stored}");
    }
}

fn request(body: RequestBody, action: &str) -> AuditEvent {
    AuditEvent {
        site: "ste_a".into(),
        at_ms: 1_719_475_200_000,
        kind: AuditKind::Request {
            source: "mqtt".into(),
            token: "partner".into(),
            action: action.into(),
            body,
            request_id: Some("req_0123456789abcdef".into()),
        },
    }
}

#[test]
fn records_round_trip() {
    let write = |command, error: Option<&str>| AuditEvent {
        site: "ste_a".into(),
        at_ms: 7,
        kind: AuditKind::Write {
            device: "dvc_a".into(),
            component: Some(Component::GridLimit),
            command,
            error: error.map(str::to_string),
            confirmed: error.is_none(),
        },
    };
    for e in [
        request(
            RequestBody::Posted(RawBody(
                r#"{"setting":{"mode":"idle"},"validUntil":5}"#.into(),
            )),
            "POST /sites/ste_a/steering/ess",
        ),
        request(RequestBody::Ended(None), "DELETE /sites/ste_a/steering"),
        request(
            RequestBody::Ended(Some(Component::Curtailment)),
            "DELETE /sites/ste_a/steering",
        ),
        write(Command::EssPower(-5000.0), None),
        write(
            Command::EssRelease,
            Some("read-back of register 3 shows 0 instead of 1"),
        ),
        write(Command::ProductionLimit(12_000.0), None),
        write(Command::ProductionRelease, None),
        AuditEvent {
            site: "ste_a".into(),
            at_ms: 8,
            kind: AuditKind::ModbusLimit {
                client: "192.168.1.20:50123".into(),
                unit_id: 200,
                register: Some(40155),
                max_export_w: Some(20_000.0),
                reason: LimitReason::Set,
            },
        },
        AuditEvent {
            site: "ste_a".into(),
            at_ms: 9,
            kind: AuditKind::ModbusLimit {
                client: "[::1]:50123".into(),
                unit_id: 200,
                register: None,
                max_export_w: None,
                reason: LimitReason::HeartbeatEnded,
            },
        },
        AuditEvent {
            site: "ste_a".into(),
            at_ms: 10,
            kind: AuditKind::ForwardedWrite {
                client: "127.0.0.1:40000".into(),
                device: "dvc_a".into(),
                register: 40004,
                values: vec![0x4142, 7],
                result: ForwardResult::Failed,
                exception: Some(2),
            },
        },
    ] {
        let stored = encode_record(&e);
        assert_eq!(decode_record("ste_a", &stored), Some(e.clone()), "{stored}");
    }
    // A write record keeps whole watts, as the history shows them.
    let stored = encode_record(&write(Command::EssPower(1234.4), None));
    assert!(matches!(
        decode_record("ste_a", &stored).map(|e| e.kind),
        Some(AuditKind::Write { command: Command::EssPower(w), .. }) if w == 1234.0
    ));
}

#[test]
fn records_of_the_first_releases_read() {
    let posted = r#"{"action":"POST /sites/ste_a/steering/ess","body":{"setting":{"mode":"idle"},"validUntil":1719478800000},"requestId":"req_0123456789abcdef","source":"mqtt","time":1719475200000,"token":"partner","type":"request"}"#;
    assert_eq!(
        decode_record("ste_a", posted),
        Some(request(
            RequestBody::Posted(RawBody(
                r#"{"setting":{"mode":"idle"},"validUntil":1719478800000}"#.into()
            )),
            "POST /sites/ste_a/steering/ess",
        ))
    );
    let ended = r#"{"action":"DELETE /sites/ste_a/steering","body":{"component":"ess"},"requestId":"req_0123456789abcdef","source":"mqtt","time":1719475200000,"token":"partner","type":"request"}"#;
    assert_eq!(
        decode_record("ste_a", ended),
        Some(request(
            RequestBody::Ended(Some(Component::Ess)),
            "DELETE /sites/ste_a/steering",
        ))
    );
    let write = r#"{"action":"production limit","component":"curtailment","confirmed":false,"deviceReference":"dvc_a","error":"refused","result":"error","setpoint":{"unit":"W","value":150000.0},"time":9,"type":"write"}"#;
    assert_eq!(
        decode_record("ste_a", write),
        Some(AuditEvent {
            site: "ste_a".into(),
            at_ms: 9,
            kind: AuditKind::Write {
                device: "dvc_a".into(),
                component: Some(Component::Curtailment),
                command: Command::ProductionLimit(150_000.0),
                error: Some("refused".into()),
                confirmed: false,
            },
        })
    );
    // A power without its setpoint is no record.
    let broken = r#"{"action":"storage power","component":"ess","confirmed":true,"deviceReference":"dvc_a","error":null,"result":"ok","setpoint":null,"time":9,"type":"write"}"#;
    assert_eq!(decode_record("ste_a", broken), None);
}

#[test]
fn answers_round_trip_and_read_as_first_written() {
    let a = Answer {
        body: RawBody(r#"{"setting":{"value":-5,"unit":"kW"},"validUntil":1719478800000}"#.into()),
        request_id: "req_0123456789abcdef".into(),
        operation: "POST /sites/ste_a/steering/ess".into(),
    };
    let stored = encode_answer(&a);
    let back = decode_answer(&stored).unwrap();
    assert_eq!(back.request_id, a.request_id);
    assert_eq!(back.operation, a.operation);
    let parsed = |t: &str| serde_json::from_str::<Value>(t).unwrap();
    assert_eq!(parsed(&back.body.0), parsed(&a.body.0));
    let first = r#"{"requestId":"req_1","setting":{"mode":"idle"},"validUntil":5}"#;
    assert_eq!(
        decode_answer(first),
        Some(Answer {
            body: RawBody(r#"{"setting":{"mode":"idle"},"validUntil":5}"#.into()),
            request_id: "req_1".into(),
            operation: String::new(),
        })
    );
    assert_eq!(decode_answer(r#"{"setting":{"mode":"idle"}}"#), None);
}
