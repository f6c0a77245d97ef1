//! Who may operate a gateway, decided by the broker: mosquitto with the
//! config lines and the ACL file exactly as docs/operations.md ("ACL
//! patterns") gives them, read from that page so the two cannot drift apart,
//! and a password file (`mosquitto_passwd -b`) with three identities: the
//! gateway (its user name is its `gateway_id`), the partner's backend
//! (`partner-cloud`) and the fleet's operators (`fleet-ops`). Through a
//! running agent:
//!
//! - a client without a user name is refused;
//! - the operator's `config.get` (the MQTT password redacted) and `logs` are
//!   answered on `ops/`, also on an MQTT 5 response topic under the gateway's
//!   root, and the audit history lists them;
//! - the partner's publishes to `ops/request` are refused by the broker
//!   (PUBACK 0x87) and never reach the agent: no answer, not in the audit
//!   history, not counted as requests; the partner's RPC requests are
//!   answered;
//! - the operator's publish to `rpc/request` is refused the same way;
//! - each identity receives only the topics the ACL lets it read (the
//!   operator no partner answer or telemetry, the partner no operation);
//! - no message either receives holds a password, a token or a token hash;
//! - the two things the page warns of: `pattern` lines apply to the cloud
//!   identities too, and an answer to a response topic outside the
//!   gateway's root is refused by the broker.
//!
//! mosquitto only (rumqttd has no ACL); skipped without it, or without
//! `mosquitto_passwd`, unless `SITEGATE_REQUIRE_MOSQUITTO=1`.

use std::time::Duration;

use reqwest::Method;
use rumqttc::v5::mqttbytes::v5::PubAckReason;
use serde_json::{json, Value};
use sitegate::api::hash_token;

use crate::common::broker::{kinds, mosquitto_password_file, Broker, Kind, Subscriber};
use crate::common::mqtt::{self, mqtt_section, plain_url, site_config, ROOT};
use crate::common::prom::scrape;
use crate::common::site::{ADMIN_TOKEN, READ_TOKEN, STEER_TOKEN};

const T: Duration = Duration::from_secs(20);
/// The gateway's broker identity: its user name is its `gateway_id` (the test
/// configs' `test`, root `sitegate/test`), as the ACL's `%u` patterns need.
const GATEWAY: (&str, &str) = ("test", "gw-pw-5f1c9a");
const PARTNER: (&str, &str) = ("partner-cloud", "partner-pw-82d0e4");
const OPERATOR: (&str, &str) = ("fleet-ops", "ops-pw-3b77a1");
/// How long a refused request is given to show up anyway (it must not).
const QUIET: Duration = Duration::from_secs(2);

/// The fenced blocks of docs/operations.md, "ACL patterns": mosquitto's
/// config lines (the one with `acl_file`) and its ACL file (the one with
/// `pattern`).
fn documented_mosquitto() -> (String, String) {
    let page = include_str!("../../docs/operations.md");
    let section = page
        .split_once("### ACL patterns")
        .expect("docs/operations.md has the section \"ACL patterns\"")
        .1;
    let section = section.split_once("\n## ").map_or(section, |(s, _)| s);
    let blocks: Vec<&str> = section
        .split("\n```")
        .skip(1)
        .step_by(2)
        .map(|b| b.strip_prefix('\n').unwrap_or(b))
        .collect();
    let find = |word: &str| {
        blocks
            .iter()
            .find(|b| b.lines().any(|l| l.starts_with(word)))
            .unwrap_or_else(|| panic!("no block with {word} in \"ACL patterns\": {blocks:?}"))
            .to_string()
    };
    let (conf, acl) = (find("acl_file "), find("pattern "));
    for user in [PARTNER.0, OPERATOR.0] {
        assert!(
            acl.lines().any(|l| l.trim() == format!("user {user}")),
            "the documented ACL names no user {user}:\n{acl}"
        );
    }
    (conf, acl)
}

/// Whether mosquitto lets a client without a user name connect.
async fn anonymous_admitted(addr: std::net::SocketAddr) -> bool {
    use rumqttc::v5::mqttbytes::v5::{ConnectReturnCode, Packet};
    use rumqttc::v5::{AsyncClient, ConnectionError, Event, MqttOptions};
    let options = MqttOptions::new("anonymous-1", addr.ip().to_string(), addr.port());
    let (_client, mut eventloop) = AsyncClient::new(options, 10);
    let outcome = tokio::time::timeout(T, async {
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(_))) => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("an answer to CONNECT");
    match outcome {
        Ok(()) => true,
        Err(ConnectionError::ConnectionRefused(ConnectReturnCode::NotAuthorized)) => false,
        Err(e) => panic!("an anonymous CONNECT: {e}"),
    }
}

fn ops_request(id: &str, body: Value) -> Value {
    json!({"id": id, "method": "POST", "path": "/admin/operations", "body": body})
}

/// Waits until `sub` has received a message on `topic`; returns its payload.
async fn answer(sub: &mut Subscriber, topic: &str) -> Value {
    if let Some(m) = sub.seen.iter().find(|m| m.topic == topic) {
        return m.json();
    }
    sub.expect(topic, T, |m| m.topic == topic).await.json()
}

/// The final state of operation `id` as published on `{ROOT}/ops/state/{id}`.
async fn final_state(sub: &mut Subscriber, id: &str) -> Value {
    let topic = format!("{ROOT}/ops/state/{id}");
    let done = |m: &crate::common::broker::Message| {
        m.topic == topic && matches!(m.json()["state"].as_str(), Some("succeeded" | "failed"))
    };
    if let Some(m) = sub.seen.iter().find(|m| done(m)) {
        return m.json();
    }
    sub.expect(&format!("the end of {id}"), T, done)
        .await
        .json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_lets_only_the_operators_operate() {
    if !kinds().contains(&Kind::Mosquitto) {
        return;
    }
    let Some(passwords) = mosquitto_password_file(&[GATEWAY, PARTNER, OPERATOR]) else {
        if crate::common::required("MOSQUITTO") {
            panic!("SITEGATE_REQUIRE_MOSQUITTO=1 but mosquitto_passwd is not installed");
        }
        #[allow(clippy::print_stderr, reason = "a test run should say what it skipped")]
        {
            eprintln!("mosquitto_passwd not installed: the ops ACL test is skipped");
        }
        return;
    };
    // The documented lines, with the files in the broker's directory.
    let (conf, acl) = documented_mosquitto();
    let conf = conf.replace("/etc/mosquitto/", "{dir}/");
    // mosquitto 2.0.11 drops a client right after denying its publish when
    // max_queued_messages is 0 (the suite's setting), see mqtt_refusal.
    let broker = Broker::mosquitto_files(
        &format!("max_queued_messages 100000\n{conf}\n"),
        &[("sitegate.acl", &acl), ("sitegate.passwd", &passwords)],
    )
    .await;
    let addr = broker.addr("5");
    assert!(
        !anonymous_admitted(addr).await,
        "an anonymous client admitted"
    );
    // Each cloud identity listens to everything: the ACL decides what arrives.
    let mut operator =
        Subscriber::connect_as(addr, "fleet-ops-1", Some(OPERATOR), "sitegate/#").await;
    let mut partner =
        Subscriber::connect_as(addr, "partner-cloud-1", Some(PARTNER), "sitegate/#").await;
    let mut counted = 0.0; // requests that may reach the agent

    let text = site_config(
        &mqtt_section(
            &plain_url(addr),
            "5",
            &format!("username = \"{}\"\npassword = \"{}\"", GATEWAY.0, GATEWAY.1),
        ),
        200,
    );
    let site = mqtt::start_from_file(&text).await;
    site.ready().await;
    mqtt::wait_connected(&site, true, T).await;

    // The operator operates: the running config (secrets redacted) and logs.
    let ops_topic = format!("{ROOT}/ops/request");
    let rpc_topic = format!("{ROOT}/rpc/request");
    let ack = operator
        .request_acked(
            &ops_topic,
            &ops_request("op-config-1", json!({"kind": "config.get"})),
            None,
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);
    counted += 1.0;
    let a = answer(&mut operator, &format!("{ROOT}/ops/response/op-config-1")).await;
    assert!(
        [200, 202].contains(&a["status"].as_u64().unwrap_or(0)),
        "{a}"
    );
    let done = final_state(&mut operator, "op-config-1").await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        done["source"],
        json!({"transport": "mqtt", "caller": "mqtt"})
    );
    let redacted = done["result"]["redacted"].as_array().expect("redacted");
    assert!(redacted.contains(&json!("mqtt.password")), "{done}");
    let toml = done["result"]["toml"].as_str().expect("toml");
    assert!(
        toml.contains(&format!("username = \"{}\"", GATEWAY.0)),
        "{toml}"
    );
    let ack = operator
        .request_acked(
            &ops_topic,
            &ops_request(
                "op-logs-1",
                json!({"kind": "logs", "args": {"lines": 200, "level": "debug"}}),
            ),
            None,
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);
    counted += 1.0;
    assert_eq!(
        final_state(&mut operator, "op-logs-1").await["state"],
        "succeeded"
    );
    // An MQTT 5 response topic under the gateway's root, where the operator
    // reads: the answer goes there, with its correlation data.
    let mine = format!("{ROOT}/ops/response/mine");
    let ack = operator
        .request_acked(
            &ops_topic,
            &ops_request("op-logs-2", json!({"kind": "logs"})),
            Some((&mine, b"corr-2")),
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);
    counted += 1.0;
    let m = operator.expect(&mine, T, |m| m.topic == mine).await;
    assert_eq!(m.correlation.as_deref(), Some(&b"corr-2"[..]));
    assert_eq!(m.json()["id"], "op-logs-2");

    // The partner's RPC request is answered; its operation is refused by the
    // broker and never reaches the agent.
    let ack = partner
        .request_acked(
            &rpc_topic,
            &json!({"id": "partner-rpc-1", "method": "GET", "path": "/devices"}),
            None,
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);
    counted += 1.0;
    let a = answer(&mut partner, &format!("{ROOT}/rpc/response/partner-rpc-1")).await;
    assert_eq!(a["status"], 200, "{a}");
    assert_eq!(a["body"].as_array().map(Vec::len), Some(3), "{a}");
    for (id, kind) in [("partner-ops-1", "logs"), ("partner-ops-2", "restart")] {
        let ack = partner
            .request_acked(&ops_topic, &ops_request(id, json!({"kind": kind})), None)
            .await;
        assert_eq!(ack, PubAckReason::NotAuthorized, "{id}");
    }
    // Nor with an MQTT 5 response topic the partner may read.
    let ack = partner
        .request_acked(
            &ops_topic,
            &ops_request("partner-ops-3", json!({"kind": "config.get"})),
            Some((&format!("{ROOT}/rpc/response/partner-ops-3"), b"c3")),
        )
        .await;
    assert_eq!(ack, PubAckReason::NotAuthorized);

    // Pattern lines apply to every user (docs/operations.md says why no
    // gateway may be named after a cloud identity).
    let ack = partner
        .request_acked(
            &format!("sitegate/{}/ops/request", PARTNER.0),
            &ops_request("partner-self-1", json!({"kind": "logs"})),
            None,
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);

    // The operator's request on the partner's RPC topic: refused too.
    let ack = operator
        .request_acked(
            &rpc_topic,
            &json!({"id": "op-rpc-1", "method": "POST", "path": "/sites/ste_test/steering",
                    "body": {"energyStorageSetting": {"value": 1, "unit": "kW"}}}),
            None,
        )
        .await;
    assert_eq!(ack, PubAckReason::NotAuthorized);

    // After the refusals, one more request from each: once both are answered,
    // anything the broker had let through would have arrived before them.
    let ack = operator
        .request_acked(
            &ops_topic,
            &json!({"id": "op-history-1", "method": "GET", "path": "/admin/operations?limit=1000"}),
            None,
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);
    counted += 1.0;
    let history = answer(&mut operator, &format!("{ROOT}/ops/response/op-history-1")).await;
    assert_eq!(history["status"], 200, "{history}");
    let ack = partner
        .request_acked(
            &rpc_topic,
            &json!({"id": "partner-rpc-2", "method": "GET", "path": "/sites/ste_test/steering/history"}),
            None,
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);
    counted += 1.0;
    let steering = answer(&mut partner, &format!("{ROOT}/rpc/response/partner-rpc-2")).await;
    assert_eq!(steering["status"], 200, "{steering}");
    // And QUIET more with the real broker: a refused request that reached the
    // agent after all would be counted below by then.
    tokio::time::sleep(QUIET).await;
    operator.drain();
    partner.drain();

    // The agent heard exactly the requests the ACL let through.
    let m = scrape(&site.http, &site.base).await;
    assert_eq!(m.get("sitegate_mqtt_rpc_requests_total"), Some(counted));
    let ids = |history: &Value| -> Vec<String> {
        history
            .as_array()
            .expect("the audit history")
            .iter()
            .filter_map(|o| o["id"].as_str().map(str::to_string))
            .collect()
    };
    let (status, audit) = site
        .call(
            Method::GET,
            "/admin/operations?limit=1000",
            Some(ADMIN_TOKEN),
            None,
        )
        .await;
    assert_eq!(status, 200, "{audit}");
    for listed in [ids(&history["body"]), ids(&audit)] {
        assert!(
            listed.contains(&"op-config-1".to_string())
                && listed.contains(&"op-logs-1".to_string()),
            "{listed:?}"
        );
        assert!(
            !listed.iter().any(|id| id.starts_with("partner-")),
            "a refused operation in the audit history: {listed:?}"
        );
    }
    // Each identity received only what the ACL lets it read (both also the
    // partner's request on `sitegate/partner-cloud/`, a gateway's ops topic
    // by the patterns), and no answer to a refused request.
    let partner_self = format!("sitegate/{}/ops/request", PARTNER.0);
    for m in operator.seen.iter().filter(|m| m.topic != partner_self) {
        let rest = m.topic.strip_prefix(&format!("{ROOT}/")).unwrap_or("");
        assert!(
            rest.starts_with("ops/") || rest == "status",
            "the operator received {}",
            m.topic
        );
    }
    for m in partner.seen.iter().filter(|m| m.topic != partner_self) {
        let rest = m.topic.strip_prefix(&format!("{ROOT}/")).unwrap_or("");
        assert!(
            rest.starts_with("rpc/response/")
                || rest == "status"
                || rest == "devices"
                || rest.starts_with("devices/")
                || rest.starts_with("sites/"),
            "the partner received {}",
            m.topic
        );
    }
    for seen in [&operator.seen, &partner.seen] {
        assert!(
            !seen.iter().any(|m| m.topic.contains("/partner-ops-")
                || m.topic.ends_with("/op-rpc-1")
                || String::from_utf8_lossy(&m.payload).contains("partner-ops-")),
            "an answer to a refused request"
        );
    }
    for what in ["status", "devices", "sites/ste_test/steering"] {
        let topic = format!("{ROOT}/{what}");
        assert!(
            partner.seen.iter().any(|m| m.topic == topic),
            "the partner did not receive {topic}"
        );
    }
    assert!(partner
        .seen
        .iter()
        .any(|m| m.topic.starts_with(&format!("{ROOT}/devices/"))));

    // No secret in anything received: passwords, tokens, token hashes, the
    // broker's password hashes.
    let mut secrets: Vec<String> = [GATEWAY.1, PARTNER.1, OPERATOR.1]
        .into_iter()
        .map(str::to_string)
        .collect();
    for token in [READ_TOKEN, STEER_TOKEN, ADMIN_TOKEN] {
        secrets.push(token.to_string());
        secrets.push(hex::encode(hash_token(token)));
    }
    secrets.extend(
        passwords
            .lines()
            .filter_map(|l| l.split_once(':').map(|(_, h)| h.to_string())),
    );
    let received = operator
        .seen
        .iter()
        .chain(&partner.seen)
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .chain([audit.to_string()]);
    let mut count = 0;
    for text in received {
        count += 1;
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret in an answer: {text}"
            );
        }
    }
    assert!(count > 10, "{count} messages");

    // A response topic outside the gateway's root: the broker refuses the
    // answer (counted as a refused publish; not sent again).
    let ack = operator
        .request_acked(
            &ops_topic,
            &ops_request("op-logs-3", json!({"kind": "logs"})),
            Some(("fleet/replies/op-logs-3", b"corr-3")),
        )
        .await;
    assert_eq!(ack, PubAckReason::Success);
    crate::common::wait_for("the answer refused by the broker", T, || async {
        let m = scrape(&site.http, &site.base).await;
        (m.sum(
            "sitegate_mqtt_publishes_refused_total",
            &[("reason", "not_authorized")],
        ) >= 1.0)
            .then_some(())
    })
    .await;
    site.stop().await;
}
