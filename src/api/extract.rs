//! Extractors whose every rejection is an [`ApiError`]: path parameters and
//! strict JSON bodies.
//!
//! Endpoints with a body take [`JsonBody`] (or call [`read_json`] for another size
//! limit) and validate the `serde_json::Value` field by field, so that each
//! problem can name its field. Nothing here knows an endpoint's fields.

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::ApiError;

/// Default largest accepted request body.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;

/// `axum::extract::Path` with problem+json rejections.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(value) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(Self(value))
    }
}

/// A JSON body read strictly: `Content-Type: application/json` (415), at most
/// [`DEFAULT_BODY_LIMIT`] bytes (413), valid JSON (400 `invalid_json` with line
/// and column).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        read_json(req, DEFAULT_BODY_LIMIT).await.map(Self)
    }
}

/// Reads and parses a request's JSON body with the given size limit.
pub async fn read_json(req: Request, limit: usize) -> Result<Value, ApiError> {
    let (parts, body) = req.into_parts();
    check_json_content_type(&parts.headers)?;
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    let bytes = read_limited(body, limit).await?;
    parse_json(&bytes)
}

async fn read_limited(body: Body, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        // to_bytes fails either on the limit or on a broken connection; the
        // limit error is the only one a client can still read.
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if too_large {
            ApiError::payload_too_large(limit)
        } else {
            ApiError::invalid_json(format!("the body could not be read: {e}"))
        }
    })
}

/// 415 unless the request says `Content-Type: application/json` (parameters such
/// as `charset=utf-8` are allowed).
pub fn check_json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Err(ApiError::unsupported_media_type(
            "the body must be JSON: send Content-Type: application/json",
        ));
    };
    let essence = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(format!(
            "Content-Type {:?} is not supported; send application/json",
            String::from_utf8_lossy(value.as_bytes())
        )))
    }
}

/// Parses JSON text; 400 `invalid_json` naming the line and column at fault.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid_json(
            "the body is empty; a JSON object is expected",
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::invalid_json(format!(
            "the body is not valid JSON at line {}, column {}: {}",
            e.line(),
            e.column(),
            strip_position(&e.to_string())
        ))
    })
}

/// serde_json appends " at line L column C" to its messages; we say it first.
fn strip_position(message: &str) -> &str {
    message
        .rsplit_once(" at line ")
        .map_or(message, |(head, _)| head)
}

/// What a JSON value is, for a problem's detail ("found a string").
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::error::ErrorCode;
    use axum::http::HeaderValue;

    #[test]
    fn json_errors_name_line_and_column() {
        let e = parse_json(b"{\n  \"a\": 1,\n  \"b\": }").unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidJson);
        assert!(e.detail().contains("line 3, column 8"), "{}", e.detail());
        assert_eq!(e.detail().matches("line").count(), 1, "{}", e.detail());
        assert_eq!(
            parse_json(b"  ").unwrap_err().code(),
            ErrorCode::InvalidJson
        );
        assert_eq!(parse_json(b"{\"a\":1}").unwrap()["a"], 1);
    }

    #[test]
    fn content_type_must_be_json() {
        let mut h = HeaderMap::new();
        assert!(check_json_content_type(&h).is_err());
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        let e = check_json_content_type(&h).unwrap_err();
        assert_eq!(e.code(), ErrorCode::UnsupportedMediaType);
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert!(check_json_content_type(&h).is_ok());
    }
}
