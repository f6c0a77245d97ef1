//! CSIP-AUS telemetry (ALL-06, ALL-10, ALL-29, STO-01): mirrors for the
//! connection point (03) and the DER (49), readings of power, reactive
//! power, voltage and stored energy averaged over each post interval,
//! aligned to it, scaled by their powers of ten, at the server's postRate.

use std::time::Duration;

use crate::common::csip_server::{until, CsipServer};
use crate::csip_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_06_readings_of_the_site_and_the_der_at_the_post_rate() {
    let server = CsipServer::start(1).await;
    server.with(|s| s.rates.mup_post = 2);
    let rig = rig(&server).await;
    rig.sim.set_load(Some(6_000.0));
    rig.sim.set_sun(Some(0.0));
    until(&server, "four site power readings", WAIT, |s| {
        s.readings(0x03, 38).len() >= 4
    })
    .await;
    until(&server, "DER power and stored energy", WAIT, |s| {
        s.readings(0x49, 38).len() >= 2 && s.readings(0x49, 72).len() >= 2
    })
    .await;
    let (lfdi, _) = server.client_identity();
    server.with(|s| {
        assert_eq!(s.mirrors.len(), 2);
        for m in &s.mirrors {
            assert!(m.mrid.ends_with("00012345"), "{}", m.mrid);
            assert_eq!(m.lfdi, lfdi);
        }
    });
    for (role, uom) in [(0x03, 38), (0x03, 63), (0x03, 29), (0x49, 38), (0x49, 63)] {
        let r = server.readings(role, uom);
        assert!(!r.is_empty(), "role {role:02X} uom {uom}");
        for x in &r {
            assert_eq!(x.start_s % 2, 0, "aligned to the interval: {x:?}");
            assert!(x.duration_s >= 1 && x.duration_s <= 2, "{x:?}");
        }
    }
    // The site imports what the batteries do not cover; its average is the
    // meter's over the interval (within the noise of a moving site).
    let last = server.readings(0x03, 38).last().cloned().unwrap();
    let meter = grid_w(&rig);
    assert!(
        (last.value - meter).abs() < 3_000.0,
        "reading {last:?}, meter {meter}"
    );
    let volts = server.readings(0x03, 29);
    assert!(
        volts.iter().all(|v| (180.0..280.0).contains(&v.value)),
        "{volts:?}"
    );
    let stored = server.readings(0x49, 72).last().cloned().unwrap();
    assert!((1_000.0..=60_000.0).contains(&stored.value), "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_10_a_new_post_rate_is_taken_up_at_once() {
    let server = CsipServer::start(1).await;
    server.with(|s| s.rates.mup_post = 6);
    let _rig = rig(&server).await;
    until(&server, "a 6 s reading", Duration::from_secs(30), |s| {
        s.readings(0x03, 38).iter().any(|r| r.duration_s == 6)
    })
    .await;
    server.with(|s| s.rates.mup_post = 2);
    let n = server.readings(0x03, 38).len();
    until(&server, "2 s readings", WAIT, |s| {
        s.readings(0x03, 38)[n..]
            .iter()
            .filter(|r| r.duration_s == 2)
            .count()
            >= 2
    })
    .await;
}
