//! A property test of the contract: requests made from `/openapi.json` alone
//! (ids found through the listing operations' links, bodies, query strings
//! and headers drawn from their schemas) sent to a running agent. Every
//! answer must be one the document describes (status, content type, body),
//! and a request the schema allows may be refused only for a reason the
//! operation's description states: a time relative to now (`expired`,
//! `range_too_long`, `too_many_points`), an id that is not there, nothing
//! measured. A refusal of its shape (`invalid_value`, `unknown_field`,
//! `missing_field`, `unknown_unit`, `invalid_json`, `unknown_property`) means
//! the schema allows what the API refuses.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::Value;
use sitegate::model::time::now_ms;

use crate::common::site::{self, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::openapi_support::client::{Body, Checker};
use crate::openapi_support::generate::Gen;
use crate::openapi_support::{deref, document, operations, Operation};

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
/// site's configured limits (a temporary limit only tightens).
const STATED_FIELDS: &[&str] = &[
    "validUntil",
    "validFrom",
    "untilSoc",
    "maxExport",
    "maxImport",
];
/// Operations the test leaves out: they take no input, or (the operations
/// under `/admin`) they need the `admin` scope and would start restarts and
/// bus scans at random; `openapi::real_answers_validate_against_the_document`
/// covers those.
const FIXED: &[&str] = &[
    "healthz",
    "readyz",
    "metrics",
    "openapi",
    "startOperation",
    "listOperations",
    "getOperation",
    "getBundleChunk",
];

/// `operationId -> (parameter -> value)`, from the links of the listings'
/// answers.
type Linked = BTreeMap<String, BTreeMap<String, String>>;

/// Follows the links of every `200` answer of `listing` (a GET without
/// parameters) to the operations they name.
async fn follow(c: &mut Checker<'_>, doc: &Value, listing: &str, linked: &mut Linked) {
    let (status, body) = c
        .send(Method::GET, listing, Some(STEER_TOKEN), &[], Body::None)
        .await;
    assert_eq!(status, 200, "{listing}: {body}");
    let op = &doc["paths"][listing]["get"];
    let links = deref(doc, &op["responses"]["200"])["links"]
        .as_object()
        .unwrap_or_else(|| panic!("GET {listing}: no links to the operations that take its ids"));
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
                .unwrap_or_else(|| panic!("{listing}: {pointer} is not in {body}"));
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
    let site = site::start(&site::small_site(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut c = Checker::new(&doc, &site.base);
    let mut linked = Linked::new();
    follow(&mut c, &doc, "/devices", &mut linked).await;
    follow(&mut c, &doc, "/sites", &mut linked).await;

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
    let mut seen = Seen::default();
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
                    _ => query.push(format!("{name}={}", text(&v))),
                }
            }
            _ => {}
        }
    }
    let body = match o.op["requestBody"]["content"]["application/json"]["schema"] {
        Value::Null => Body::None,
        ref schema => match gen.instance(schema, "") {
            Some(v) => Body::Json(v),
            None => panic!("{id}: no body could be drawn from its schema"),
        },
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
        .send(method.clone(), &path, Some(STEER_TOKEN), &header_refs, body)
        .await;
    seen.answered.entry(id.clone()).or_default().push(status);
    if (400..500).contains(&status) {
        let code = answer["code"].as_str().unwrap_or("");
        let field = answer["field"].as_str().unwrap_or("");
        let stated_field =
            code == "invalid_value" && STATED_FIELDS.iter().any(|f| field.ends_with(f));
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
