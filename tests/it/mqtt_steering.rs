//! Steering over MQTT: every steering endpoint answers over RPC as over HTTP,
//! RPC requests are audited as `mqtt`, a duplicated steering RPC is applied once
//! (also when the id reaches steering as its `Idempotency-Key`), and the
//! retained `sites/{s}/steering` topic carries the state after a change.

use crate::common::broker::{kinds, Broker, Kind, Message, Subscriber};
use crate::common::mqtt::{rpc, ROOT};
use crate::common::site::STEER_TOKEN;
use crate::common::steer::{audited, same_answer, settled, start, until, without, SITE, T};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_steering_endpoint_answers_over_rpc_as_over_http() {
    for kind in kinds() {
        steering_equality(kind).await;
    }
}

async fn steering_equality(kind: Kind) {
    let broker = Broker::start(kind).await;
    let (site, mut sub) = start(&broker).await;
    let ess = json!({"setting": {"value": 2, "unit": "kW"}, "validUntil": until(30)});
    let curtail = json!({"setting": {"value": 50, "unit": "%"}, "validUntil": until(30)});
    let both = json!({"energyStorageSetting": {"value": -1, "unit": "kW"}, "productionCurtailment": {"value": 6, "unit": "kW"}, "validUntil": until(30)});
    let steering = format!("/sites/{SITE}/steering");

    // Changes: the same answer but for the request id, which is new per request.
    for (i, (path, body)) in [
        (format!("{steering}/ess"), &ess),
        (format!("{steering}/curtailment"), &curtail),
        (steering.clone(), &both),
    ]
    .iter()
    .enumerate()
    {
        let (status, http) = site
            .call(Method::POST, path, Some(STEER_TOKEN), Some(body))
            .await;
        let answer = rpc(
            &mut sub,
            json!({"id": format!("post-{i}"), "method": "POST", "path": path, "body": body}),
        )
        .await;
        assert_eq!(
            (status.as_u16(), answer["status"].as_u64()),
            (200, Some(200)),
            "{path}: {http} / {answer}"
        );
        assert_eq!(
            without(&answer["body"], "requestId"),
            without(&http, "requestId"),
            "{path}"
        );
        let (a, b) = (&answer["body"]["requestId"], &http["requestId"]);
        assert!(
            a.as_str().is_some_and(|a| a.starts_with("req_")) && a != b,
            "{a} {b}"
        );
    }
    // The listings, the state, the history (with both transports in it), dry runs, errors.
    let cases: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", "/sites".into(), None),
        ("GET", format!("/sites/{SITE}"), None),
        ("GET", steering.clone(), None),
        ("GET", format!("{steering}/history"), None),
        ("GET", format!("{steering}/history?limit=2"), None),
        (
            "POST",
            format!("{steering}/ess?dryRun=true"),
            Some(ess.clone()),
        ),
        (
            "POST",
            format!("{steering}/curtailment?dryRun=true"),
            Some(curtail.clone()),
        ),
        (
            "POST",
            format!("{steering}?dryRun=true"),
            Some(both.clone()),
        ),
        ("GET", "/sites/ste_nope".into(), None),
        ("GET", "/sites/ste_nope/steering".into(), None),
        ("GET", format!("{steering}/history?limit=0"), None),
        ("GET", format!("{steering}?bogus=1"), None),
        (
            "POST",
            format!("{steering}/ess"),
            Some(json!({"setting": {"value": 1, "unit": "kW"}})),
        ),
        (
            "POST",
            format!("{steering}/ess"),
            Some(json!({"setting": {"value": 1, "unit": "kw"}, "validUntil": until(5)})),
        ),
        (
            "POST",
            format!("{steering}/curtailment"),
            Some(json!({"setting": {"value": 120, "unit": "%"}, "validUntil": until(5)})),
        ),
        (
            "POST",
            steering.clone(),
            Some(json!({"validUntil": until(5), "extra": 1})),
        ),
        (
            "POST",
            format!("{steering}/ess?dryRun=maybe"),
            Some(ess.clone()),
        ),
        ("POST", format!("{steering}/ess"), None),
        (
            "POST",
            "/sites/ste_nope/steering/ess".into(),
            Some(ess.clone()),
        ),
        ("DELETE", format!("{steering}?component=nope"), None),
        ("DELETE", "/sites/ste_nope/steering".into(), None),
    ];
    for (i, (method, path, body)) in cases.into_iter().enumerate() {
        same_answer(&site, &mut sub, &format!("case-{i}"), method, &path, body).await;
    }
    let history = site.get_ok(&format!("{steering}/history")).await;
    let sources: Vec<(&str, &str)> = history
        .as_array()
        .expect("array")
        .iter()
        .filter(|e| e["type"] == "request")
        .map(|e| {
            (
                e["source"].as_str().unwrap_or(""),
                e["token"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        sources.iter().filter(|s| **s == ("mqtt", "mqtt")).count(),
        3,
        "{history}"
    );
    assert_eq!(
        sources
            .iter()
            .filter(|s| **s == ("http", "operator"))
            .count(),
        3,
        "{history}"
    );

    // DELETE answers the new state. Once a DELETE was applied and the devices
    // followed, another one changes nothing but the evaluation time (each
    // DELETE wakes the control loop), so the two transports must agree on the rest.
    for (i, path) in [
        format!("{steering}?component=curtailment"),
        steering.clone(),
    ]
    .iter()
    .enumerate()
    {
        let (status, _) = site
            .call(Method::DELETE, path, Some(STEER_TOKEN), None)
            .await;
        assert_eq!(status, 200, "{path}");
        settled(&site).await;
        let (status, http) = site
            .call(Method::DELETE, path, Some(STEER_TOKEN), None)
            .await;
        let answer = rpc(
            &mut sub,
            json!({"id": format!("delete-{i}"), "method": "DELETE", "path": path}),
        )
        .await;
        assert_eq!(
            (status.as_u16(), answer["status"].as_u64()),
            (200, Some(200)),
            "{path}: {answer}"
        );
        assert_eq!(
            without(&answer["body"], "evaluatedAt"),
            without(&http, "evaluatedAt"),
            "{path}"
        );
    }
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicated_steering_rpc_is_applied_once() {
    for kind in kinds() {
        applied_once(kind).await;
    }
}

async fn applied_once(kind: Kind) {
    let broker = Broker::start(kind).await;
    let (site, mut sub) = start(&broker).await;
    let path = format!("/sites/{SITE}/steering/ess");
    let body = json!({"setting": {"value": 2, "unit": "kW"}, "validUntil": until(30)});

    // The same id twice (the second with another body): one answer, one entry.
    for id in ["dup-steer-1", "dup läuft ü"] {
        let request = json!({"id": id, "method": "POST", "path": path, "body": body});
        let first = rpc(&mut sub, request).await;
        assert_eq!(first["status"], 200, "{first}");
        let other = json!({"setting": {"value": 3, "unit": "kW"}, "validUntil": until(30)});
        let again = rpc(
            &mut sub,
            json!({"id": id, "method": "POST", "path": path, "body": other}),
        )
        .await;
        assert_eq!(again, first);
        let entries = audited(&site, &first["body"]["requestId"]).await;
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(
            (entries[0]["source"].as_str(), entries[0]["token"].as_str()),
            (Some("mqtt"), Some("mqtt"))
        );
        assert_eq!(entries[0]["action"], format!("POST {path}"));
        let state = site.get_ok(&format!("/sites/{SITE}/steering")).await;
        assert_eq!(
            state["energyStorageSetting"]["requestId"],
            first["body"]["requestId"]
        );
    }

    // The id reaches steering as the Idempotency-Key of the token's caller: an
    // HTTP replay with that key and token gets the first answer.
    let request =
        json!({"id": "key-1", "method": "POST", "path": path, "body": body, "token": STEER_TOKEN});
    let first = rpc(&mut sub, request).await;
    assert_eq!(first["status"], 200, "{first}");
    let replay = site
        .http
        .post(format!("{}{path}", site.base))
        .bearer_auth(STEER_TOKEN)
        .header("Idempotency-Key", "key-1")
        .json(&body)
        .send()
        .await
        .expect("replay");
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.json::<Value>().await.expect("json"), first["body"]);
    let entries = audited(&site, &first["body"]["requestId"]).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["token"], "operator");
    site.stop().await;
}

fn is_steering(m: &Message) -> bool {
    m.topic == format!("{ROOT}/sites/{SITE}/steering")
}

async fn retained_state(kind: Kind) {
    let broker = Broker::start(kind).await;
    let mut watch =
        Subscriber::connect(broker.addr("5"), "steer-watch", &format!("{ROOT}/sites/#")).await;
    let (site, _sub) = start(&broker).await;
    let first = watch
        .expect("the state at start", T, is_steering)
        .await
        .json();
    assert_eq!(first["siteReference"], SITE);
    assert_eq!(first["energyStorageSetting"], Value::Null);

    let body = json!({"setting": {"value": 2, "unit": "kW"}, "validUntil": until(30)});
    let (status, answer) = site
        .call(
            Method::POST,
            &format!("/sites/{SITE}/steering/ess"),
            Some(STEER_TOKEN),
            Some(&body),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["requestId"].clone();
    watch
        .expect("the state with the request", T, |m| {
            is_steering(m) && m.json()["energyStorageSetting"]["requestId"] == id
        })
        .await;
    // Once the devices settle, the last state published is the one GET shows
    // (but for the evaluation time, which moves without being a change). A
    // device may confirm between a GET and the publish: then ask again.
    let deadline = tokio::time::Instant::now() + T;
    let get = loop {
        let get = without(&settled(&site).await, "evaluatedAt");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        watch.drain();
        if states(&watch).next_back() == Some(get.clone()) {
            break get;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the last state published {:?} never caught up with GET {get}",
            states(&watch).next_back()
        );
    };
    assert_eq!(get["energyStorageSetting"]["requestId"], id);

    // A new subscriber gets it retained: the state last published when it
    // subscribed (a live publish may overtake it on the way).
    let mut late = Subscriber::connect(
        broker.addr("5"),
        "steer-late",
        &format!("{ROOT}/sites/{SITE}/steering"),
    )
    .await;
    let m = late
        .expect("the retained state", T, |m| is_steering(m) && m.retain)
        .await;
    let retained = without(&m.json(), "evaluatedAt");
    let deadline = tokio::time::Instant::now() + T;
    while !states(&watch).any(|s| s == retained) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the retained state {retained} was never published"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        watch.drain();
    }
    site.stop().await;
}

/// The steering states `w` has seen, oldest first, without their evaluation
/// time.
fn states(w: &Subscriber) -> impl DoubleEndedIterator<Item = Value> + '_ {
    w.seen
        .iter()
        .filter(|m| is_steering(m))
        .map(|m| without(&m.json(), "evaluatedAt"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retained_steering_topic_carries_the_state_after_a_post() {
    for kind in kinds() {
        retained_state(kind).await;
    }
}
