//! Servers going away and coming back, devices refusing writes, write events,
//! request numbering and held reads, shutdown.

use std::time::Duration;

use sunspec::models::model123::Model123;
use sunspec::models::model124::Model124;
use tokio::sync::broadcast::error::TryRecvError;

use super::*;

#[tokio::test]
async fn a_stopped_server_drops_connections_and_returns_on_the_same_port() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    assert_ne!(addr.port(), 0, "the ephemeral port is reported");
    let mut peer = Peer::connect(addr, METER).await;
    assert!(peer.read(40000, 2).await.is_ok());

    site.stop_server("sim").await;
    assert!(
        peer.try_read(40000, 2).await.is_err(),
        "open connection dropped"
    );
    let refused = tokio_modbus::client::tcp::connect_slave(addr, Slave(METER)).await;
    assert!(refused.is_err(), "listener closed");
    site.stop_server("sim").await; // already stopped: no-op

    site.start_server("sim").await.unwrap();
    site.start_server("sim").await.unwrap(); // already running: no-op
    assert_eq!(site.addr("sim"), Some(addr));
    let mut peer = Peer::connect(addr, METER).await;
    assert_eq!(peer.read(40000, 2).await, Ok(vec![0x5375, 0x6E53]));
    assert!(site.start_server("nope").await.is_err());
    site.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_listeners_and_connections() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    let mut peer = Peer::connect(addr, INVERTER).await;
    site.shutdown().await;
    assert!(peer.try_read(40000, 2).await.is_err());
    assert!(tokio_modbus::client::tcp::connect_slave(addr, Slave(1))
        .await
        .is_err());
}

#[tokio::test]
async fn refusing_devices_answer_exception_4_and_every_write_is_reported() {
    let mut refusing = inverter(INVERTER);
    refusing.refuse_writes = true;
    let devices = vec![refusing, battery(BATTERY, 50.0)];
    let site = SimSite::start(site_spec(devices, NOON, 1.0)).await.unwrap();
    let addr = site.addr("sim").unwrap();
    let mut writes = site.subscribe_writes();

    let mut inv = Peer::connect(addr, INVERTER).await;
    let pct = 40184 + Model123::W_MAX_LIM_PCT.offset;
    assert_eq!(
        inv.write1(pct, 5000).await,
        Err(ExceptionCode::ServerDeviceFailure)
    );
    assert_eq!(
        inv.read(pct, 1).await,
        Ok(vec![10000]),
        "refused writes change nothing"
    );

    let mut bat = Peer::connect(addr, BATTERY).await;
    let mode = 40255 + Model124::STOR_CTL_MOD.offset;
    assert_eq!(bat.write1(mode, 0).await, Ok(()));
    assert_eq!(
        bat.write(40000, &[1, 2]).await,
        Err(ExceptionCode::IllegalDataAddress)
    );
    let handle = site.device("sim", BATTERY).unwrap();
    handle.set_refuse_writes(true);
    assert_eq!(
        bat.write1(mode, 1).await,
        Err(ExceptionCode::ServerDeviceFailure)
    );
    handle.set_refuse_writes(false);
    assert_eq!(bat.write1(mode, 0).await, Ok(()));

    let expected = [
        (
            INVERTER,
            pct,
            vec![5000],
            Some(ExceptionCode::ServerDeviceFailure),
        ),
        (BATTERY, mode, vec![0], None),
        (
            BATTERY,
            40000,
            vec![1, 2],
            Some(ExceptionCode::IllegalDataAddress),
        ),
        (
            BATTERY,
            mode,
            vec![1],
            Some(ExceptionCode::ServerDeviceFailure),
        ),
        (BATTERY, mode, vec![0], None),
    ];
    let mut last = None;
    for (unit, address, values, exception) in expected {
        let e = writes.try_recv().unwrap();
        assert_eq!(e.server, "sim");
        assert_eq!(
            (e.unit_id, e.address, e.values, e.exception),
            (unit, address, values, exception)
        );
        assert!(last.is_none_or(|t| t <= e.at));
        last = Some(e.at);
    }
    assert_eq!(
        writes.try_recv(),
        Err(TryRecvError::Empty),
        "reads are not reported"
    );
    assert!(site.device("sim", 9).is_none());
    assert!(site.device("other", BATTERY).is_none());
    site.shutdown().await;
}

#[tokio::test]
async fn requests_are_numbered_and_reads_can_be_held() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    let mut writes = site.subscribe_writes();
    let mode = 40255 + Model124::STOR_CTL_MOD.offset;
    let mut bat = Peer::connect(addr, BATTERY).await;
    let before = site.request_count("sim").unwrap();
    assert!(bat.read(40000, 2).await.is_ok());
    assert_eq!(bat.write1(mode, 0).await, Ok(()));
    assert_eq!(writes.try_recv().unwrap().seq, before + 1, "after the read");
    assert_eq!(site.request_count("sim"), Some(before + 2));

    // A held read waits unanswered; a write on another connection goes
    // through meanwhile and is numbered first.
    assert!(site.hold_reads("sim", true));
    let mut reader = Peer::connect(addr, METER).await;
    let read = tokio::spawn(async move { reader.read(40000, 2).await });
    for _ in 0..2000 {
        if site.held_reads("sim") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(site.held_reads("sim"), 1, "the read is held");
    assert_eq!(bat.write1(mode, 0).await, Ok(()));
    assert_eq!(writes.try_recv().unwrap().seq, before + 2);
    assert!(!read.is_finished(), "the held read is not answered");
    assert!(site.hold_reads("sim", false));
    assert_eq!(read.await.unwrap(), Ok(vec![0x5375, 0x6E53]));
    assert_eq!(site.held_reads("sim"), 0);
    assert_eq!(site.request_count("sim"), Some(before + 4));
    assert!(!site.hold_reads("nope", true));
    assert_eq!(site.request_count("nope"), None);
    site.shutdown().await;
}

#[tokio::test]
async fn bad_specs_are_refused() {
    let twice = vec![meter(1), meter(1)];
    let err = SimSite::start(site_spec(twice, NOON, 1.0))
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);

    // A port already taken is a bind error naming the server.
    let site = standard_site(NOON, 1.0).await;
    let mut spec = site_spec(vec![meter(1)], NOON, 1.0);
    spec.servers[0].listen = site.addr("sim").unwrap();
    let err = SimSite::start(spec).await.err().unwrap();
    assert!(err.to_string().contains("\"sim\""), "{err}");
    site.shutdown().await;
}

#[tokio::test]
async fn dropping_a_site_stops_its_servers() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    drop(site);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(tokio_modbus::client::tcp::connect_slave(addr, Slave(1))
        .await
        .is_err());
}
