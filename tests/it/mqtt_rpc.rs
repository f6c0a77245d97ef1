//! The RPC bridge end to end, on every broker: every device-data endpoint (the
//! latest values, the lists, the time series from the store) answers over MQTT
//! as it does over HTTP, errors included; MQTT 5 response topics and
//! correlation data; a duplicate id of a state-changing request gets the first
//! answer, also after a restart, while a GET is simply answered again; the
//! optional token check.

use std::time::Duration;

use crate::common::broker::{kinds, Broker, Kind, Subscriber};
use crate::common::mqtt::{self, mqtt_section, plain_url, rpc, site_config, ROOT};
use crate::common::site::{SmallSite, READ_TOKEN, STEER_TOKEN};
use reqwest::Method;
use serde_json::{json, Value};
use sitegate::model::time::format_utc;

const T: Duration = Duration::from_secs(20);
/// Polled once, then not for an hour: answers stay the same between the two transports.
const ONCE: u64 = 3_600_000;

/// An agent on the small site with `[mqtt]` on `broker` (and `extra`
/// keys), connected, a client subscribed to its RPC answers, and the
/// agent's config text (for a restart).
async fn rpc_site(broker: &Broker, client: &str, extra: &str) -> (Subscriber, SmallSite, String) {
    let sub =
        Subscriber::connect(broker.addr("5"), client, &format!("{ROOT}/rpc/response/#")).await;
    let text = site_config(
        &mqtt_section(&plain_url(broker.addr("5")), "5", extra),
        ONCE,
    );
    let site = mqtt::start(&text).await;
    site.ready().await;
    mqtt::wait_connected(&site, true, T).await;
    (sub, site, text)
}

async fn equality(kind: Kind) {
    let broker = Broker::start(kind).await;
    let (mut sub, site, text) = rpc_site(&broker, "rpc-client", "").await;

    let paths = [
        "/devices",
        "/devices?site=ste_test",
        "/devices?site=ste_nope",
        "/devices/dvc_bat/measurement?property=soc",
        "/devices/dvc_bat/measurement?property=frequency",
        "/devices/dvc_bat/measurement",
        "/devices/dvc_nope/measurement?property=soc",
        "/devices/dvc_pv/measurements",
        "/devices/dvc_pv/measurements?properties=activePower,%20activePower",
        "/devices/dvc_pv/measurements?properties=nope",
        "/devices/dvc_grid/measurements/map",
        "/devices/dvc_grid/measurements/map?properties=activePower",
        "/devices?bogus=1",
        "/no/such/path",
        "/healthz",
        "/readyz",
    ];
    for (i, path) in paths.iter().enumerate() {
        let (status, http_body) = site.call(Method::GET, path, Some(READ_TOKEN), None).await;
        let answer = rpc(
            &mut sub,
            json!({"id": format!("eq-{i}"), "method": "GET", "path": path}),
        )
        .await;
        assert_eq!(answer["status"], status.as_u16(), "{path}: {answer}");
        assert_eq!(answer["body"], http_body, "{path}");
    }
    // The time series, from the store: the polled samples are committed before
    // either transport asks.
    site.agent.store().flush().await.expect("flush");
    for (i, (path, body)) in time_series_cases(&site).await.iter().enumerate() {
        let (status, http_body) = site
            .call(Method::POST, path, Some(READ_TOKEN), body.as_ref())
            .await;
        let answer = rpc(
            &mut sub,
            json!({"id": format!("ts-{i}"), "method": "POST", "path": path, "body": body}),
        )
        .await;
        assert_eq!(
            answer["status"],
            status.as_u16(),
            "{path} {body:?}: {answer}"
        );
        assert_eq!(answer["body"], http_body, "{path} {body:?}");
        if i < 3 {
            // The first cases cover the poll: a series with data.
            assert!(
                http_body["data"].as_array().is_some_and(|d| !d.is_empty()),
                "{path} {body:?}: {http_body}"
            );
        }
    }

    // A method the route lacks, over both transports.
    let (status, http_body) = site
        .call(Method::DELETE, "/devices", Some(STEER_TOKEN), None)
        .await;
    let answer = rpc(
        &mut sub,
        json!({"id": "eq-delete", "method": "DELETE", "path": "/devices"}),
    )
    .await;
    assert_eq!(
        (answer["status"].as_u64(), &answer["body"]),
        (Some(u64::from(status.as_u16())), &http_body)
    );

    // MQTT 5: the request's response topic and correlation data win.
    sub.client
        .subscribe(
            format!("{ROOT}/mine"),
            rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
        )
        .await
        .expect("subscribe");
    sub.request(
        &format!("{ROOT}/rpc/request"),
        &json!({"id": "corr-1", "method": "GET", "path": "/healthz"}),
        Some((&format!("{ROOT}/mine"), b"abc")),
    )
    .await;
    let m = sub
        .expect("answer on the response topic", T, |m| {
            m.topic == format!("{ROOT}/mine")
        })
        .await;
    assert_eq!(m.correlation.as_deref(), Some(&b"abc"[..]));
    assert_eq!(m.json()["status"], 200);

    // A malformed request is answered with a problem where it can be.
    let answer = rpc(
        &mut sub,
        json!({"id": "bad-1", "method": "PATCH", "path": "/devices"}),
    )
    .await;
    assert_eq!(answer["status"], 400);
    assert_eq!(answer["body"]["code"], "invalid_value");
    assert_eq!(answer["body"]["field"], "method");

    // A duplicate id of a POST gets the first answer (not a new one), also
    // after a restart.
    let until = sitegate::model::time::now_ms() + 600_000;
    let post = |kw: u32| {
        json!({
            "id": "dup-1",
            "method": "POST",
            "path": "/sites/ste_test/steering/ess?dryRun=true",
            "body": {"setting": {"value": kw, "unit": "kW"}, "validUntil": until},
        })
    };
    let first = rpc(&mut sub, post(2)).await;
    assert_eq!(first["status"], 200, "{first}");
    let again = rpc(&mut sub, post(3)).await;
    assert_eq!(again, first);
    // A duplicate GET gets its first answer too (kept in memory, not on disk).
    let get = |path: &str| json!({"id": "dup-get", "method": "GET", "path": path});
    let healthz = rpc(&mut sub, get("/healthz")).await;
    assert_eq!(healthz["body"], json!({"status": "ok"}));
    let duplicate = rpc(&mut sub, get("/devices")).await;
    assert_eq!(duplicate, healthz);
    let site = mqtt::restart(site, &text).await;
    mqtt::wait_connected(&site, true, T).await;
    let after = rpc(&mut sub, post(4)).await;
    assert_eq!(after, first);
    // A read from before the restart is answered anew: it applied nothing.
    let devices = rpc(&mut sub, get("/devices")).await;
    assert!(devices["body"].is_array(), "{devices}");
    site.stop().await;
}

/// Time-series requests around the battery's one poll: answers with data, and
/// each kind of refusal.
async fn time_series_cases(site: &SmallSite) -> Vec<(String, Option<Value>)> {
    let (polled, _) = site
        .latest("dvc_bat", "activePower")
        .await
        .expect("the battery was polled");
    let hour = 3_600_000;
    let start = polled - polled.rem_euclid(hour) - hour;
    let range = |start: i64, end: i64| json!({"type": "absolute", "start": format_utc(start), "end": format_utc(end)});
    let day = 24 * hour;
    let series = |property: &str, range: Value, value: i64, unit: &str| json!({"property": property, "range": range, "resolution": {"value": value, "unit": unit}});
    let bat = "/devices/dvc_bat/measurements/time-series".to_string();
    let mut with_max = series("soc", range(start, start + 3 * hour), 1, "s");
    with_max["aggregation"] = json!("max");
    let mut median = series("soc", range(start, start + hour), 1, "min");
    median["aggregation"] = json!("median");
    let mut relative = series("soc", range(start, start + hour), 1, "min");
    relative["range"]["type"] = json!("relative");
    vec![
        (
            bat.clone(),
            Some(series(
                "activePower",
                range(start, start + 3 * hour),
                1,
                "min",
            )),
        ),
        (
            bat.clone(),
            Some(series(
                "totalEnergyConsumed",
                range(start, start + 3 * hour),
                1,
                "h",
            )),
        ),
        (bat.clone(), Some(with_max)),
        // Nothing stored in the range: an empty series.
        (
            bat.clone(),
            Some(series(
                "soc",
                range(start - day, start - day + hour),
                1,
                "min",
            )),
        ),
        // 31 days.
        (
            bat.clone(),
            Some(series("soc", range(start, start + 31 * day), 1, "d")),
        ),
        (
            bat.clone(),
            Some(series("nope", range(start, start + hour), 1, "min")),
        ),
        // A property of the vocabulary the meter does not offer.
        (
            "/devices/dvc_grid/measurements/time-series".to_string(),
            Some(series("soc", range(start, start + 3 * hour), 1, "min")),
        ),
        (
            bat.clone(),
            Some(series("soc", range(start, start + 30 * day), 1, "s")),
        ),
        (
            bat.clone(),
            Some(series("soc", range(start + hour, start), 1, "min")),
        ),
        (
            bat.clone(),
            Some(series("soc", range(start, start + hour), 1, "week")),
        ),
        (
            bat.clone(),
            Some(series(
                "soc,activePower",
                range(start, start + hour),
                1,
                "min",
            )),
        ),
        (bat.clone(), Some(relative)),
        (bat.clone(), Some(median)),
        (bat.clone(), Some(json!({"property": "soc"}))),
        (bat.clone(), None),
        (
            "/devices/dvc_nope/measurements/time-series".to_string(),
            Some(series("soc", range(start, start + hour), 1, "min")),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_device_data_endpoint_answers_over_rpc_as_over_http() {
    for kind in kinds() {
        equality(kind).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_token_is_checked_like_a_bearer_token() {
    for kind in kinds() {
        token_check(kind).await;
    }
}

async fn token_check(kind: Kind) {
    let broker = Broker::start(kind).await;
    let (mut sub, site, _) = rpc_site(&broker, "rpc-token", "require_token = true").await;

    let none = rpc(
        &mut sub,
        json!({"id": "t-1", "method": "GET", "path": "/devices"}),
    )
    .await;
    assert_eq!(
        (none["status"].as_u64(), none["body"]["code"].as_str()),
        (Some(401), Some("unauthorized"))
    );
    let wrong = rpc(
        &mut sub,
        json!({"id": "t-2", "method": "GET", "path": "/devices", "token": "sgt_nope"}),
    )
    .await;
    assert_eq!(wrong["status"], 401);
    let ok = rpc(
        &mut sub,
        json!({"id": "t-3", "method": "GET", "path": "/devices", "token": READ_TOKEN}),
    )
    .await;
    assert_eq!(ok["status"], 200, "{ok}");
    site.stop().await;
}

/// An answer over `mqtt.max_outgoing_kb` (a broker's message limit) is not
/// dropped: it is answered 413 with its size, the bound, and what to ask
/// instead; a smaller request on the same link is answered whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_brokers_message_limit_is_a_problem_that_says_so() {
    for kind in kinds() {
        answer_limit(kind).await;
    }
}

async fn answer_limit(kind: Kind) {
    let broker = Broker::start(kind).await;
    let (mut sub, site, _) = rpc_site(&broker, "rpc-limit", "max_outgoing_kb = 16").await;
    // The API document: well over 16 KiB.
    let big = rpc(
        &mut sub,
        json!({"id": "big-1", "method": "GET", "path": "/openapi.json"}),
    )
    .await;
    assert_eq!(big["status"], 413, "{big}");
    assert_eq!(big["body"]["code"], "payload_too_large", "{big}");
    let detail = big["body"]["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("mqtt.max_outgoing_kb") && detail.contains("16384 bytes"),
        "{detail}"
    );
    // Over HTTP the same request is answered whole: only the broker's bound
    // is in the way.
    let (status, whole) = site.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status, 200);
    assert!(whole.to_string().len() > 16 * 1024);
    // A small answer on the same link is whole.
    let small = rpc(
        &mut sub,
        json!({"id": "small-1", "method": "GET", "path": "/devices", "token": READ_TOKEN}),
    )
    .await;
    assert_eq!(small["status"], 200, "{small}");
    let metrics = reqwest::get(format!("{}/metrics", site.base))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics text");
    assert!(
        metrics.contains("sitegate_mqtt_answers_too_large_total 1\n"),
        "{metrics}"
    );
    site.stop().await;
}

/// A broker that says in its CONNACK it takes smaller messages than
/// `mqtt.max_outgoing_kb` (MQTT 5's Maximum Packet Size; mosquitto's
/// `max_packet_size`) bounds the answers instead, and the problem names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_brokers_maximum_packet_size_bounds_the_answers_too() {
    if !kinds().contains(&Kind::Mosquitto) {
        #[allow(clippy::print_stderr, reason = "a test run should say what it skipped")]
        {
            eprintln!("skipped: rumqttd says no Maximum Packet Size and no mosquitto is installed");
        }
        return;
    }
    let broker = Broker::mosquitto_with("max_packet_size 20000\n").await;
    let (mut sub, site, _) = rpc_site(&broker, "rpc-packet", "").await;
    let big = rpc(
        &mut sub,
        json!({"id": "packet-1", "method": "GET", "path": "/openapi.json"}),
    )
    .await;
    assert_eq!(big["status"], 413, "{big}");
    let detail = big["body"]["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("20000 bytes") && detail.contains("the broker's Maximum Packet Size"),
        "{detail}"
    );
    let small = rpc(
        &mut sub,
        json!({"id": "packet-2", "method": "GET", "path": "/devices", "token": READ_TOKEN}),
    )
    .await;
    assert_eq!(small["status"], 200, "{small}");
    site.stop().await;
}
