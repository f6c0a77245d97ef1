use axum::http::header::{ALLOW, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::json;

use super::*;
use crate::api::{ApiError, JsonBody, DEFAULT_BODY_LIMIT};

#[tokio::test]
async fn unknown_routes_are_404_not_found() {
    let app = router(state_with("tokens"));
    for uri in [
        "/nope",
        "/devices/",
        "/devices/dvc_pv1/measurement/extra",
        "/page/nope.js", // "/" is the technician page
    ] {
        let a = send(&app, request(Method::GET, uri, Some(READ))).await;
        a.problem(404, "not_found");
    }
    // Without a token too: there is nothing to protect.
    send(&app, request(Method::GET, "/nope", None))
        .await
        .problem(404, "not_found");
}

#[tokio::test]
async fn wrong_methods_are_405_with_allow() {
    let app = router(state_with("tokens"));
    for (method, uri) in [
        (Method::POST, "/devices"),
        (Method::DELETE, "/devices/dvc_pv1/measurement"),
        (Method::PUT, "/devices/dvc_pv1/measurements/map"),
        (Method::POST, "/healthz"),
    ] {
        let a = send(&app, request(method.clone(), uri, Some(READ))).await;
        let b = a.problem(405, "method_not_allowed");
        let allow = a.headers[ALLOW].to_str().unwrap();
        assert!(allow.contains("GET"), "{allow}");
        let detail = b["detail"].as_str().unwrap();
        assert!(
            detail.contains(method.as_str()) && detail.contains(uri),
            "{detail}"
        );
    }
}

#[tokio::test]
async fn head_is_served_for_get_routes() {
    let app = router(state_with("tokens"));
    let res = app
        .clone()
        .oneshot(request(Method::HEAD, "/devices", Some(READ)))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

#[test]
fn problems_render_every_member() {
    let e = ApiError::invalid_value("range.start", "\"x\" is not a date-time")
        .with_extension("supported", json!(["absolute"]));
    assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    let res = e.into_response();
    assert_eq!(res.headers()[CONTENT_TYPE], PROBLEM_JSON);
    let body = tokio_test_body(res);
    assert_eq!(
        body,
        json!({"type": "about:blank", "title": "Bad Request", "status": 400,
               "detail": "\"x\" is not a date-time", "code": "invalid_value",
               "field": "range.start", "supported": ["absolute"]})
    );
    let body = tokio_test_body(ApiError::internal("the store is gone").into_response());
    assert_eq!(body["status"], 500);
    assert!(body.get("field").is_none());
}

fn tokio_test_body(res: axum::response::Response) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let bytes = rt
        .block_on(axum::body::to_bytes(res.into_body(), usize::MAX))
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A router with endpoints that take bodies the strict way and axum's way.
fn body_app() -> Router {
    Router::new()
        .route(
            "/strict",
            post(|JsonBody(v): JsonBody| async move { axum::Json(v) }),
        )
        .route(
            "/axum",
            post(
                |axum::Json(v): axum::Json<std::collections::HashMap<String, u8>>| async move {
                    axum::Json(v)
                },
            ),
        )
        .layer(axum::middleware::from_fn(
            crate::api::ops::problem_safety_net,
        ))
}

fn post_body(uri: &str, content_type: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut b = Request::post(uri);
    if let Some(ct) = content_type {
        b = b.header(CONTENT_TYPE, ct);
    }
    b.body(body.into()).unwrap()
}

#[tokio::test]
async fn strict_json_bodies() {
    let app = body_app();
    let a = send(
        &app,
        post_body("/strict", Some("application/json"), r#"{"a":[1,2]}"#),
    )
    .await;
    assert_eq!(a.body, json!({"a": [1, 2]}));

    let a = send(&app, post_body("/strict", None, "{}")).await;
    a.problem(415, "unsupported_media_type");
    let a = send(&app, post_body("/strict", Some("text/plain"), "{}")).await;
    a.problem(415, "unsupported_media_type");

    let a = send(
        &app,
        post_body("/strict", Some("application/json"), "{\"a\":\n tru}"),
    )
    .await;
    let b = a.problem(400, "invalid_json");
    assert!(b["detail"].as_str().unwrap().contains("line 2"), "{b}");
    let a = send(&app, post_body("/strict", Some("application/json"), "")).await;
    a.problem(400, "invalid_json");

    // Over the limit, read as a stream (no Content-Length) and when declared.
    let big = format!("[{}0]", "0,".repeat(DEFAULT_BODY_LIMIT));
    let a = send(
        &app,
        post_body("/strict", Some("application/json"), big.clone()),
    )
    .await;
    a.problem(413, "payload_too_large");
    let mut declared = post_body("/strict", Some("application/json"), big.clone());
    declared
        .headers_mut()
        .insert(header::CONTENT_LENGTH, big.len().into());
    send(&app, declared).await.problem(413, "payload_too_large");
}

#[tokio::test]
async fn axum_rejections_become_problems() {
    let app = body_app();
    let a = send(&app, post_body("/axum", None, "{}")).await;
    a.problem(415, "unsupported_media_type");
    let a = send(&app, post_body("/axum", Some("application/json"), "{")).await;
    a.problem(400, "invalid_value");
    let a = send(
        &app,
        post_body("/axum", Some("application/json"), r#"{"a": 999}"#),
    )
    .await;
    let b = a.problem(400, "invalid_value");
    assert!(b["detail"].as_str().unwrap().contains("a"), "{b}");
}
