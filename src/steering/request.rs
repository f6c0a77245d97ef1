//! A steering request as steering takes it: typed and already valid. The API
//! parses and validates bodies into it (`api::steering::parse`), with the
//! [`Context`] the service gives it (the time, the site's SoC, the configured
//! grid limits).
//!
//! Beside it, the body as the caller sent it ([`RawBody`], opaque here) and the
//! [`Answer`] to an accepted request, which the audit log and the idempotency
//! keys keep.
//!
//! Plain data. This file must not touch timelines, devices or the store.

use super::value::{CurtailmentValue, EssSetting, GridLimit};

/// A valid request. Components not carried are `None` and keep their setting.
#[derive(Clone, Debug, PartialEq)]
pub struct SteeringRequest {
    pub ess: Option<EssSetting>,
    pub curtailment: Option<CurtailmentValue>,
    /// Set to `Some(false)` by rule 3 when a site request carries both the
    /// storage setting and the curtailment and leaves this out.
    pub maximize_grid_import: Option<bool>,
    pub grid_limit: Option<GridLimit>,
    pub valid_from: Option<i64>,
    pub valid_until: i64,
}

impl SteeringRequest {
    /// When the request takes effect: `validFrom`, or now when absent or past.
    pub fn effective_from(&self, now_ms: i64) -> i64 {
        self.valid_from.map_or(now_ms, |f| f.max(now_ms))
    }
}

/// What validation needs to know of the site, at the time of the request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Context {
    pub now_ms: i64,
    /// The site's capacity-weighted SoC now, when known (for `untilSoc`).
    pub site_soc: Option<f64>,
    /// The site's configured grid limits (a `gridLimit` may only tighten them).
    pub limits: ConfiguredLimits,
    /// The controller's clock is known not to be synchronised: answers that
    /// compare the partner's times with it say so.
    pub clock_unsynchronised: bool,
}

/// A site's configured grid limits in W; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConfiguredLimits {
    pub max_import_w: Option<f64>,
    pub max_export_w: Option<f64>,
}

impl ConfiguredLimits {
    /// The limits a site's config (or a change of it) gives.
    pub fn of(
        max_import: Option<crate::config::Power>,
        max_export: Option<crate::config::Power>,
    ) -> Self {
        Self {
            max_import_w: max_import.map(|p| p.watts()),
            max_export_w: max_export.map(|p| p.watts()),
        }
    }
}

/// A request body as the caller sent it, in the API's own rendering. Steering
/// keeps it for the audit log and for idempotent replays, and never reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawBody(pub String);

/// The answer to an accepted request: the body as received and the request id
/// it was given. Replayed as it is for the same `Idempotency-Key`, the same
/// operation and the same body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub body: RawBody,
    pub request_id: String,
    /// The method and path it answered; empty for an answer stored before
    /// operations were kept (then only the body is compared).
    pub operation: String,
}
