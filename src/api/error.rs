//! The one error type of the HTTP API and its RFC 9457 rendering.
//!
//! Every layer that answers a request (device data, time series, steering, ops)
//! reports failure as an [`ApiError`]; it renders as `application/problem+json`
//! `{"type","title","status","detail","code","field"?}` (the `Problem` schema of
//! `openapi.json`). Layer
//! errors (store, steering) are mapped to it once, at the handler. This file must
//! not know about any endpoint: it only builds and renders problems.

use std::fmt;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

pub use super::code::ErrorCode;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A problem to answer with. Boxed so that `Result<T, ApiError>` stays one word.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{} ({}): {}", .0.code, .0.status, .0.detail)]
pub struct ApiError(Box<Inner>);

#[derive(Clone, Debug)]
struct Inner {
    status: StatusCode,
    code: ErrorCode,
    detail: String,
    field: Option<String>,
    headers: HeaderMap,
    extensions: Map<String, Value>,
}

impl ApiError {
    /// A problem with the code's default status.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            status: code.default_status(),
            code,
            detail: detail.into(),
            field: None,
            headers: HeaderMap::new(),
            extensions: Map::new(),
        }))
    }

    /// A problem caused by one field (`field` names it, a dotted path for nested
    /// body fields such as `range.start`).
    pub fn for_field(code: ErrorCode, field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(code, detail).with_field(field)
    }

    /// Names the field at fault; an empty name (a problem of the whole body)
    /// names none, so `field` is never the empty string.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        let field = field.into();
        self.0.field = (!field.is_empty()).then_some(field);
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.0.status = status;
        self
    }

    /// Adds a response header (`Allow`, `WWW-Authenticate`, `Retry-After`, ...).
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.0.headers.insert(name, value);
        self
    }

    /// Adds an RFC 9457 extension member to the body. The standard members and
    /// `code`/`field` cannot be overridden this way.
    pub fn with_extension(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.0.extensions.insert(key.into(), value.into());
        self
    }

    pub fn status(&self) -> StatusCode {
        self.0.status
    }
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }
    pub fn detail(&self) -> &str {
        &self.0.detail
    }
    pub fn field(&self) -> Option<&str> {
        self.0.field.as_deref()
    }

    // Constructors for the codes of `openapi.json`'s `ErrorCode`. Details name the field and the value.

    pub fn invalid_json(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidJson, detail)
    }

    /// `allowed` lists the names that would have been accepted (may be empty).
    pub fn unknown_field(field: impl Into<String>, allowed: &[&str]) -> Self {
        let field = field.into();
        let detail = if allowed.is_empty() {
            format!("unknown field {field:?}: no fields are accepted here")
        } else {
            format!(
                "unknown field {field:?} (expected one of: {})",
                allowed.join(", ")
            )
        };
        Self::for_field(ErrorCode::UnknownField, field, detail)
    }

    pub fn missing_field(field: impl Into<String>) -> Self {
        let field = field.into();
        let detail = format!("the field {field:?} is required but missing");
        Self::for_field(ErrorCode::MissingField, field, detail)
    }

    pub fn invalid_value(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::for_field(ErrorCode::InvalidValue, field, detail)
    }

    pub fn unknown_unit(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::for_field(ErrorCode::UnknownUnit, field, detail)
    }

    /// `name` is neither in the vocabulary nor offered; `offered` is what is.
    pub fn unknown_property(
        field: impl Into<String>,
        name: &str,
        device: &str,
        offered: impl IntoIterator<Item = impl fmt::Display>,
    ) -> Self {
        let offered: Vec<String> = offered.into_iter().map(|p| p.to_string()).collect();
        let list = if offered.is_empty() {
            "none yet".to_string()
        } else {
            offered.join(", ")
        };
        Self::for_field(
            ErrorCode::UnknownProperty,
            field,
            format!("device {device:?} does not offer property {name:?} (offered: {list})"),
        )
    }

    pub fn device_not_found(reference: &str) -> Self {
        Self::new(
            ErrorCode::DeviceNotFound,
            format!("no device has the reference {reference:?}"),
        )
    }

    pub fn site_not_found(reference: &str) -> Self {
        Self::new(
            ErrorCode::SiteNotFound,
            format!("no site has the reference {reference:?}"),
        )
    }

    pub fn no_measurement(device: &str, property: &str) -> Self {
        Self::new(
            ErrorCode::NoMeasurement,
            format!("device {device:?} has no measurement of {property:?} yet"),
        )
    }

    pub fn range_too_long(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::for_field(ErrorCode::RangeTooLong, field, detail)
    }

    pub fn too_many_points(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::for_field(ErrorCode::TooManyPoints, field, detail)
    }

    pub fn expired(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::for_field(ErrorCode::Expired, field, detail)
    }

    /// 401 with `WWW-Authenticate: Bearer realm="sitegate"`; `invalid_token` adds
    /// RFC 6750's `error="invalid_token"` (a token was presented but is wrong).
    pub fn unauthorized(detail: impl Into<String>, invalid_token: bool) -> Self {
        let challenge = if invalid_token {
            HeaderValue::from_static(r#"Bearer realm="sitegate", error="invalid_token""#)
        } else {
            HeaderValue::from_static(r#"Bearer realm="sitegate""#)
        };
        Self::new(ErrorCode::Unauthorized, detail).with_header(header::WWW_AUTHENTICATE, challenge)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, detail)
    }

    pub fn payload_too_large(limit_bytes: usize) -> Self {
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!("the body is larger than the limit of {limit_bytes} bytes"),
        )
    }

    pub fn unsupported_media_type(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::UnsupportedMediaType, detail)
    }

    /// 429 with `Retry-After` in whole seconds.
    pub fn rate_limited(detail: impl Into<String>, retry_after_secs: u64) -> Self {
        Self::new(ErrorCode::RateLimited, detail)
            .with_header(header::RETRY_AFTER, HeaderValue::from(retry_after_secs))
    }

    pub fn not_found(path: &str) -> Self {
        Self::new(
            ErrorCode::NotFound,
            format!("no resource at {path:?} (see GET /devices for device references)"),
        )
    }

    pub fn method_not_allowed(method: &str, path: &str, allow: Option<&str>) -> Self {
        let detail = match allow {
            Some(allow) => format!("method {method} is not allowed on {path:?} (allowed: {allow})"),
            None => format!("method {method} is not allowed on {path:?}"),
        };
        Self::new(ErrorCode::MethodNotAllowed, detail)
    }

    /// A failure of ours. `detail` goes to the client: say what failed, not how
    /// (no paths, no SQL); log the cause where it is known.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, detail)
    }
}

impl ApiError {
    /// The problem+json body.
    fn body(&self) -> Vec<u8> {
        let i = &self.0;
        let mut body = i.extensions.clone();
        body.insert("type".into(), "about:blank".into());
        body.insert(
            "title".into(),
            i.status.canonical_reason().unwrap_or("Error").into(),
        );
        body.insert("status".into(), i.status.as_u16().into());
        body.insert("detail".into(), i.detail.clone().into());
        body.insert("code".into(), i.code.as_str().into());
        if let Some(field) = &i.field {
            body.insert("field".into(), field.clone().into());
        }
        // Serializing a map of strings and numbers cannot fail.
        serde_json::to_vec(&body).unwrap_or_default()
    }

    /// The whole HTTP/1.1 answer, with `connection: close`: for refusals the
    /// connection layer writes itself, before (or instead of) any router.
    pub fn http1_bytes(&self) -> Vec<u8> {
        let i = &self.0;
        let body = self.body();
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {PROBLEM_JSON}\r\ncontent-length: {}\r\nconnection: close\r\n",
            i.status.as_u16(),
            i.status.canonical_reason().unwrap_or("Error"),
            body.len()
        )
        .into_bytes();
        for (name, value) in &i.headers {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&body);
        out
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.0.code == ErrorCode::Internal {
            tracing::error!(status = self.0.status.as_u16(), code = self.0.code.as_str(), detail = %self.0.detail, "api error");
        }
        let bytes = self.body();
        let Inner {
            status,
            mut headers,
            ..
        } = *self.0;
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        (status, headers, bytes).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r {
            JsonRejection::MissingJsonContentType(_) => Self::unsupported_media_type(
                "the body must be JSON: send Content-Type: application/json",
            ),
            JsonRejection::JsonSyntaxError(e) => Self::invalid_json(e.body_text()),
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Self::new(ErrorCode::PayloadTooLarge, e.body_text())
            }
            other => Self::new(ErrorCode::InvalidValue, other.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::new(ErrorCode::InvalidValue, r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        match r {
            PathRejection::FailedToDeserializePathParams(e) => {
                Self::new(ErrorCode::InvalidValue, e.body_text())
            }
            other => Self::internal(other.body_text()),
        }
    }
}
