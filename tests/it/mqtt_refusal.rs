//! A broker that refuses publishes (MQTT 5 PUBACK 0x87, not authorized) for a
//! while, then accepts them again: no sequence number is lost, the refused rows
//! wait in the outbox, the log names the refused topic and reason once, the
//! metrics show "connected but refused", and the retained status and listing
//! are there again once the broker accepts.
//!
//! mosquitto refuses through its ACL file, changed and reloaded with SIGHUP.
//! rumqttd has no ACL and acknowledges every publish, so it cannot refuse one:
//! the test runs against mosquitto only and says so. With MQTT 3.1.1 no broker
//! can refuse a publish (mosquitto acknowledges and drops what its ACL denies):
//! docs/mqtt.md says why MQTT 5 is the default.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::broker::{kinds, Broker, Kind, Message, Subscriber};
use crate::common::logs;
use crate::common::mqtt::{self, mqtt_section, plain_url, site_config, uplink, ROOT};
use crate::common::prom::scrape;

const T: Duration = Duration::from_secs(60);
/// After the ACL allows again, the next retry may be a whole backoff window
/// (at most 60 s) away.
const RETRY: Duration = Duration::from_secs(150);
const DENY: &str = "topic read #\n";
const ALLOW: &str = "topic readwrite #\n";
const REFUSED_LOG: &str = "MQTT broker refuses publishes; refused telemetry stays in the outbox and is sent again after a backoff";

/// A log line about this gateway's topics: the log is the test binary's, and
/// mqtt_ops_acl, running alongside, has an answer refused outside them.
fn ours(e: &serde_json::Value) -> bool {
    e["fields"]["topic"]
        .as_str()
        .is_some_and(|t| t.starts_with(&format!("{ROOT}/")))
}

fn seq(m: &Message) -> Option<u64> {
    m.topic
        .ends_with("/measurements")
        .then(|| m.json()["seq"].as_u64().expect("seq"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_that_refuses_then_allows_loses_no_sequence_number() {
    if !kinds().contains(&Kind::Mosquitto) {
        #[allow(clippy::print_stderr, reason = "a test run should say what it skipped")]
        {
            eprintln!(
                "mqtt_refusal: skipped: rumqttd cannot refuse a publish (no ACL) and no mosquitto is installed"
            );
        }
        return;
    }
    let logs = logs::capture();
    // mosquitto 2.0.11 drops a client right after denying its publish when
    // max_queued_messages is 0 (the suite's setting for the backlog tests).
    let broker = Broker::mosquitto_files(
        "max_queued_messages 100000\nacl_file {dir}/acl\n",
        &[("acl", DENY)],
    )
    .await;
    let mut watch = Subscriber::connect(broker.addr("5"), "watch-acl", &format!("{ROOT}/#")).await;
    let mark = logs.mark();
    let site = mqtt::start(&site_config(
        &mqtt_section(&plain_url(broker.addr("5")), "5", ""),
        200,
    ))
    .await;

    // Refused: connected, nothing delivered, rows pile up in the outbox.
    mqtt::wait_connected(&site, true, T).await;
    // The line names a topic of this gateway and the reason.
    logs.wait_for(mark, REFUSED_LOG, T, |e| {
        e["fields"]["reason"] == "not_authorized" && ours(e)
    })
    .await;
    crate::common::wait_for("refused rows kept in the outbox", T, || async {
        (uplink(&site).stats().rows >= 10).then_some(())
    })
    .await;
    let m = scrape(&site.http, &site.base).await;
    assert_eq!(m.get("sitegate_mqtt_connected"), Some(1.0));
    assert_eq!(m.get("sitegate_mqtt_refusing"), Some(1.0));
    assert!(
        m.sum(
            "sitegate_mqtt_publishes_refused_total",
            &[("reason", "not_authorized")]
        ) >= 1.0
    );
    let stats = uplink(&site).stats();
    assert_eq!(stats.rows, stats.last_seq, "nothing deleted: {stats:?}");
    assert_eq!(
        m.get("sitegate_mqtt_telemetry_acked_total"),
        Some(0.0),
        "a refusal is not an acknowledgement"
    );

    // Allowed again: everything from seq 1 arrives, the outbox empties, and the
    // retained status and listing are republished.
    broker.reload_with("acl", ALLOW);
    let upto = uplink(&site).stats().last_seq;
    let mut got = BTreeSet::new();
    while !(1..=upto).all(|s| got.contains(&s)) {
        let m = watch
            .expect(&format!("every seq up to {upto}"), RETRY, |m| {
                seq(m).is_some()
            })
            .await;
        got.extend(seq(&m));
    }
    let online = |m: &Message| m.topic == format!("{ROOT}/status") && m.json()["online"] == true;
    let listing = |m: &Message| m.topic == format!("{ROOT}/devices");
    for (what, pred) in [
        ("the status again", &online as &dyn Fn(&Message) -> bool),
        ("the listing again", &listing),
    ] {
        if !watch.seen.iter().any(pred) {
            watch.expect(what, T, pred).await;
        }
    }
    logs.wait_for(mark, "MQTT broker accepts publishes again", T, |_| true)
        .await;
    // Acknowledged rows go with the next commit; in steady state the outbox
    // holds a poll's worth of rows, so count the refused ones on disk.
    let db = site.dir.path().join("sitegate.db");
    crate::common::wait_for("the delivered rows deleted", T, || async {
        let left: i64 = rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row(
                    "SELECT count(*) FROM uplink_outbox WHERE seq <= ?1",
                    [i64::try_from(upto).expect("seq fits i64")],
                    |r| r.get(0),
                )
            })
            .expect("read the outbox");
        (left == 0).then_some(())
    })
    .await;
    let m = scrape(&site.http, &site.base).await;
    assert_eq!(m.get("sitegate_mqtt_refusing"), Some(0.0));
    let acked = m.get("sitegate_mqtt_telemetry_acked_total").expect("acked");
    assert!(acked >= upto as f64, "{acked} < {upto}");
    // One line for the whole spell, however many publishes were refused.
    let lines: Vec<_> = logs
        .messages(mark, REFUSED_LOG)
        .into_iter()
        .filter(ours)
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    site.stop().await;
}
