//! What a utility server may send wrong, and what the client does: each a
//! clear log line and status, none a panic, a stall or unbounded memory,
//! and the schedule as last received stays in force. Malformed XML,
//! unknown elements, negative limits, an event already over, a server that
//! times out or redirects, and 10,000 controls in one list.

use std::time::Duration;

use axum::http::{Method, StatusCode};

use crate::common::csip_server::{until, BaseSpec, CsipServer};
use crate::csip_support::*;

async fn error_says(rig: &crate::steering_support::Rig, what: &str) -> serde_json::Value {
    let start = tokio::time::Instant::now();
    loop {
        let st = rig.state().await;
        if st["gridLoop"]["csip"]["error"]
            .as_str()
            .is_some_and(|e| e.contains(what))
        {
            return st;
        }
        assert!(start.elapsed() < WAIT, "no error saying {what:?}: {st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_xml_a_timeout_and_a_redirect_keep_the_control_in_force() {
    let server = CsipServer::start(1).await;
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    let mrid = server.add_control(1, "DERC1", 0, 120, BaseSpec::export(5_000.0));
    holds(&rig, "the control", -5_000.0, -4_400.0).await;
    let derc = "/edev/1/derp/1/derc";
    server.canned(
        derc,
        StatusCode::OK,
        "<DERControlList><DERControl><mRID>",
        Duration::ZERO,
    );
    let st = error_says(&rig, "not well-formed XML").await;
    assert_eq!(
        source(&st, "maxExport").unwrap()["reference"],
        mrid.as_str(),
        "{st}"
    );
    server.canned(derc, StatusCode::OK, "", Duration::from_secs(3));
    error_says(&rig, "no answer within 2000 ms").await;
    server.canned(derc, StatusCode::FOUND, "", Duration::ZERO);
    error_says(&rig, "does not follow redirects").await;
    server.canned(derc, StatusCode::INTERNAL_SERVER_ERROR, "", Duration::ZERO);
    error_says(&rig, "500").await;
    holds(&rig, "the control all along", -5_000.0, -4_400.0).await;
    // The other resources were polled all the while.
    let n = server.times(Method::GET, "/dcap").len();
    until(&server, "the DeviceCapability polled on", WAIT, |s| {
        s.times(Method::GET, "/dcap").len() > n + 1
    })
    .await;
    server.uncanned(derc);
    until(&server, "following again", WAIT, |_| true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_elements_are_passed_over_and_negative_limits_held_as_zero() {
    let server = CsipServer::start(1).await;
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    let now = server.now_s();
    // A v1.3 server with elements this client does not know, a negative
    // export limit and an event that ended an hour ago.
    let list = format!(
        r#"<DERControlList xmlns="urn:ieee:std:2030.5:ns" xmlns:ns2="https://csipaus.org/ns/v1.3" xmlns:x="urn:example:vendor" all="2" results="2">
        <x:vendorThing><x:deep a="1"/></x:vendorThing>
        <DERControl href="/edev/1/derp/1/derc/1" replyTo="/edev/1/rsps/site_control/rsp" responseRequired="03">
          <mRID>NEG00000000000000000000000012345</mRID><x:extra>yes</x:extra><creationTime>{now}</creationTime>
          <EventStatus><currentStatus>1</currentStatus><dateTime>{now}</dateTime><potentiallySuperseded>false</potentiallySuperseded><x:why>new</x:why></EventStatus>
          <interval><duration>300</duration><start>{now}</start></interval>
          <DERControlBase><ns2:opModExpLimW><multiplier>0</multiplier><value>-5000</value></ns2:opModExpLimW><ns2:opModFutureW><value>1</value></ns2:opModFutureW></DERControlBase>
        </DERControl>
        <DERControl href="/edev/1/derp/1/derc/2" replyTo="/edev/1/rsps/site_control/rsp" responseRequired="03">
          <mRID>OLD00000000000000000000000012345</mRID><creationTime>{old}</creationTime>
          <EventStatus><currentStatus>1</currentStatus><dateTime>{old}</dateTime><potentiallySuperseded>false</potentiallySuperseded></EventStatus>
          <interval><duration>600</duration><start>{old}</start></interval>
          <DERControlBase><ns2:opModExpLimW><multiplier>0</multiplier><value>9000</value></ns2:opModExpLimW></DERControlBase>
        </DERControl></DERControlList>"#,
        old = now - 3_600
    );
    server.canned("/edev/1/derp/1/derc", StatusCode::OK, &list, Duration::ZERO);
    holds(&rig, "a negative export limit held as 0 W", -600.0, 1_500.0).await;
    until(&server, "the old event refused as expired", WAIT, |s| {
        s.responses_for("OLD00000000000000000000000012345") == vec![254]
    })
    .await;
    assert_eq!(
        server.responses_for("NEG00000000000000000000000012345"),
        vec![1, 2]
    );
    // Written in the server's own CSIP-AUS namespace from then on.
    until(
        &server,
        "the v1.3 namespace in what the client writes",
        WAIT,
        |s| {
            s.with(|st| {
                st.statuses
                    .last()
                    .is_some_and(|b| b.contains("https://csipaus.org/ns/v1.3"))
            })
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_controls_are_read_page_by_page() {
    let server = CsipServer::start(1).await;
    server.with(|s| {
        // One read of the 100 pages during the test: each read moves 6 MB
        // of XML through AES-CCM (at opt-level 0 in tests), and at 5 s the
        // agent read the list again and again while the test waited.
        s.rates.derp_list = 300;
        s.response_required = "00";
    });
    // 9,999 controls in the future, and one in force now.
    for i in 0..9_999 {
        server.add_control(1, "FUTURE", 3_600 + 60 * i, 60, BaseSpec::export(30_000.0));
    }
    let now = server.add_control(1, "NOW", 0, 600, BaseSpec::export(6_000.0));
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    let st = source_is(&rig, "maxExport", Some(6_000.0)).await;
    assert_eq!(source(&st, "maxExport").unwrap()["reference"], now.as_str());
    holds(
        &rig,
        "the control in force among 10,000",
        -6_000.0,
        -5_400.0,
    )
    .await;
    let pages = server.times(Method::GET, "/edev/1/derp/1/derc").len();
    assert!(
        pages >= 100,
        "10,000 controls in pages of 100: {pages} requests"
    );
    assert!(server.responses().is_empty(), "none asked for a response");
}
