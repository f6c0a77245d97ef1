//! CSIP-AUS discovery and registration against a 2030.5 server over TLS
//! (CCM_8, client certificates), each test a CACTUS client procedure:
//! ALL-01 to ALL-05, ALL-09 and ALL-10.

use std::time::Duration;

use axum::http::Method;

use crate::common::csip_server::{until, CsipServer};
use crate::steering_support::*;

/// The demo site and its `[csip_aus]` table for `server`.
pub async fn rig(server: &CsipServer, pin: Option<u32>) -> Rig {
    Rig::start(&format!("{}{}", demo_site(250), server.table(SITE, pin))).await
}

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_01_discovery_finds_the_end_device_registered_out_of_band() {
    let server = CsipServer::start(60).await;
    server.register(111_115);
    let _rig = rig(&server, Some(111_115)).await;
    until(&server, "GET of the DER list", WAIT, |s| {
        s.paths(Method::GET).contains(&"/edev/1/der".to_string())
    })
    .await;
    let gets = server.paths(Method::GET);
    assert_eq!(gets[0], "/dcap", "the DeviceCapability first: {gets:?}");
    for p in ["/tm", "/edev", "/edev/1/rg", "/edev/1/fsa", "/mup"] {
        assert!(gets.contains(&p.to_string()), "{p} in {gets:?}");
    }
    assert!(
        !server.paths(Method::POST).contains(&"/edev".to_string()),
        "registered out of band: no POST of an EndDevice"
    );
    // The NMI went to the ConnectionPoint (ALL-03).
    until(&server, "the NMI", WAIT, |s| {
        s.with(|st| st.end_device.as_ref().and_then(|e| e.nmi.clone())) == Some("2001985732".into())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_02_and_03_in_band_registration_with_the_certificates_identity() {
    let server = CsipServer::start(60).await;
    let rig = rig(&server, Some(111_115)).await;
    until(&server, "the EndDevice registered", WAIT, |s| {
        s.with(|st| st.end_device.is_some())
    })
    .await;
    until(&server, "the DER's resources PUT", WAIT, |s| {
        s.with(|st| st.capability.is_some() && st.settings.is_some() && !st.statuses.is_empty())
    })
    .await;
    let (lfdi, sfdi) = server.client_identity();
    let e = server.with(|st| st.end_device.clone()).unwrap();
    assert_eq!((e.lfdi.as_str(), e.sfdi), (lfdi.as_str(), sfdi));
    assert!(lfdi
        .bytes()
        .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()));
    assert_eq!(e.nmi.as_deref(), Some("2001985732"));
    // `sitegate csip id` and the state name the same identity.
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["csip"]["lfdi"], lfdi, "{st}");
    assert_eq!(st["gridLoop"]["csip"]["state"], "following", "{st}");
    // ALL-09: capability and settings carry the ratings and DOE modes.
    let (cap, set) =
        server.with(|st| (st.capability.clone().unwrap(), st.settings.clone().unwrap()));
    for (doc, names) in [
        (
            &cap,
            &[
                "rtgMaxW",
                "doeModesSupported",
                "modesSupported",
                "rtgMaxChargeRateW",
            ][..],
        ),
        (
            &set,
            &["setMaxW", "doeModesEnabled", "setGradW", "updatedTime"][..],
        ),
    ] {
        for n in names {
            assert!(doc.contains(&format!("{n}>")), "{n} in {doc}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_03_rej_a_wrong_pin_stops_the_client() {
    let server = CsipServer::start(1).await;
    server.register(332_219);
    let rig = rig(&server, Some(111_115)).await;
    until(&server, "GET of the registration", WAIT, |s| {
        s.paths(Method::GET).contains(&"/edev/1/rg".to_string())
    })
    .await;
    // 500 ms for the client to take the registration's answer and stop: what it had
    // sent over the socket until then is counted in `n`, before the window below.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let n = server.requests().len();
    // Rates of 1 s: a client still talking would have asked again by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        server.requests().len(),
        n,
        "no request after the wrong PIN: {:?}",
        &server.requests()[n..]
    );
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["csip"]["state"], "pinRefused", "{st}");
    assert!(
        st["gridLoop"]["csip"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("332219") && e.contains("111115")),
        "{st}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_04_and_05_a_matching_pin_or_no_registration_link_goes_on() {
    let server = CsipServer::start(1).await;
    server.register(111_115);
    let _rig = rig(&server, Some(111_115)).await;
    until(&server, "the function sets polled twice", WAIT, |s| {
        s.times(Method::GET, "/edev/1/fsa").len() >= 2
    })
    .await;

    let server = CsipServer::start(1).await;
    server.with(|s| s.registration_links = false);
    let _rig = rig(&server, Some(111_115)).await;
    until(&server, "the function sets and DERs read", WAIT, |s| {
        let g = s.paths(Method::GET);
        g.contains(&"/edev/1/fsa".to_string()) && g.contains(&"/edev/1/der".to_string())
    })
    .await;
    let gets = server.paths(Method::GET);
    let list = gets.iter().position(|p| p == "/edev").unwrap();
    let posts = server
        .requests()
        .iter()
        .position(|r| r.method == Method::POST && r.path == "/edev")
        .unwrap();
    let first_list = server
        .requests()
        .iter()
        .position(|r| r.path == "/edev")
        .unwrap();
    assert!(
        first_list < posts,
        "the list is read before the POST ({list})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_19_and_20_a_changed_poll_rate_counts_from_the_answer_that_gave_it() {
    let server = CsipServer::start(1).await;
    server.register(111_115);
    server.with(|s| s.rates.fsa_list = 4);
    let _rig = rig(&server, None).await;
    until(&server, "two polls of the function sets", WAIT, |s| {
        s.times(Method::GET, "/edev/1/fsa").len() >= 2
    })
    .await;
    let t = server.times(Method::GET, "/edev/1/fsa");
    let gap = t[1] - t[0];
    assert!((3_500..=5_500).contains(&gap), "polled every 4 s: {t:?}");
    // The rate drops to 1 s: from the next answer on.
    server.with(|s| s.rates.fsa_list = 1);
    let before = server.times(Method::GET, "/edev/1/fsa").len();
    until(
        &server,
        "polls at the new rate",
        Duration::from_secs(12),
        |s| s.times(Method::GET, "/edev/1/fsa").len() >= before + 4,
    )
    .await;
    let t = server.times(Method::GET, "/edev/1/fsa");
    let last = &t[t.len() - 3..];
    assert!(
        last.windows(2)
            .all(|w| (500..=1_900).contains(&(w[1] - w[0]))),
        "{t:?}"
    );
}
