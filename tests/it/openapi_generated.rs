//! A property test of the contract: requests made from `/openapi.json` alone
//! (ids found through the links of the listings' answers and of a started
//! operation's, bodies, query strings and headers drawn from their schemas)
//! sent to a running agent, the operations under `/admin` with an `admin`
//! token. Every answer must be one the document describes (status, content
//! type, body), and a request the schema allows may be refused only for a
//! reason the operation's description states: a time relative to now
//! (`expired`, `range_too_long`, `too_many_points`), a range whose end is not
//! after its start (`invalid_range`), an id that is not there, nothing
//! measured, what the config holds (a configured limit, bus or site), an id
//! or key reused. A refusal of its shape (`invalid_value`, `unknown_field`,
//! `missing_field`, `unknown_unit`, `invalid_json`, `unknown_property`) means
//! the schema allows what the API refuses.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use sitegate::model::time::now_ms;

use crate::common::site::{self, ADMIN_TOKEN, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::openapi_support::client::{Body, Checker};
use crate::openapi_support::generate::Gen;
use crate::openapi_support::{deref, document, operations, Operation};
use crate::steering_support::TestSite;

/// Requests sent per seed.
const REQUESTS: usize = 400;
/// The seeds of one run (`SITEGATE_OPENAPI_SEED` adds one: a failure names
/// its seed).
const SEEDS: &[u64] = &[
    0x5173_6174_6567_0001,
    0x5173_6174_6567_0002,
    0x5173_6174_6567_0003,
];
/// Refusals a schema-valid request may get: rules the descriptions state
/// that depend on the time of the request or on what the site holds.
const STATED: &[&str] = &[
    "expired",
    "invalid_range",
    "range_too_long",
    "too_many_points",
    "device_not_found",
    "site_not_found",
    "no_measurement",
    "not_found",
    // A property name the device does not offer (the listing says which).
    "unknown_property",
];
/// `invalid_value` on fields whose rule the descriptions state against
/// something outside the request: now (`validUntil` later than now and
/// `validFrom`, at most 31 days ahead), the site's SoC (`untilSoc`), the
/// site's configured limits (a temporary limit only tightens), the running
/// config's buses and sites (a scan's `bus` and `site`).
const STATED_FIELDS: &[&str] = &[
    "validUntil",
    "validFrom",
    "untilSoc",
    "maxExport",
    "maxImport",
    "args.bus",
    "args.site",
];
/// Operations the test leaves out: they take no input.
const FIXED: &[&str] = &["healthz", "readyz", "metrics", "openapi"];
/// Kinds of operation never drawn: `restart` stops the agent (it exits as on
/// SIGTERM, for its service manager to start it again), and the test has one
/// agent. Every other kind is drawn, and the test's agent survives each:
/// `scan` is refused on its `bus` (a drawn name is not one of the config's,
/// and the bus is checked first), and the agent runs on a config in memory,
/// so `config.put` (and `config.get`) end as failed operations after their
/// arguments were parsed, changing nothing.
const UNDRAWN_KINDS: &[&str] = &["restart"];
/// How long the operation the test starts first may take to end.
const FIRST_OPERATION_WAIT: Duration = Duration::from_secs(10);

/// `operationId -> (parameter -> value)`, from the links of the listings'
/// answers.
type Linked = BTreeMap<String, BTreeMap<String, String>>;

/// The token for an operation: the `admin` one for the operations under
/// `/admin`, else the one with `read` and `steer`.
fn token_for(op: &Value) -> &'static str {
    if op["security"] == serde_json::json!([{"bearer": ["admin"]}]) {
        ADMIN_TOKEN
    } else {
        STEER_TOKEN
    }
}

/// Follows the links of every `200` answer of `listing` (a GET without
/// parameters) to the operations they name.
async fn follow(c: &mut Checker<'_>, doc: &Value, listing: &str, linked: &mut Linked) {
    let (status, body) = c
        .send(Method::GET, listing, Some(STEER_TOKEN), &[], Body::None)
        .await;
    assert_eq!(status, 200, "{listing}: {body}");
    let op = &doc["paths"][listing]["get"];
    follow_links(doc, op, "200", &body, linked);
}

/// Takes the values the links of `op`'s `status` answer give from `body`.
fn follow_links(doc: &Value, op: &Value, status: &str, body: &Value, linked: &mut Linked) {
    let id = op["operationId"].as_str().unwrap_or_default();
    let links = deref(doc, &op["responses"][status])["links"]
        .as_object()
        .unwrap_or_else(|| panic!("{id} {status}: no links to the operations that take its ids"));
    for link in links.values() {
        let target = link["operationId"].as_str().expect("operationId");
        for (param, expr) in link["parameters"].as_object().expect("parameters") {
            let pointer = expr
                .as_str()
                .and_then(|e| e.strip_prefix("$response.body#"))
                .expect("a $response.body pointer");
            let value = body
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{id}: {pointer} is not in {body}"));
            linked
                .entry(target.to_string())
                .or_default()
                .insert(param.clone(), value.to_string());
        }
    }
}

/// A parameter's value as it goes into a path, query string or header (an
/// array as `style: form, explode: false`: comma-separated).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_requests_get_documented_answers() {
    let doc = document();
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut c = Checker::new(&doc, &site.base);
    let mut linked = Linked::new();
    follow(&mut c, &doc, "/devices", &mut linked).await;
    follow(&mut c, &doc, "/sites", &mut linked).await;
    let mut seen = Seen::default();
    start_first_operation(&mut c, &doc, &mut linked, &mut seen).await;

    let ops: Vec<_> = operations(&doc)
        .into_iter()
        .filter(|o| !FIXED.contains(&o.op["operationId"].as_str().unwrap_or("")))
        .collect();
    let mut seeds = SEEDS.to_vec();
    if let Some(extra) = std::env::var("SITEGATE_OPENAPI_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        seeds.push(extra);
    }
    for seed in seeds {
        let mut gen = Gen::new(&doc, seed, now_ms());
        for n in 0..REQUESTS {
            let o = &ops[n % ops.len()];
            send_one(&mut c, &doc, o, &linked, &mut gen, (seed, n), &mut seen).await;
        }
    }
    assert!(
        seen.refused.is_empty(),
        "{} schema-valid requests refused for a rule the schema does not state:\n{}",
        seen.refused.len(),
        seen.refused.join("\n")
    );
    assert!(
        seen.reuse_refused > 0,
        "no key reused across operations was refused"
    );
    // Every operation was reached, and got a success at least once.
    for o in &ops {
        let id = o.op["operationId"].as_str().unwrap_or("");
        let statuses = seen.answered.get(id).cloned().unwrap_or_default();
        assert!(
            statuses.iter().any(|s| *s < 300),
            "{id}: no generated request succeeded: {statuses:?}"
        );
    }
    site.stop().await;
}

/// What the generated requests met.
#[derive(Default)]
struct Seen {
    /// Schema-valid requests refused for a rule the schema does not state.
    refused: Vec<String>,
    /// Statuses by operation id.
    answered: BTreeMap<String, Vec<u16>>,
    /// Idempotency keys sent so far.
    keys: Vec<String>,
    /// Keys reused on another operation or body, refused as such.
    reuse_refused: usize,
    /// Operation ids sent so far.
    op_ids: Vec<String>,
}

/// Starts a bundle operation drawn from the document, waits until it ended
/// (as its own answer shows), and follows its answer's links: the ids of
/// `getOperation` and `getBundleChunk`.
async fn start_first_operation(
    c: &mut Checker<'_>,
    doc: &Value,
    linked: &mut Linked,
    seen: &mut Seen,
) {
    let path = "/admin/operations";
    let op = &doc["paths"][path]["post"];
    let schema = &op["requestBody"]["content"]["application/json"]["schema"];
    let mut gen = Gen::new(doc, SEEDS[0], now_ms());
    let body = (0..256)
        .filter_map(|_| gen.instance(schema, ""))
        .find(|b| b["kind"] == "bundle")
        .expect("a bundle operation drawn from the document");
    let (status, answer) = c
        .send(
            Method::POST,
            path,
            Some(ADMIN_TOKEN),
            &[],
            Body::Json(body.clone()),
        )
        .await;
    assert_eq!(status, 202, "{body}: {answer}");
    seen.op_ids
        .push(body["id"].as_str().unwrap_or_default().to_string());
    follow_links(doc, op, "202", &answer, linked);
    let get = format!("{path}/{}", linked["getOperation"]["operation_id"]);
    let deadline = tokio::time::Instant::now() + FIRST_OPERATION_WAIT;
    let mut state = answer["state"].clone();
    while state == "running" && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (status, now) = c
            .send(Method::GET, &get, Some(ADMIN_TOKEN), &[], Body::None)
            .await;
        assert_eq!(status, 200, "{get}: {now}");
        state = now["state"].clone();
    }
    assert_eq!(state, "succeeded", "{body}: the bundle did not end well");
}

/// A body drawn from `schema`; for `startOperation`, never of a kind in
/// [`UNDRAWN_KINDS`].
fn draw_body(gen: &mut Gen<'_>, schema: &Value, id: &str) -> Value {
    for _ in 0..256 {
        let Some(v) = gen.instance(schema, "") else {
            break;
        };
        let kind = v["kind"].as_str().unwrap_or_default();
        if id != "startOperation" || !UNDRAWN_KINDS.contains(&kind) {
            return v;
        }
    }
    panic!("{id}: no body could be drawn from its schema")
}

/// Whether an `invalid_value` on `field` of the body `sent` is one of the
/// rules stated against something outside the request ([`STATED_FIELDS`]).
/// `untilSoc` is refused for its sign against the site's SoC, which a zero
/// power has not: a zero power refused there is not a stated rule.
fn stated_field(field: &str, sent: &str) -> bool {
    if !STATED_FIELDS.iter().any(|f| field.ends_with(f)) {
        return false;
    }
    let Some(setting) = field.strip_suffix(".untilSoc") else {
        return true;
    };
    let body: Value = serde_json::from_str(sent).unwrap_or_default();
    let pointer = format!("/{}/value", setting.replace('.', "/"));
    body.pointer(&pointer).and_then(Value::as_f64) != Some(0.0)
}

/// One generated request: sent, its answer checked against the document,
/// and a refusal the schema does not state noted in `refused`.
async fn send_one(
    c: &mut Checker<'_>,
    doc: &Value,
    o: &Operation<'_>,
    linked: &Linked,
    gen: &mut Gen<'_>,
    (seed, n): (u64, usize),
    seen: &mut Seen,
) {
    let id = o.op["operationId"].as_str().unwrap_or("").to_string();
    let mut path = o.path.to_string();
    let mut query = Vec::new();
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut reused = false;
    let params = o.op["parameters"].as_array().cloned().unwrap_or_default();
    for p in &params {
        let p = deref(doc, p);
        let name = p["name"].as_str().expect("a name");
        let required = p["required"] == true;
        match p["in"].as_str() {
            Some("path") => {
                let v = linked
                    .get(&id)
                    .and_then(|l| l.get(name))
                    .cloned()
                    .unwrap_or_else(|| panic!("{id}: no link gives {name}"));
                path = path.replace(&format!("{{{name}}}"), &v);
            }
            Some(place) if required || gen.chance(50) => {
                let Some(v) = gen.instance(&p["schema"], name) else {
                    panic!("{id}: no value of {name} could be drawn from its schema");
                };
                match place {
                    // Mostly a fresh key; now and then one used before,
                    // on whatever operation and body it was used with.
                    "header" if name == "Idempotency-Key" => {
                        let key = match gen.chance(15) {
                            true => gen.pick(&seen.keys).cloned(),
                            false => None,
                        };
                        reused = key.is_some();
                        let key = key.unwrap_or_else(|| format!("gen-{seed:x}-{n}"));
                        seen.keys.push(key.clone());
                        headers.push((name.into(), key));
                    }
                    "header" => headers.push((name.into(), text(&v))),
                    // Percent-encoded: a URL's trailing blanks are cut
                    // before it is sent.
                    _ => query.push(format!(
                        "{name}={}",
                        form_urlencoded::byte_serialize(text(&v).as_bytes()).collect::<String>()
                    )),
                }
            }
            _ => {}
        }
    }
    let body = match o.op["requestBody"]["content"]["application/json"]["schema"] {
        Value::Null => Body::None,
        ref schema => {
            let mut v = draw_body(gen, schema, &id);
            // An operation id: now and then one used before, with whatever
            // request it was used with.
            if let Some(op_id) = v.get_mut("id").filter(|_| id == "startOperation") {
                if gen.chance(15) {
                    if let Some(old) = gen.pick(&seen.op_ids) {
                        *op_id = Value::String(old.clone());
                    }
                }
                let op_id = op_id.as_str().unwrap_or_default().to_string();
                reused |= seen.op_ids.contains(&op_id);
                seen.op_ids.push(op_id);
            }
            Body::Json(v)
        }
    };
    let sent = match &body {
        Body::Json(v) => v.to_string(),
        _ => String::new(),
    };
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let method = Method::from_bytes(o.method.as_bytes()).expect("a method");
    let header_refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (status, answer) = c
        .send(
            method.clone(),
            &path,
            Some(token_for(o.op)),
            &header_refs,
            body,
        )
        .await;
    seen.answered.entry(id.clone()).or_default().push(status);
    if (400..500).contains(&status) {
        let code = answer["code"].as_str().unwrap_or("");
        let field = answer["field"].as_str().unwrap_or("");
        let stated_field = code == "invalid_value" && stated_field(field, &sent);
        let key_reused = reused && code == "idempotency_key_reused";
        if key_reused {
            seen.reuse_refused += 1;
        }
        if !STATED.contains(&code) && !stated_field && !key_reused {
            seen.refused.push(format!(
                "seed {seed}: {method} {path} {sent}\n  -> {status} {answer}"
            ));
        }
    }
}
