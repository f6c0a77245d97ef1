use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::middleware::from_fn_with_state;
use axum::routing::post;

use super::*;
use crate::api::{require_steer, Caller};

/// The standard router plus a steer-only route that echoes the caller's name, as
/// steering will have.
fn app_with_steer_route(state: &ApiState) -> Router {
    let steer = Router::new()
        .route(
            "/test/steer",
            post(|caller: Caller| async move { caller.name().to_string() }),
        )
        .route_layer(from_fn_with_state(state.auth.clone(), require_steer));
    router(state.clone()).merge(steer)
}

#[tokio::test]
async fn no_token_is_401_with_a_bearer_challenge() {
    let app = router(state_with("tokens"));
    let a = send(&app, request(Method::GET, "/devices", None)).await;
    a.problem(401, "unauthorized");
    let challenge = a.headers[WWW_AUTHENTICATE].to_str().unwrap();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    assert!(!challenge.contains("invalid_token"), "{challenge}");
}

#[tokio::test]
async fn wrong_or_malformed_tokens_are_401() {
    let app = router(state_with("tokens"));
    let a = send(&app, request(Method::GET, "/devices", Some("sgt_wrong"))).await;
    a.problem(401, "unauthorized");
    assert!(a.headers[WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .contains("invalid_token"));
    for value in ["Basic abc", "Bearer", "Bearer   ", READ, "bearer"] {
        let req = Request::get("/devices")
            .header(AUTHORIZATION, value)
            .body(Body::empty())
            .unwrap();
        let a = send(&app, req).await;
        a.problem(401, "unauthorized");
        assert!(a.headers.contains_key(WWW_AUTHENTICATE));
    }
    let twice = Request::get("/devices")
        .header(AUTHORIZATION, format!("Bearer {READ}"))
        .header(AUTHORIZATION, format!("Bearer {READ}"))
        .body(Body::empty())
        .unwrap();
    send(&app, twice).await.problem(401, "unauthorized");
}

#[tokio::test]
async fn scheme_is_case_insensitive() {
    let app = router(state_with("tokens"));
    let req = Request::get("/devices")
        .header(AUTHORIZATION, format!("bEaReR {READ}"))
        .body(Body::empty())
        .unwrap();
    send(&app, req).await.ok();
}

#[tokio::test]
async fn scopes_decide_403() {
    let state = state_with("tokens");
    let app = app_with_steer_route(&state);
    // steer-only token on a read route.
    let a = send(&app, request(Method::GET, "/devices", Some(STEER))).await;
    let b = a.problem(403, "forbidden");
    assert!(b["detail"].as_str().unwrap().contains("read"), "{b}");
    // read-only token on a steer route.
    let a = send(&app, request(Method::POST, "/test/steer", Some(READ))).await;
    a.problem(403, "forbidden");
    // no token on a steer route: 401 first.
    let a = send(&app, request(Method::POST, "/test/steer", None)).await;
    a.problem(401, "unauthorized");
    // the right scope reaches the handler, which learns the token's name.
    let answer = send_text(&app, request(Method::POST, "/test/steer", Some(BOTH))).await;
    assert_eq!(answer, (StatusCode::OK, "both".to_string()));
    send(&app, request(Method::GET, "/devices", Some(BOTH)))
        .await
        .ok();
}

#[tokio::test]
async fn auth_none_grants_every_scope_as_anonymous() {
    let state = state_with("none");
    let app = app_with_steer_route(&state);
    send(&app, request(Method::GET, "/devices", None))
        .await
        .ok();
    send(&app, request(Method::GET, "/devices", Some("garbage")))
        .await
        .ok();
    let answer = send_text(&app, request(Method::POST, "/test/steer", None)).await;
    assert_eq!(answer, (StatusCode::OK, "anonymous".to_string()));
}

#[tokio::test]
async fn an_in_process_caller_is_trusted() {
    let state = state_with("tokens");
    let app = app_with_steer_route(&state);
    let mut req = request(Method::POST, "/test/steer", None);
    req.extensions_mut()
        .insert(Caller::new("mqtt-rpc", &[crate::config::Scope::Steer]));
    let answer = send_text(&app, req).await;
    assert_eq!(answer, (StatusCode::OK, "mqtt-rpc".to_string()));
}

#[tokio::test]
async fn reload_swaps_the_token_table() {
    let state = state_with("tokens");
    let app = router(state.clone());
    send(&app, request(Method::GET, "/devices", Some(READ)))
        .await
        .ok();
    let text = config_text("tokens").replace(&hex::encode(hash_token(READ)), &"0".repeat(64));
    let config = crate::config::parse(&text).unwrap();
    state.auth.reload(&config.http);
    send(&app, request(Method::GET, "/devices", Some(READ)))
        .await
        .problem(401, "unauthorized");
    assert_eq!(state.auth.authenticate_token(BOTH).unwrap().name(), "both");
}

#[tokio::test]
async fn health_and_readiness_need_no_token() {
    let app = router(state_with("tokens"));
    send(&app, request(Method::GET, "/healthz", None))
        .await
        .ok();
    // Answered by the readiness checks, not refused for the missing token.
    let ready = send(&app, request(Method::GET, "/readyz", None)).await;
    if ready.status == StatusCode::OK {
        assert_eq!(ready.ok()["status"], "ready");
    } else {
        ready.problem(503, "not_ready");
    }
}

#[tokio::test]
async fn one_path_can_carry_a_read_method_and_a_steer_method() {
    // As steering will do with GET and POST /sites/{s}/steering.
    let state = state_with("tokens");
    let steer = Router::new()
        .route("/devices", post(|| async { "posted" }))
        .route_layer(from_fn_with_state(state.auth.clone(), require_steer));
    let app = router(state.clone()).merge(steer);
    send(&app, request(Method::GET, "/devices", Some(READ)))
        .await
        .ok();
    send(&app, request(Method::POST, "/devices", Some(READ)))
        .await
        .problem(403, "forbidden");
    let answer = send_text(&app, request(Method::POST, "/devices", Some(STEER))).await;
    assert_eq!(answer, (StatusCode::OK, "posted".to_string()));
    send(&app, request(Method::GET, "/devices", Some(STEER)))
        .await
        .problem(403, "forbidden");
}
