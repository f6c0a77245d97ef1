use serde_json::json;

use super::*;

#[tokio::test]
async fn healthz_is_ok() {
    let app = router(empty_state("tokens"));
    let a = send(&app, request(Method::GET, "/healthz", None)).await;
    assert_eq!(a.ok(), &json!({"status": "ok"}));
}

#[tokio::test]
async fn readyz_waits_for_every_device_and_every_check() {
    let state = empty_state("tokens");
    let store = state.readiness.flag("store", "not open yet");
    let app = router(state.clone());
    let live = &state.live;

    let a = send(&app, request(Method::GET, "/readyz", None)).await;
    let b = a.problem(503, "not_ready");
    let reasons = b["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 5, "{b}"); // four devices and the store
    assert!(reasons[0].as_str().unwrap().contains("dvc_pv1"), "{b}");
    assert_eq!(reasons[4], "store: not open yet");

    // Success and failure both count as attempted.
    record(
        live,
        live.find("dvc_pv1").unwrap(),
        &[(Property::ActivePower, 1.0)],
    );
    live.mark_failed(live.find("dvc_bat1").unwrap(), "timeout".into());
    live.mark_online(live.find("dvc_home_grid_meter").unwrap(), T0);
    let a = send(&app, request(Method::GET, "/readyz", None)).await;
    let reasons = a.problem(503, "not_ready")["reasons"].clone();
    assert_eq!(
        reasons,
        json!(["device dvc_barn_pv: not polled yet", "store: not open yet"])
    );

    live.mark_failed(live.find("dvc_barn_pv").unwrap(), "refused".into());
    let a = send(&app, request(Method::GET, "/readyz", None)).await;
    assert_eq!(
        a.problem(503, "not_ready")["reasons"],
        json!(["store: not open yet"])
    );

    store.set_ready(true);
    let a = send(&app, request(Method::GET, "/readyz", None)).await;
    assert_eq!(a.ok(), &json!({"status": "ready"}));

    state.readiness.register("disk", || Err("full".to_string()));
    let a = send(&app, request(Method::GET, "/readyz", None)).await;
    assert_eq!(
        a.problem(503, "not_ready")["reasons"],
        json!(["disk: full"])
    );
}
