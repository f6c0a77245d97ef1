//! `GET /openapi.json` is kept true: the document is OpenAPI 3.1 whose every
//! `$ref` resolves, it lists exactly the routes the router registers with the
//! scopes they need, its error codes are the agent's, every example validates
//! against its schema, and real answers of an agent on the simulated site
//! validate against the schema documented for their status.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::openapi_support::answers::{self, READ, STEER, STEER_ONLY};
use crate::openapi_support::client::Checker;
use crate::openapi_support::{
    deref, document, each_with_schema, operation, operations, refs, Validator,
};
use crate::steering_support::TestSite;
use serde_json::{json, Value};
use sitegate::api::{routes, Access, ErrorCode, OPENAPI_DOCUMENT};
use sitegate::model::Property;

#[test]
fn the_document_is_openapi_3_1_and_every_ref_resolves() {
    let doc = document();
    let version = doc["openapi"].as_str().unwrap_or_default();
    assert!(version.starts_with("3.1."), "openapi: {version:?}");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    let mut found = Vec::new();
    refs(&doc, "#", &mut found);
    assert!(found.len() > 100, "only {} references", found.len());
    let v = Validator::new(&doc);
    let dangling: Vec<String> = found
        .iter()
        .filter_map(|(at, r)| v.resolve(r).err().map(|e| format!("{at}: {e}")))
        .collect();
    assert!(dangling.is_empty(), "{dangling:#?}");
    let mut ids = BTreeSet::new();
    for op in operations(&doc) {
        let id = op.op["operationId"].as_str().unwrap_or_default();
        assert!(
            ids.insert(id),
            "{} {}: operationId {id:?} missing or repeated",
            op.method,
            op.path
        );
        assert!(op.op["responses"]
            .as_object()
            .is_some_and(|r| !r.is_empty()));
    }
}

#[test]
fn every_schema_uses_only_keywords_the_tests_check() {
    let doc = document();
    let v = Validator::new(&doc);
    let mut problems = Vec::new();
    for (name, _) in doc["components"]["schemas"].as_object().expect("schemas") {
        problems.extend(v.unsupported(&json!({"$ref": format!("#/components/schemas/{name}")})));
    }
    each_with_schema(&doc, &mut |at, holder| {
        problems.extend(
            v.unsupported(&holder["schema"])
                .into_iter()
                .map(|p| format!("{at}: {p}")),
        )
    });
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The page's routes (`GET /` and `/page/{file}`) are not part of the partner
/// API and are left out of the document; every other route is in it.
#[test]
fn document_and_router_list_the_same_routes() {
    let doc = document();
    let routes = routes();
    let documented: BTreeSet<(String, String)> = operations(&doc)
        .iter()
        .map(|o| (o.method.clone(), o.path.to_string()))
        .collect();
    let routed: BTreeSet<(String, String)> = routes
        .iter()
        .filter(|r| r.access != Access::Page)
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    let mut problems: Vec<String> = Vec::new();
    for (m, p) in routed.difference(&documented) {
        problems.push(format!("{m} {p} is routed but not documented"));
    }
    for (m, p) in documented.difference(&routed) {
        problems.push(format!("{m} {p} is documented but not routed"));
    }
    for r in &routes {
        let op = operation(&doc, r.method.as_str(), r.path);
        match (r.access, op) {
            (Access::Page, Some(_)) => problems.push(format!(
                "{} {} is a page route but documented",
                r.method, r.path
            )),
            (_, None) => {}
            (Access::Open, Some(op)) if op["security"] != json!([]) => problems.push(format!(
                "{} {} needs no token but documents security {}",
                r.method, r.path, op["security"]
            )),
            (Access::Token(scope), Some(op))
                if op["security"] != json!([{"bearer": [scope.as_str()]}]) =>
            {
                problems.push(format!(
                    "{} {} needs scope {} but documents security {}",
                    r.method,
                    r.path,
                    scope.as_str(),
                    op["security"]
                ))
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_error_code_enum_is_every_code_of_the_agent() {
    let doc = document();
    let documented: BTreeSet<&str> = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let ours: BTreeSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(documented, ours);
    assert!(ours.contains("timeout"));
}

#[test]
fn vocabulary_enums_are_the_models() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let names: Vec<&str> = Property::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(
        schemas["PropertyName"]["enum"],
        json!(names),
        "in vocabulary order"
    );
    let units: BTreeSet<&str> = Property::ALL.iter().map(|p| p.unit().as_str()).collect();
    let documented: BTreeSet<&str> = schemas["Unit"]["enum"]
        .as_array()
        .expect("Unit enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(documented, units);
}

/// Every error response is problem+json whose `status` is the HTTP status and
/// whose `code` can only be codes of that status; successes are not problems.
#[test]
fn problem_responses_carry_codes_of_their_status() {
    let doc = document();
    let mut problems = Vec::new();
    for op in operations(&doc) {
        for (status, response) in op.op["responses"].as_object().expect("responses") {
            let at = format!("{} {} {status}", op.method, op.path);
            let status: u16 = status
                .parse()
                .unwrap_or_else(|_| panic!("{at}: not a status"));
            let content = deref(&doc, response)["content"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let types: Vec<&String> = content.keys().collect();
            if status < 400 {
                if content.contains_key("application/problem+json") {
                    problems.push(format!("{at}: a success documented as a problem"));
                }
                continue;
            }
            if types != ["application/problem+json"] {
                problems.push(format!(
                    "{at}: content {types:?}, not only application/problem+json"
                ));
                continue;
            }
            let schema = &content["application/problem+json"]["schema"];
            let parts = schema["allOf"].as_array().cloned().unwrap_or_default();
            let pinned = parts
                .iter()
                .find(|p| p["properties"]["code"]["enum"].is_array());
            let Some(pinned) = pinned else {
                problems.push(format!("{at}: the codes of this status are not listed"));
                continue;
            };
            if pinned["properties"]["status"]["const"] != status {
                problems.push(format!("{at}: status is not pinned to {status}"));
            }
            for code in pinned["properties"]["code"]["enum"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let name = code.as_str().unwrap_or_default();
                match ErrorCode::ALL.iter().find(|c| c.as_str() == name) {
                    Some(c) if c.default_status().as_u16() == status => {}
                    Some(c) => problems.push(format!(
                        "{at}: {name} answers {}",
                        c.default_status().as_u16()
                    )),
                    None => problems.push(format!("{at}: {name} is not a code")),
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_example_validates_against_its_schema() {
    let doc = document();
    let v = Validator::new(&doc);
    let mut problems = Vec::new();
    let mut checked = 0;
    each_with_schema(&doc, &mut |at, holder| {
        let mut examples: Vec<(String, &Value)> = Vec::new();
        if let Some(e) = holder.get("example") {
            examples.push((at.to_string(), e));
        }
        for (name, e) in holder
            .get("examples")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            examples.push((format!("{at}/examples/{name}"), &deref(&doc, e)["value"]));
        }
        for (where_, example) in examples {
            checked += 1;
            let errors = v.errors(&holder["schema"], example);
            if !errors.is_empty() {
                problems.push(format!("{where_}: {}", errors.join("; ")));
            }
        }
    });
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(checked > 40, "only {checked} examples");
}

/// Each response with a body shows one (as `example` or `examples`), and so
/// does each request body.
#[test]
fn every_body_has_an_example() {
    let doc = document();
    let mut missing = Vec::new();
    for op in operations(&doc) {
        let mut bodies: Vec<(String, &Value)> = Vec::new();
        for (status, r) in op.op["responses"].as_object().into_iter().flatten() {
            bodies.push((status.clone(), deref(&doc, r)));
        }
        if let Some(b) = op.op.get("requestBody") {
            bodies.push(("request".into(), b));
        }
        for (what, b) in bodies {
            for (media_type, m) in b["content"].as_object().into_iter().flatten() {
                let has = m.get("example").is_some()
                    || m["examples"].as_object().is_some_and(|e| !e.is_empty());
                if !has {
                    missing.push(format!("{} {} {what} {media_type}", op.method, op.path));
                }
            }
        }
    }
    assert!(missing.is_empty(), "without an example: {missing:#?}");
}

#[test]
fn path_parameters_are_the_templates() {
    let doc = document();
    for op in operations(&doc) {
        let in_template: BTreeSet<&str> = op
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect();
        let declared: Vec<&Value> = op.op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| deref(&doc, p))
            .filter(|p| p["in"] == "path")
            .collect();
        assert!(
            declared.iter().all(|p| p["required"] == true),
            "{} {}",
            op.method,
            op.path
        );
        let names: BTreeSet<&str> = declared.iter().filter_map(|p| p["name"].as_str()).collect();
        assert_eq!(names, in_template, "{} {}", op.method, op.path);
    }
}

/// The schemas are strict where the contract fixes the shape, so a wrong answer
/// fails the real-answer test.
#[test]
fn schemas_refuse_what_the_contract_forbids() {
    let doc = document();
    let v = Validator::new(&doc);
    let device = json!({"deviceReference": "d", "siteReference": "s", "name": "n", "type": "meter",
                        "properties": [{"property": "activePower", "unit": "W"}],
                        "status": {"online": true, "lastSeen": null}});
    let problem = json!({"type": "about:blank", "title": "Not Found", "status": 404, "detail": "x", "code": "not_found"});
    let with = |base: &Value, key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        b
    };
    let without = |base: &Value, key: &str| {
        let mut b = base.clone();
        b.as_object_mut().map(|o| o.remove(key));
        b
    };
    let good = [("Device", device.clone()), ("Problem", problem.clone())];
    for (schema, instance) in &good {
        let s = json!({"$ref": format!("#/components/schemas/{schema}")});
        assert_eq!(v.errors(&s, instance), Vec::<String>::new(), "{schema}");
    }
    let bad = [
        ("Device", with(&device, "firmware", json!("1.2"))),
        ("Device", with(&device, "type", json!("solar"))),
        ("Device", without(&device, "status")),
        (
            "Device",
            with(
                &device,
                "properties",
                json!([{"property": "power", "unit": "W"}]),
            ),
        ),
        ("Problem", with(&problem, "code", json!("teapot"))),
        ("Problem", without(&problem, "detail")),
        ("Problem", with(&problem, "extra", json!(1))),
        (
            "Measurement",
            json!({"property": "soc", "value": 1, "unit": "%", "reference": "d"}),
        ),
        ("EssSetting", json!({"mode": "idle", "value": 1})),
        ("EssSetting", json!({"value": 1, "unit": "kw"})),
        (
            "EssSetting",
            json!({"value": 1, "unit": "kW", "untilSoc": 101}),
        ),
        ("CurtailmentValue", json!({"value": 120, "unit": "%"})),
        ("CurtailmentValue", json!({"value": -1, "unit": "kW"})),
        ("ActiveSteeringRequest", json!({"validUntil": 1})),
        (
            "EssSteeringRequest",
            json!({"setting": {"mode": "idle"}, "validUntil": 1, "speed": 2}),
        ),
        (
            "TimeSeriesRequest",
            json!({"property": "soc", "range": {"type": "relative", "start": "2024-06-01T00:00:00Z", "end": "2024-06-02T00:00:00Z"}, "resolution": {"value": 1, "unit": "h"}}),
        ),
        ("TimeSeries", json!({"time": ["2024-06-01"], "data": [1]})),
        (
            "DeviceSteering",
            json!({"deviceReference": "d", "component": "ess", "setpoint": null, "state": "done", "writtenAt": null, "confirmed": false, "error": null}),
        ),
        ("Health", json!({"status": "fine"})),
        // Each kind's args hold its own members only, and an id its alphabet.
        (
            "OperationRequest",
            json!({"id": "a", "kind": "logs", "args": {"bus": "pv"}}),
        ),
        (
            "OperationRequest",
            json!({"id": "a", "kind": "bundle", "args": {"lines": 1}}),
        ),
        ("OperationRequest", json!({"id": "a", "kind": "scan"})),
        ("OperationRequest", json!({"kind": "logs"})),
        ("OperationRequest", json!({"id": "a/b", "kind": "logs"})),
        ("OperationRequest", json!({"id": "..", "kind": "logs"})),
        ("OperationRequest", json!({"id": "a", "kind": "reboot"})),
        (
            "OperationRequest",
            json!({"id": "a", "kind": "config.put", "args": {"toml": "", "patchToml": ""}}),
        ),
        (
            "OperationRequest",
            json!({"id": "a", "kind": "config.put", "args": {"patchToml": "x ="}}),
        ),
        (
            "OperationRequest",
            json!({"id": "a", "kind": "config.put", "args": {"patch": {"devices": [null]}}}),
        ),
        ("EssSetting", json!({"value": 1.0e13, "unit": "W"})),
        (
            "EssSetting",
            json!({"value": -1.0e13, "unit": "MW", "untilSoc": 50}),
        ),
        ("LimitValue", json!({"value": 1.0e13, "unit": "kW"})),
        ("CurtailmentValue", json!({"value": 1.0e13, "unit": "MW"})),
    ];
    for (schema, instance) in bad {
        let s = json!({"$ref": format!("#/components/schemas/{schema}")});
        assert!(
            !v.errors(&s, &instance).is_empty(),
            "{schema} accepted {instance}"
        );
    }
}

/// The small site of `crate::common::site`, a token with only the steer scope, and a
/// meter on its own site whose bus (a listener that never answers, reached by
/// name so the simulator leaves it alone) keeps the agent unready until the
/// test lets it go.
fn site_config(dark_port: u16) -> String {
    TestSite::small()
        .token("steer-only", STEER_ONLY, &["steer"])
        .site("ste_dark", "Dark site")
        .meter("dark", "dvc_dark")
        .name("Dark meter")
        .bus_key_of("dark", "tcp", format!("localhost:{dark_port}"))
        .bus_key_of("dark", "timeout_ms", 60_000)
        .text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_answers_validate_against_the_document() {
    assert_eq!(READ, crate::common::site::READ_TOKEN);
    assert_eq!(STEER, crate::common::site::STEER_TOKEN);
    let dark = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = dark.local_addr().expect("address").port();
    let (connected_tx, connected) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn(async move {
        let (stream, _) = dark.accept().await.expect("the agent connects");
        let _ = connected_tx.send(());
        let _ = released.await;
        drop((stream, dark));
    });
    let site = crate::common::site::start(
        &site_config(port),
        60.0,
        crate::common::site::SUMMER_MORNING_MS,
    )
    .await;
    let doc = document();
    let mut c = Checker::new(&doc, &site.base);

    tokio::time::timeout(Duration::from_secs(10), connected)
        .await
        .expect("the agent reaches the dark bus")
        .expect("connected");
    for (device, property) in [
        ("dvc_pv", "activePower"),
        ("dvc_bat", "soc"),
        ("dvc_grid", "activePower"),
    ] {
        crate::common::wait_for(
            &format!("{device} {property}"),
            Duration::from_secs(15),
            || site.latest(device, property),
        )
        .await;
    }
    let not_ready = c.get("/readyz", None, 503).await;
    assert!(
        not_ready["reasons"].to_string().contains("dvc_dark"),
        "{not_ready}"
    );
    let _ = release.send(());
    holder.await.expect("holder");
    site.ready().await;
    c.get("/readyz", None, 200).await;
    c.get("/healthz", None, 200).await;
    let served = c.get("/openapi.json", None, 200).await;
    assert_eq!(
        served, doc,
        "GET /openapi.json serves the checked-in document"
    );
    let raw = reqwest::get(format!("{}/openapi.json", site.base))
        .await
        .expect("GET")
        .text()
        .await
        .expect("text");
    assert_eq!(raw, OPENAPI_DOCUMENT);

    answers::device_data(&mut c).await;
    site.agent.store().flush().await.expect("flush");
    answers::time_series(&mut c).await;
    answers::sites(&mut c).await;
    answers::steering(&mut c).await;
    answers::history_and_end(&mut c).await;
    answers::operations(&mut c).await;

    let uncovered = c.uncovered(&[
        // Their only documented error is 503 `timeout`, which a healthy agent
        // on loopback does not reach.
        ("GET", "/healthz", "error"),
        ("GET", "/openapi.json", "error"),
        // Checked by `metrics_answer_as_documented`.
        ("GET", "/metrics", "success"),
        ("GET", "/metrics", "error"),
    ]);
    assert!(uncovered.is_empty(), "{uncovered:#?}");
    site.stop().await;
}

/// `GET /metrics`: Prometheus text without a token, and 404 `not_found` with
/// `[http] metrics = false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_as_documented() {
    let doc = document();
    let on = crate::common::site::start(
        &TestSite::small().text(),
        60.0,
        crate::common::site::SUMMER_MORNING_MS,
    )
    .await;
    let mut c = Checker::new(&doc, &on.base);
    let text = c.get("/metrics", None, 200).await;
    assert!(
        text.as_str().is_some_and(|t| t.contains("# TYPE")),
        "{text}"
    );
    on.stop().await;

    let off_config = TestSite::small().http_key("metrics", false).text();
    let off =
        crate::common::site::start(&off_config, 60.0, crate::common::site::SUMMER_MORNING_MS).await;
    let mut c = Checker::new(&doc, &off.base);
    let problem = c.get("/metrics", None, 404).await;
    assert_eq!(problem["code"], "not_found");
    off.stop().await;
}
