use serde_json::json;

use super::*;
use crate::api::ErrorCode;
use crate::model::DeviceId;

fn parse(v: Value) -> Result<RpcRequest, RpcRejection> {
    parse_rpc_request(v.to_string().as_bytes())
}

fn rejected(v: Value) -> (Option<String>, ErrorCode, Option<String>) {
    let r = parse(v).expect_err("should be rejected");
    (r.id, r.error.code(), r.error.field().map(str::to_string))
}

#[test]
fn status_bodies() {
    let v: Value = serde_json::from_slice(&status_online("0.1.0", 1_719_474_475_595)).unwrap();
    assert_eq!(
        v,
        json!({"online": true, "version": "0.1.0", "startedAt": 1_719_474_475_595i64})
    );
    let v: Value = serde_json::from_slice(&status_offline()).unwrap();
    assert_eq!(v, json!({"online": false}));
}

#[test]
fn measurement_batch_has_the_list_shape_and_seq() {
    let s = |property, ts_ms, value| Sample {
        device: DeviceId(0),
        property,
        ts_ms,
        value,
    };
    let body = measurements(
        "dvc_bat1",
        &[
            s(Property::Soc, 1000, 65.0),
            s(Property::ActivePower, 1000, -1234.5),
        ],
        7,
    );
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v,
        json!({"reference": "dvc_bat1", "measurements": [
            {"timestamp": 1000, "property": "soc", "value": 65, "unit": "%"},
            {"timestamp": 1000, "property": "activePower", "value": -1234.5, "unit": "W"}
        ], "seq": 7})
    );
    // Key order as in the contract.
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.starts_with(r#"{"reference":"dvc_bat1","measurements":["#),
        "{text}"
    );
    assert!(text.ends_with(r#""seq":7}"#), "{text}");
}

#[test]
fn a_full_request_parses() {
    let r = parse(
        json!({"id": "r-1", "method": "POST", "path": "/sites/s/steering?dryRun=true",
        "body": {"validUntil": 1}, "token": "sg_x"}),
    )
    .unwrap();
    assert_eq!(r.id, "r-1");
    assert_eq!(r.method, RpcMethod::Post);
    assert_eq!(r.path, "/sites/s/steering?dryRun=true");
    assert_eq!(r.body, Some(json!({"validUntil": 1})));
    assert_eq!(r.token.as_deref(), Some("sg_x"));

    let r = parse(json!({"id": "r-2", "method": "GET", "path": "/devices", "body": null})).unwrap();
    assert_eq!((r.method, r.body, r.token), (RpcMethod::Get, None, None));
}

#[test]
fn bad_requests_name_the_field() {
    assert_eq!(
        rejected(json!({"method": "GET", "path": "/devices"})),
        (None, ErrorCode::MissingField, Some("id".into()))
    );
    assert_eq!(
        rejected(json!({"id": "a/b", "method": "GET", "path": "/devices"})),
        (None, ErrorCode::InvalidValue, Some("id".into()))
    );
    assert_eq!(
        rejected(json!({"id": 5, "method": "GET", "path": "/devices"})).1,
        ErrorCode::InvalidValue
    );
    let id = Some("x".to_string());
    assert_eq!(
        rejected(json!({"id": "x", "method": "PUT", "path": "/devices"})),
        (id.clone(), ErrorCode::InvalidValue, Some("method".into()))
    );
    assert_eq!(
        rejected(json!({"id": "x", "method": "GET"})),
        (id.clone(), ErrorCode::MissingField, Some("path".into()))
    );
    assert_eq!(
        rejected(json!({"id": "x", "method": "GET", "path": "devices"})),
        (id.clone(), ErrorCode::InvalidValue, Some("path".into()))
    );
    assert_eq!(
        rejected(json!({"id": "x", "method": "GET", "path": "/d", "extra": 1})),
        (id.clone(), ErrorCode::UnknownField, Some("extra".into()))
    );
    assert_eq!(
        rejected(json!({"id": "x", "method": "GET", "path": "/d", "token": 5})),
        (id, ErrorCode::InvalidValue, Some("token".into()))
    );
    let r = parse_rpc_request(b"not json").unwrap_err();
    assert_eq!((r.id, r.error.code()), (None, ErrorCode::InvalidJson));
    let r = parse_rpc_request(b"[1]").unwrap_err();
    assert_eq!(r.error.code(), ErrorCode::InvalidJson);
}

#[test]
fn response_shape() {
    let v: Value = serde_json::from_slice(&rpc_response(Some("r"), 200, &json!([1]))).unwrap();
    assert_eq!(v, json!({"id": "r", "status": 200, "body": [1]}));
    let v: Value = serde_json::from_slice(&rpc_response(None, 400, &json!({}))).unwrap();
    assert_eq!(v, json!({"id": null, "status": 400, "body": {}}));
}

#[test]
fn the_id_of_an_unparsed_request() {
    let big = json!({"method": "POST", "body": {"x": "y".repeat(100_000)}, "id": "big-1"});
    assert_eq!(rpc_id(big.to_string().as_bytes()).as_deref(), Some("big-1"));
    for (raw, why) in [
        (
            r#"{"id": "a/b", "method": "GET"}"#,
            "an id that cannot be a topic level",
        ),
        (r#"{"id": 7}"#, "not a string"),
        (r#"{"method": "GET"}"#, "no id"),
        (r#"{"id": "x", "body": "#, "cut off"),
        ("[1, 2]", "not an object"),
    ] {
        assert_eq!(rpc_id(raw.as_bytes()), None, "{why}");
    }
}
