//! `POST /devices/{ref}/measurements/time-series`: buckets of one property over an
//! absolute range (at most 30 days), from the store.
//!
//! The handler only glues: [`JsonBody`] answers content type (415), size (413)
//! and syntax (`invalid_json`); [`parse`] validates the body field by field into
//! the store's typed query; the store computes the buckets on a blocking thread.
//! No aggregation lives here.

mod parse;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::error::{ApiError, ErrorCode};
use super::extract::{ApiPath, JsonBody};
use super::number::Num;
use super::ApiState;
use crate::model::{time, Property};
use crate::store::{Point, StoreError};
use parse::{parse_request, RequestCode, RequestError};

#[derive(Serialize)]
struct Series {
    time: Vec<String>,
    data: Vec<Num>,
}

impl Series {
    fn new(points: &[Point]) -> Self {
        Self {
            time: points.iter().map(|p| time::format_utc(p.ts_ms)).collect(),
            data: points.iter().map(|p| Num(p.value)).collect(),
        }
    }
}

/// The handler. Device unknown: 404; store not open: 503 `not_ready`.
pub async fn time_series(
    State(state): State<ApiState>,
    ApiPath(reference): ApiPath<String>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let id = state
        .live
        .find(&reference)
        .ok_or_else(|| ApiError::device_not_found(&reference))?;
    let offered = state.live.snapshot(id).properties;
    let query = parse_request(&body, &offered)
        .map_err(|e| request_error(e, &body, &reference, &offered))?;
    let store = state
        .store
        .as_ref()
        .ok_or_else(|| ApiError::new(ErrorCode::NotReady, "the measurement store is not open"))?;
    let points = store
        .time_series(&reference, query)
        .await
        .map_err(store_error)?;
    Ok(Json(Series::new(&points)).into_response())
}

fn request_error(
    e: RequestError,
    body: &serde_json::Value,
    device: &str,
    offered: &[Property],
) -> ApiError {
    let code = match e.code {
        RequestCode::InvalidJson => ErrorCode::InvalidJson,
        RequestCode::UnknownField => ErrorCode::UnknownField,
        RequestCode::MissingField => ErrorCode::MissingField,
        RequestCode::InvalidValue => ErrorCode::InvalidValue,
        RequestCode::UnknownUnit => ErrorCode::UnknownUnit,
        RequestCode::InvalidRange => ErrorCode::InvalidRange,
        RequestCode::RangeTooLong => ErrorCode::RangeTooLong,
        RequestCode::TooManyPoints => ErrorCode::TooManyPoints,
        RequestCode::UnknownProperty => {
            // The same wording as the latest-value endpoints.
            let name = body["property"].as_str().unwrap_or_default();
            return ApiError::unknown_property("property", name, device, offered);
        }
    };
    let err = ApiError::new(code, e.detail);
    match e.field {
        Some(field) => err.with_field(field),
        None => err,
    }
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Closed => ApiError::new(ErrorCode::NotReady, "the measurement store is closed"),
        busy @ StoreError::Busy { .. } => ApiError::rate_limited(busy.to_string(), 1),
        other => {
            tracing::error!(error = %other, "time-series query failed");
            ApiError::internal("the time-series query failed; see the agent log")
        }
    }
}
