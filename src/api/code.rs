//! The machine-readable `code` of every problem, with its default HTTP status.
//!
//! The list is the partner API's codes plus `timeout` and `not_ready`. Adding a code means
//! adding it here and to the `ErrorCode` schema of `openapi.json` (a test checks
//! that the two agree). No rendering here: `error.rs` does that.

use std::fmt;

use axum::http::StatusCode;

/// Machine-readable error codes (`code` in the body). Each has a default status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidJson,
    UnknownField,
    MissingField,
    InvalidValue,
    UnknownUnit,
    UnknownProperty,
    DeviceNotFound,
    SiteNotFound,
    NoMeasurement,
    /// A time range whose end is not after its start (empty or reversed).
    InvalidRange,
    RangeTooLong,
    TooManyPoints,
    Expired,
    Unauthorized,
    Forbidden,
    PayloadTooLarge,
    UnsupportedMediaType,
    RateLimited,
    NotFound,
    MethodNotAllowed,
    /// The request took longer than the server's request time limit.
    Timeout,
    /// `/readyz` while a subsystem is not ready (an addition to the partner
    /// API's list, which is open to more).
    NotReady,
    /// Every connection slot is taken, or the client's address holds the
    /// most connections: try again shortly.
    Busy,
    /// A request head the HTTP layer cannot parse (a malformed line, a byte
    /// HTTP does not allow): answered before any route sees it.
    BadRequest,
    /// A request target over 65534 bytes.
    UriTooLong,
    /// A request head over about 400 KiB or with more than 100 headers.
    HeadersTooLarge,
    /// An `Idempotency-Key` seen in the last 24 h with another operation or
    /// another body.
    IdempotencyKeyReused,
    /// Keep last: [`ErrorCode::ALL`]'s length check relies on it.
    Internal,
}

// ALL has one entry per variant (the test below checks they are distinct).
const _: () = assert!(ErrorCode::ALL.len() == ErrorCode::Internal as usize + 1);

impl ErrorCode {
    /// Every code, in declaration order (for documents such as OpenAPI).
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::InvalidJson,
        ErrorCode::UnknownField,
        ErrorCode::MissingField,
        ErrorCode::InvalidValue,
        ErrorCode::UnknownUnit,
        ErrorCode::UnknownProperty,
        ErrorCode::DeviceNotFound,
        ErrorCode::SiteNotFound,
        ErrorCode::NoMeasurement,
        ErrorCode::InvalidRange,
        ErrorCode::RangeTooLong,
        ErrorCode::TooManyPoints,
        ErrorCode::Expired,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::RateLimited,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Timeout,
        ErrorCode::NotReady,
        ErrorCode::Busy,
        ErrorCode::BadRequest,
        ErrorCode::UriTooLong,
        ErrorCode::HeadersTooLarge,
        ErrorCode::IdempotencyKeyReused,
        ErrorCode::Internal,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::UnknownField => "unknown_field",
            ErrorCode::MissingField => "missing_field",
            ErrorCode::InvalidValue => "invalid_value",
            ErrorCode::UnknownUnit => "unknown_unit",
            ErrorCode::UnknownProperty => "unknown_property",
            ErrorCode::DeviceNotFound => "device_not_found",
            ErrorCode::SiteNotFound => "site_not_found",
            ErrorCode::NoMeasurement => "no_measurement",
            ErrorCode::InvalidRange => "invalid_range",
            ErrorCode::RangeTooLong => "range_too_long",
            ErrorCode::TooManyPoints => "too_many_points",
            ErrorCode::Expired => "expired",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Timeout => "timeout",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::Busy => "busy",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UriTooLong => "uri_too_long",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::IdempotencyKeyReused => "idempotency_key_reused",
            ErrorCode::Internal => "internal",
        }
    }

    /// The status a problem with this code gets unless told otherwise.
    pub const fn default_status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidJson
            | ErrorCode::UnknownField
            | ErrorCode::MissingField
            | ErrorCode::InvalidValue
            | ErrorCode::UnknownUnit
            | ErrorCode::UnknownProperty
            | ErrorCode::InvalidRange
            | ErrorCode::RangeTooLong
            | ErrorCode::TooManyPoints
            | ErrorCode::Expired
            | ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
            ErrorCode::UriTooLong => StatusCode::URI_TOO_LONG,
            ErrorCode::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::DeviceNotFound
            | ErrorCode::SiteNotFound
            | ErrorCode::NoMeasurement
            | ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::Timeout | ErrorCode::NotReady | ErrorCode::Busy => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The code for a bare error status that did not come with one (an axum
    /// default response caught by the safety net).
    pub fn for_status(status: StatusCode) -> ErrorCode {
        match status {
            StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
            StatusCode::FORBIDDEN => ErrorCode::Forbidden,
            StatusCode::NOT_FOUND => ErrorCode::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
            StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
            s if s.is_server_error() => ErrorCode::Internal,
            _ => ErrorCode::InvalidValue,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_name_and_an_error_status() {
        let names: std::collections::HashSet<_> =
            ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        assert!(ErrorCode::ALL
            .iter()
            .all(|c| c.default_status().as_u16() >= 400));
        assert_eq!(
            ErrorCode::RateLimited.default_status(),
            StatusCode::TOO_MANY_REQUESTS
        );
    }
}
