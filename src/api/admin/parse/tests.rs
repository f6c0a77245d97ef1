//! The operation request's parsing: defaults, every refusal naming its
//! field, and every request the document's schema allows accepted.

use super::*;
use serde_json::json;

fn check(body: Value) -> Result<(OpId, OpRequest), (String, Option<String>)> {
    operation(&body, &HeaderMap::new())
        .map_err(|e| (e.code().as_str().to_string(), e.field().map(str::to_string)))
}

#[test]
fn requests_resolve_their_defaults() {
    let (id, r) = check(json!({"id": "op-1", "kind": "logs"})).expect("ok");
    assert_eq!(id.as_str(), "op-1");
    assert_eq!(
        r,
        OpRequest::Logs {
            lines: LOG_LINES_DEFAULT,
            level: Level::INFO,
            max_bytes: LOG_BYTES_DEFAULT
        }
    );
    let (_, r) = check(json!({"id": "s", "kind": "scan", "args": {"bus": "pv", "units": "1-3"}}))
        .expect("ok");
    assert_eq!(
        r,
        OpRequest::Scan {
            bus: "pv".into(),
            units: "1-3".into(),
            timeout_ms: SCAN_TIMEOUT_MS_DEFAULT,
            site: None
        }
    );
    let mut headers = HeaderMap::new();
    headers.insert("idempotency-key", "from-header".parse().expect("value"));
    let (id, _) = operation(&json!({"kind": "bundle"}), &headers).expect("ok");
    assert_eq!(id.as_str(), "from-header");
}

#[test]
fn a_toml_merge_patch_is_a_patch() {
    let (_, r) = check(json!({"id": "p", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = 30\n", "allowLessSafe": true}}))
        .expect("ok");
    let (_, j) = check(json!({"id": "p", "kind": "config.put", "args": {"patch": {"ops": {"rollback_after_s": 30}}, "allowLessSafe": true}}))
        .expect("ok");
    assert_eq!(r, j);
    let e = operation(
        &json!({"id": "p", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = 3 0\n"}}),
        &HeaderMap::new(),
    )
    .expect_err("bad TOML");
    let detail = e.detail().to_string();
    assert!(
        detail.starts_with(
            "args.patchToml is not valid TOML at line 2, column 20 (\"rollback_after_s = 3 0\"): "
        ),
        "{detail}"
    );
    assert!(detail.contains("rollback_after_s = 3 0"), "{detail}");
    let e = operation(
        &json!({"id": "p", "kind": "config.put", "args": {"toml": "", "patchToml": ""}}),
        &HeaderMap::new(),
    )
    .expect_err("two");
    assert!(
        e.detail().ends_with("not args.toml and args.patchToml"),
        "{}",
        e.detail()
    );
}

#[test]
fn every_bad_field_is_named() {
    let cases = [
        (json!({"kind": "logs"}), "missing_field", "id"),
        (json!({"id": "a/b", "kind": "logs"}), "invalid_value", "id"),
        (json!({"id": "a"}), "missing_field", "kind"),
        (
            json!({"id": "a", "kind": "reboot"}),
            "invalid_value",
            "kind",
        ),
        (
            json!({"id": "a", "kind": "logs", "x": 1}),
            "unknown_field",
            "x",
        ),
        (
            json!({"id": "a", "kind": "logs", "args": {"lines": 0}}),
            "invalid_value",
            "args.lines",
        ),
        (
            json!({"id": "a", "kind": "logs", "args": {"lines": 1001}}),
            "invalid_value",
            "args.lines",
        ),
        (
            json!({"id": "a", "kind": "logs", "args": {"level": "loud"}}),
            "invalid_value",
            "args.level",
        ),
        (
            json!({"id": "a", "kind": "logs", "args": {"maxBytes": 300000}}),
            "invalid_value",
            "args.maxBytes",
        ),
        (
            json!({"id": "a", "kind": "restart", "args": {"now": true}}),
            "unknown_field",
            "args.now",
        ),
        (
            json!({"id": "a", "kind": "scan"}),
            "missing_field",
            "args.bus",
        ),
        (
            json!({"id": "a", "kind": "scan", "args": {"bus": 3}}),
            "invalid_value",
            "args.bus",
        ),
        (
            json!({"id": "a", "kind": "config.put"}),
            "missing_field",
            "args.toml",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"toml": 1}}),
            "invalid_value",
            "args.toml",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"patch": "x"}}),
            "invalid_value",
            "args.patch",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"patch": {}, "toml": ""}}),
            "invalid_value",
            "args.patch",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"patch": {"a": [null]}}}),
            "invalid_value",
            "args.patch.a[0]",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"patchToml": "[ops]\nx = ", "patch": {}}}),
            "invalid_value",
            "args.patchToml",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"patchToml": {"ops": {}}}}),
            "invalid_value",
            "args.patchToml",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = "}}),
            "invalid_value",
            "args.patchToml",
        ),
        (
            json!({"id": "a", "kind": "config.put", "args": {"toml": "", "allowLessSafe": "yes"}}),
            "invalid_value",
            "args.allowLessSafe",
        ),
        (
            json!({"id": "a", "kind": "config.history", "args": {"limit": 201}}),
            "invalid_value",
            "args.limit",
        ),
        (
            json!({"id": "a", "kind": "config.get", "args": {"x": 1}}),
            "unknown_field",
            "args.x",
        ),
    ];
    for (body, code, field) in cases {
        let (c, f) = check(body.clone()).expect_err(&body.to_string());
        assert_eq!((c.as_str(), f.as_deref()), (code, Some(field)), "{body}");
    }
}

/// Whole numbers written as floats are integers, as JSON Schema counts them.
#[test]
fn whole_floats_are_counts() {
    let (_, r) =
        check(json!({"id": "f", "kind": "logs", "args": {"lines": 5.0, "maxBytes": 1024.0}}))
            .expect("ok");
    assert_eq!(
        r,
        OpRequest::Logs {
            lines: 5,
            level: Level::INFO,
            max_bytes: 1024
        }
    );
    for bad in [json!(5.5), json!(0.0), json!(1001.0), json!(-1.0)] {
        let body = json!({"id": "f", "kind": "logs", "args": {"lines": bad}});
        assert_eq!(
            check(body.clone()).expect_err(&body.to_string()),
            ("invalid_value".to_string(), Some("args.lines".to_string()))
        );
    }
}

/// `.` and `..` are dot segments: an operation with such an id could not be
/// read at `/admin/operations/{id}`. Neither the body nor the header may
/// give one.
#[test]
fn dot_segments_are_not_ids() {
    for id in [".", ".."] {
        assert_eq!(
            check(json!({"id": id, "kind": "logs"})).expect_err(id),
            ("invalid_value".to_string(), Some("id".to_string()))
        );
        let mut headers = HeaderMap::new();
        headers.insert("idempotency-key", id.parse().expect("value"));
        let e = operation(&json!({"kind": "logs"}), &headers).expect_err(id);
        assert_eq!(e.field(), Some("id"));
    }
    for id in ["...", ".a", "a.", "~:-_.", &"x".repeat(128)] {
        assert!(check(json!({"id": id, "kind": "bundle"})).is_ok(), "{id}");
    }
}

/// A bus, site or units of blanks only is passed on as it is, for the
/// operations layer to name as one the config does not have; an empty one
/// is refused here, as the schema's `minLength` says.
#[test]
fn blank_scan_arguments_reach_the_config_check() {
    let (_, r) = check(
        json!({"id": "s", "kind": "scan", "args": {"bus": "  ", "site": " ", "units": " 1-2 "}}),
    )
    .expect("ok");
    assert_eq!(
        r,
        OpRequest::Scan {
            bus: "  ".into(),
            units: "1-2".into(),
            timeout_ms: SCAN_TIMEOUT_MS_DEFAULT,
            site: Some(" ".into())
        }
    );
    for field in ["bus", "site", "units"] {
        let mut args = json!({"bus": "pv"});
        args[field] = json!("");
        assert_eq!(
            check(json!({"id": "s", "kind": "scan", "args": args})).expect_err(field),
            ("invalid_value".to_string(), Some(format!("args.{field}")))
        );
    }
}

/// Every kind's branch of `OperationRequest` in `openapi.json` names the
/// kind, closes `args` to exactly the members this parser takes for it,
/// requires `args` where the kind needs one, and states the same maxima.
#[test]
fn the_document_describes_each_kind_as_parsed() {
    let doc: Value = serde_json::from_str(crate::api::OPENAPI_DOCUMENT).expect("JSON");
    let schemas = &doc["components"]["schemas"];
    let request = &schemas["OperationRequest"];
    let mapping = request["discriminator"]["mapping"]
        .as_object()
        .expect("a discriminator mapping");
    assert_eq!(request["discriminator"]["propertyName"], "kind");
    assert_eq!(mapping.len(), OpKind::ALL.len());
    for kind in OpKind::ALL {
        let reference = mapping[kind.as_str()]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no mapping", kind.as_str()));
        let name = reference.trim_start_matches("#/components/schemas/");
        let branch = &schemas[name];
        assert!(
            request["oneOf"]
                .as_array()
                .is_some_and(|b| b.contains(&json!({"$ref": reference}))),
            "{name} is not a branch"
        );
        assert_eq!(branch["properties"]["kind"]["const"], kind.as_str());
        assert_eq!(branch["additionalProperties"], false, "{name}");
        let mut args = &branch["properties"]["args"];
        if let Some(r) = args["$ref"].as_str() {
            args = &schemas[r.trim_start_matches("#/components/schemas/")];
        }
        assert_eq!(args["additionalProperties"], false, "{name}");
        let mut documented: Vec<&str> = args["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut parsed = allowed_args(kind).to_vec();
        documented.sort_unstable();
        parsed.sort_unstable();
        assert_eq!(documented, parsed, "{name}");
        let needs_args = matches!(kind, OpKind::Scan | OpKind::ConfigPut);
        let required = branch["required"].as_array().expect("required");
        assert_eq!(required.contains(&json!("args")), needs_args, "{name}");
        assert_eq!(
            args["type"] == json!(["object", "null"]),
            !needs_args,
            "{name}"
        );
        for (arg, max) in [
            ("lines", LOG_LINES_MAX),
            ("maxBytes", LOG_BYTES_MAX),
            ("limit", CONFIG_HISTORY_MAX),
            ("timeoutMs", SCAN_TIMEOUT_MS_MAX),
        ] {
            if let Some(p) = args["properties"].get(arg) {
                assert_eq!(p["maximum"], json!(max), "{name}.{arg}");
                assert_eq!(p["minimum"], json!(1), "{name}.{arg}");
            }
        }
    }
}
