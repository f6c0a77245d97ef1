//! Modbus RTU end to end over a pseudo-terminal pair: the agent opens the pty's
//! slave end like a USB RS-485 adapter, the simulated line answers on the
//! master end. Two devices share the line, a third configured one is silent
//! (its cost stays bounded by its timeout), and answers with a bad CRC are
//! survived. The configured baud rate and stop bits reach the serial port.

use std::time::Duration;

use sitegate::agent::Agent;
use sitegate::config::parse;
use sitegate::model::Property;
use sitegate::sim::{SimDeviceSpec, SimKind, SimRtuLine};
use tokio_serial::SerialPort;

use crate::common::wait_for;

fn config(path: &str, dir: &std::path::Path) -> String {
    format!(
        r#"
gateway_id = "rtu-test"
[http]
listen = ["127.0.0.1:0"]
auth = "none"
[storage]
path = "{}/db.sqlite"
[polling]
min_backoff_ms = 200
max_backoff_ms = 400

[[sites]]
reference = "ste_a"
name = "A"

[[buses]]
name = "rs485"
rtu = {{ path = "{path}", baud = 19200, parity = "even", data_bits = 8, stop_bits = 1 }}
timeout_ms = 250

[[devices]]
reference = "dvc_pv"
name = "PV"
type = "inverter"
site = "ste_a"
bus = "rs485"
unit_id = 1
poll_interval_ms = 200

[[devices]]
reference = "dvc_bat"
name = "Battery"
type = "battery"
site = "ste_a"
bus = "rs485"
unit_id = 2
poll_interval_ms = 200

[[devices]]
reference = "dvc_gone"
name = "Gone"
type = "meter"
site = "ste_a"
bus = "rs485"
unit_id = 9
poll_interval_ms = 200
"#,
        dir.display()
    )
}

fn spec(unit_id: u8, kind: SimKind) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind,
        serial: format!("RTU-{unit_id}"),
        refuse_writes: false,
        sunspec_base: 40000,
        response: sitegate::sim::SimResponse::IDEAL,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_devices_share_a_line_with_a_silent_third() {
    let (master, slave) = tokio_serial::SerialStream::pair().expect("pty pair");
    let path = slave.name().expect("pty slave path");
    let line = SimRtuLine::start(
        master,
        &[
            spec(1, SimKind::Inverter { rated_w: 8000.0 }),
            spec(
                2,
                SimKind::Battery {
                    rated_w: 5000.0,
                    capacity_wh: 10_000.0,
                    initial_soc: 42.0,
                    soc_min: 5.0,
                    soc_max: 95.0,
                },
            ),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = parse(&config(&path, dir.path())).expect("config");
    let agent = Agent::start(cfg).await.expect("agent");
    let live = agent.live().clone();
    let (pv, bat, gone) = (
        live.find("dvc_pv").unwrap(),
        live.find("dvc_bat").unwrap(),
        live.find("dvc_gone").unwrap(),
    );

    wait_for(
        "both devices read over RTU",
        Duration::from_secs(10),
        || async {
            let soc = live.latest(bat, Property::Soc)?;
            live.latest(pv, Property::Frequency)?;
            Some(soc)
        },
    )
    .await;
    assert_eq!(live.latest(bat, Property::Soc).unwrap().value, 42.0);
    let snap = live.snapshot(pv);
    assert_eq!(snap.info.manufacturer.as_deref(), Some("sitegate"));
    assert_eq!(snap.info.serial.as_deref(), Some("RTU-1"));
    assert!(!live.snapshot(gone).online, "nobody answers unit 9");

    // The silent unit costs at most one timeout per attempt: the others keep
    // being polled every few hundred milliseconds.
    let t0 = live.latest(pv, Property::Frequency).unwrap().ts_ms;
    let mut seen = vec![t0];
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t = live.latest(pv, Property::Frequency).unwrap().ts_ms;
        if Some(&t) != seen.last() {
            seen.push(t);
        }
    }
    let gaps: Vec<i64> = seen.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(seen.len() >= 5, "PV polls in 3 s: {seen:?}");
    assert!(
        gaps.iter().all(|g| *g <= 200 + 2 * 250 + 500),
        "a poll waits at most for the silent unit's timeout: {gaps:?}"
    );

    // Answers with a broken CRC: polls fail, then the line recovers.
    line.corrupt_next(4);
    wait_for("a failed poll", Duration::from_secs(5), || async {
        (!live.snapshot(pv).online || !live.snapshot(bat).online).then_some(())
    })
    .await;
    let after = live.latest(pv, Property::Frequency).unwrap().ts_ms;
    wait_for(
        "recovery after CRC errors",
        Duration::from_secs(10),
        || async {
            let fresh = live.latest(pv, Property::Frequency)?.ts_ms > after
                && live.latest(bat, Property::Soc)?.ts_ms > after;
            (fresh && live.snapshot(pv).online && live.snapshot(bat).online).then_some(())
        },
    )
    .await;
    let err = live.snapshot(gone).last_error.unwrap_or_default();
    assert!(err.contains("no answer within 250 ms"), "{err}");

    agent.shutdown().await;
    line.stop().await;
    drop(slave);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_finds_devices_on_a_serial_line() {
    use sitegate::config::{Parity, RtuConfig, Transport};
    use sitegate::modbus::{link::Port, scan};

    let (master, slave) = tokio_serial::SerialStream::pair().expect("pty pair");
    let path = slave.name().expect("pty slave path");
    let line = SimRtuLine::start(
        master,
        &[
            spec(2, SimKind::Meter),
            spec(5, SimKind::Inverter { rated_w: 3000.0 }),
        ],
    );
    let transport = Transport::Rtu(RtuConfig {
        path: path.into(),
        baud: 38_400,
        parity: Parity::None,
        data_bits: 8,
        stop_bits: 1,
    });
    let mut port = Port::new(transport.clone(), Duration::from_millis(200));
    let found = scan::scan(&mut port, &[1, 2, 3, 4, 5], |_| ()).await;
    let units: Vec<u8> = found.iter().map(|f| f.unit).collect();
    assert_eq!(units, [2, 5]);
    assert_eq!(found[0].devices[0].models, [1, 203]);
    assert_eq!(found[1].devices[0].info.serial.as_deref(), Some("RTU-5"));
    let snippet = scan::snippet("rs485", &transport, 1000, &found, "ste_a");
    assert!(snippet.contains("baud = 38400"), "{snippet}");
    assert!(snippet.contains("unit_id = 5"), "{snippet}");
    line.stop().await;
    drop(slave);
}

/// Baud rate and stop bits change nothing on a pseudo-terminal, but they must
/// reach the port: the bus sets them on the tty when it opens the line, and
/// the pty's slave side reports them back (termios belongs to the tty, so the
/// test's own handle on it sees what the agent set). Parity and data bits
/// cannot be checked this way: Linux's pty driver forces CS8 without parity
/// on every tcsetattr (`pty_set_termios`), whatever the caller asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_baud_rate_and_stop_bits_reach_the_serial_port() {
    use tokio_serial::StopBits;

    let (master, slave) = tokio_serial::SerialStream::pair().expect("pty pair");
    let path = slave.name().expect("pty slave path");
    let settings = |p: &tokio_serial::SerialStream| {
        (
            p.baud_rate().expect("baud rate"),
            p.stop_bits().expect("stop bits"),
        )
    };
    let wanted = (4800, StopBits::Two);
    let before = settings(&slave);
    assert_ne!(before.0, wanted.0, "the pty starts at another baud rate");
    assert_ne!(before.1, wanted.1, "the pty starts with one stop bit");

    let line = SimRtuLine::start(master, &[spec(1, SimKind::Meter)]);
    let dir = tempfile::tempdir().unwrap();
    let text = config(&path, dir.path()).replace(
        "baud = 19200, parity = \"even\", data_bits = 8, stop_bits = 1",
        "baud = 4800, parity = \"even\", data_bits = 8, stop_bits = 2",
    );
    assert!(text.contains("baud = 4800"), "the bus line was rewritten");
    let agent = Agent::start(parse(&text).expect("config"))
        .await
        .expect("agent");
    wait_for(
        "the bus to open the line with its settings",
        Duration::from_secs(10),
        || async { (settings(&slave) == wanted).then_some(()) },
    )
    .await;

    agent.shutdown().await;
    line.stop().await;
    drop(slave);
}
