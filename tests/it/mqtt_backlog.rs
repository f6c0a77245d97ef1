//! The backlog an outage leaves, end to end with a broker: past the outbox's cap
//! the oldest telemetry goes first and the agent says how much (its counter and
//! its log), the rest arrives from just after the evicted part; and after a
//! reconnect the backlog drains at `drain_rate` while live telemetry keeps
//! flowing beside it.

use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

use crate::common::broker::{kinds, on_every_kind, Broker, Gate, Kind, Message, Subscriber};
use crate::common::logs;
use crate::common::mqtt::{self, mqtt_section, plain_url, site_config, uplink, ROOT};
use sitegate::model::{DeviceId, Property, Sample};

const T: Duration = Duration::from_secs(20);
/// Reconnecting after a closed gate may take a full backoff step (up to 60 s).
const RECONNECT: Duration = Duration::from_secs(90);
/// Polled once, then not for an hour: all telemetry is what the test sends.
const ONCE: u64 = 3_600_000;
const EVICTED: &str = "outbox over its cap: dropped the oldest telemetry";

fn measurements_filter() -> String {
    format!("{ROOT}/devices/+/measurements")
}

/// An `[mqtt]` section of `mqtt_section` with its backlog drained at
/// `rate` messages a second in place of the tests' 2,000.
fn at_rate(section: String, rate: u32) -> String {
    let section = section.replace("drain_rate = 2000", &format!("drain_rate = {rate}"));
    assert!(
        section.contains(&format!("drain_rate = {rate}\n")),
        "{section}"
    );
    section
}

fn seq(m: &Message) -> u64 {
    m.json()["seq"].as_u64().expect("seq")
}

/// One poll of the battery at `ts_ms`, values moving like a real device's.
fn poll(device: DeviceId, ts_ms: i64, i: i64) -> Vec<Sample> {
    let x = i as f64;
    [
        (Property::ActivePower, (x * 0.37).sin() * 4_800.0),
        (Property::ReactivePower, (x * 0.11).cos() * 900.0),
        (Property::Soc, 50.0 + (x * 0.01).sin() * 30.0),
        (Property::Frequency, 50.0 + (x * 0.7).sin() * 0.05),
        (Property::VoltageL1, 230.0 + (x * 0.3).cos() * 4.0),
        (Property::Temperature, 25.0 + (x * 0.05).sin() * 3.0),
        (Property::TotalEnergyProduced, 1_000_000.0 + x * 1.3),
        (Property::TotalEnergyConsumed, 2_000_000.0 + x * 1.1),
    ]
    .into_iter()
    .map(|(property, value)| Sample {
        device,
        property,
        ts_ms,
        value: (value * 100.0).round() / 100.0,
    })
    .collect()
}

async fn cap(kind: Kind) {
    let logs = logs::capture();
    let broker = Broker::start(kind).await;
    let gate = Gate::start(broker.addr("5")).await;
    gate.close();
    let mut sub = Subscriber::connect(broker.addr("5"), "watch-cap", &measurements_filter()).await;
    // The smallest cap the config takes. Its backlog (some 14,000 rows) is
    // sent at 20,000 a second: the drain's rate is not the subject here (the
    // test below is), and at the tests' 2,000 it took 7 s per broker.
    let section = at_rate(
        mqtt_section(&plain_url(gate.addr), "5", "outbox_max_mb = 1"),
        20_000,
    );
    let text = site_config(&section, ONCE);
    let site = mqtt::start(&text).await;
    site.ready().await;
    site.agent.store().flush().await.expect("flush");
    let up = uplink(&site);
    let polled = up.stats().last_seq;
    assert!(polled >= 3, "every device polled once: {:?}", up.stats());

    // Hours of battery polls while the broker is away, through the path the
    // bus tasks use: the simulated site alone would take many minutes to fill
    // a MiB.
    let mark = logs.mark();
    let telemetry = site.agent.telemetry();
    let bat = site.agent.live().find("dvc_bat").expect("the battery");
    let t0 = site.latest("dvc_bat", "soc").await.expect("polled").0 - 24 * 3_600_000;
    let mut sent = 0i64;
    while up.stats().evicted < 2_000 {
        for _ in 0..1_000 {
            telemetry
                .publish(bat, poll(bat, t0 + sent * 1_000, sent))
                .await;
            sent += 1;
        }
        site.agent.store().flush().await.expect("flush");
        assert!(
            sent < 100_000,
            "no eviction after {sent} polls: {:?}",
            up.stats()
        );
    }
    let stats = up.stats();
    let cap = up.outbox().cap();
    assert_eq!(stats.last_seq, polled + sent as u64, "{stats:?}");
    assert!(stats.bytes <= cap.max_bytes, "{stats:?} {cap:?}");
    assert_eq!(stats.rows + stats.evicted, stats.last_seq, "{stats:?}");
    // Oldest first: what is left starts right after the evicted part.
    let first = up.outbox().fetch(0, u64::MAX, 1).await.expect("fetch");
    assert_eq!(first[0].seq, stats.evicted + 1, "{stats:?}");
    // And the log says so at once, with the count. (The log is the test
    // binary's: the line of this outbox's cap, not another test's.)
    let line = logs
        .wait_for(mark, EVICTED, T, |e| {
            e["level"] == "WARN" && e["fields"]["max_bytes"].as_u64() == Some(cap.max_bytes)
        })
        .await;
    let f = &line["fields"];
    assert!(f["evicted"].as_u64().is_some_and(|n| n > 0), "{line}");
    assert_eq!(f["evicted_total"], f["evicted"], "the first line: {line}");

    // The broker comes back: every kept row arrives, starting right after the
    // evicted part, and nothing of that part.
    gate.reopen();
    mqtt::wait_connected(&site, true, RECONNECT).await;
    let mut got = BTreeSet::new();
    let first = sub.expect("the backlog", T, |_| true).await;
    assert_eq!(seq(&first), stats.evicted + 1);
    got.insert(seq(&first));
    // Its samples are those of the oldest poll that was kept.
    let kept = (stats.evicted - polled) as i64;
    let ts = first.json()["measurements"][0]["timestamp"].as_i64();
    assert_eq!(ts, Some(t0 + kept * 1_000), "{}", first.json());
    while got.len() < stats.rows as usize {
        let m = sub.expect("the backlog", T, |_| true).await;
        let s = seq(&m);
        assert!(
            s > stats.evicted && s <= stats.last_seq,
            "seq {s} arrived; evicted up to {}, last {}",
            stats.evicted,
            stats.last_seq
        );
        // (A row sent again after a lost connection may come twice.)
        got.insert(s);
    }

    // Every row evicted is counted once, by the counter and by the log lines
    // (at most one a minute; what a minute held back is said at shutdown at
    // the latest).
    site.stop().await;
    // (The log is the test binary's: only this outbox's cap counts;
    // mqtt_outbox evicts from small outboxes alongside.)
    let lines: Vec<_> = logs
        .messages(mark, EVICTED)
        .into_iter()
        .filter(|e| e["fields"]["max_bytes"].as_u64() == Some(cap.max_bytes))
        .collect();
    let logged: u64 = lines
        .iter()
        .map(|e| e["fields"]["evicted"].as_u64().expect("count"))
        .sum();
    let last = &lines.last().expect("a line")["fields"];
    assert_eq!(
        (logged, last["evicted_total"].as_u64()),
        (stats.evicted, Some(stats.evicted)),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_the_oldest_go_first_and_the_agent_says_how_many() {
    for kind in kinds() {
        cap(kind).await;
    }
}

/// Backlog messages a second the test configures.
const DRAIN_RATE: u32 = 40;

async fn drain(kind: Kind) {
    let broker = Broker::start(kind).await;
    let gate = Gate::start(broker.addr("5")).await;
    gate.close();
    let mut sub =
        Subscriber::connect(broker.addr("5"), "watch-drain", &measurements_filter()).await;
    let section = at_rate(mqtt_section(&plain_url(gate.addr), "5", ""), DRAIN_RATE);
    let site = mqtt::start(&site_config(&section, 200)).await;

    // Three devices at 5 Hz while the broker is away: a backlog of 150 or more
    // messages, several seconds' worth at the drain rate.
    crate::common::wait_for("a backlog", Duration::from_secs(60), || async {
        (uplink(&site).stats().last_seq >= 150).then_some(())
    })
    .await;
    let backlog = uplink(&site).stats().last_seq; // all of these are backlog
    gate.reopen();
    mqtt::wait_connected(&site, true, RECONNECT).await;
    let live_from = uplink(&site).stats().last_seq + 1; // all from here on are live

    let mut arrivals: Vec<(u64, Instant)> = Vec::new();
    let done = |a: &[(u64, Instant)]| {
        let old = a.iter().filter(|(s, _)| *s <= backlog).count() as u64;
        let new = a.iter().filter(|(s, _)| *s >= live_from).count();
        old >= backlog && new >= 20
    };
    while !done(&arrivals) {
        // A connection lost half-way is allowed (below); its reconnect waits
        // out the agent's backoff, up to a minute, as the first one did.
        let m = sub
            .expect("backlog and live telemetry", RECONNECT, |_| true)
            .await;
        // A message sent again after a lost connection counts where it came first.
        if arrivals.iter().all(|(s, _)| *s != seq(&m)) {
            arrivals.push((seq(&m), m.at));
        }
    }
    let old: Vec<_> = arrivals.iter().filter(|(s, _)| *s <= backlog).collect();
    let new: Vec<_> = arrivals.iter().filter(|(s, _)| *s >= live_from).collect();
    // Each stream in order, the backlog complete.
    let old_seqs: Vec<u64> = old.iter().map(|(s, _)| *s).collect();
    assert_eq!(old_seqs, (1..=backlog).collect::<Vec<_>>());
    assert!(new.windows(2).all(|w| w[1].0 > w[0].0), "{new:?}");

    // Live telemetry was not queued behind the backlog: plenty of it arrived
    // while the backlog was still draining.
    let drained_at = old.last().expect("backlog").1;
    let live_meanwhile = new.iter().filter(|(_, at)| *at < drained_at).count();
    assert!(
        live_meanwhile >= 5,
        "{live_meanwhile} live messages arrived before the backlog's last one"
    );

    // The backlog went no faster than the rate allows, give or take: the
    // pacer's burst (a tenth of a second) at the start, then at most
    // `DRAIN_RATE` a second, with twice that as margin for delivery jitter.
    // Sent without pacing, it would arrive in a fraction of a second.
    let window = drained_at.duration_since(old[0].1).as_secs_f64();
    let burst = f64::from(DRAIN_RATE) / 10.0;
    let allowed = burst + 1.0 + 2.0 * f64::from(DRAIN_RATE) * window;
    assert!(
        backlog as f64 <= allowed,
        "{backlog} backlog messages in {window:.2} s: faster than {DRAIN_RATE}/s"
    );
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_drains_at_its_rate_beside_live_telemetry() {
    on_every_kind(drain).await;
}
