//! `GET /openapi.json`: the OpenAPI 3.1 description of this API, checked in as
//! `openapi.json` beside this file and served byte for byte, without a token.
//!
//! The document is written by hand and kept true by `tests/it/openapi.rs` (same
//! routes as [`routes`](super::routes), every example and every real answer valid
//! against its schema). This file must not build or change the document at run
//! time.

use axum::http::header::{self, HeaderValue};
use axum::response::{IntoResponse, Response};

/// The document as served.
pub const OPENAPI_DOCUMENT: &str = include_str!("openapi.json");

/// The handler.
pub async fn document() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI_DOCUMENT,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_json_for_openapi_3_1() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_DOCUMENT).unwrap();
        let version = doc["openapi"].as_str().unwrap();
        assert!(version.starts_with("3.1."), "{version}");
    }
}
