//! Steering request bodies: from a `serde_json::Value` to a typed
//! [`SteeringRequest`], or a [`Rejection`] naming the code, the field and the bad
//! value (`api.md`, "Sites and steering").
//!
//! Pure: the caller passes the time and the site's SoC. This file must not touch
//! timelines, devices or the store.

use serde_json::Value;

use super::value::{CurtailmentValue, EssSetting, GridLimit};

/// The longest validity ahead accepted (catches seconds-vs-milliseconds mistakes).
pub const MAX_AHEAD_MS: i64 = 31 * 24 * 3600 * 1000;

/// Which POST endpoint the body came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /sites/{s}/steering`
    Site,
    /// `POST /sites/{s}/steering/ess`
    Ess,
    /// `POST /sites/{s}/steering/curtailment`
    Curtailment,
    /// `POST /sites/{s}/steering/grid-limit`
    GridLimit,
}

impl Endpoint {
    pub const fn wire_name(self) -> &'static str {
        match self {
            Endpoint::Site => "site",
            Endpoint::Ess => "ess",
            Endpoint::Curtailment => "curtailment",
            Endpoint::GridLimit => "gridLimit",
        }
    }
}

/// A valid request. Components not carried are `None` and keep their setting.
#[derive(Clone, Debug, PartialEq)]
pub struct SteeringRequest {
    pub ess: Option<EssSetting>,
    pub curtailment: Option<CurtailmentValue>,
    /// Set to `Some(false)` by rule 3 when a site request leaves it out.
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

/// What the caller knows that validation needs.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    pub now_ms: i64,
    /// The site's capacity-weighted SoC now, when known (for `untilSoc`).
    pub site_soc: Option<f64>,
    /// The site's configured grid limits (a `gridLimit` may only tighten them).
    pub limits: ConfiguredLimits,
}

/// A site's configured grid limits in W; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConfiguredLimits {
    pub max_import_w: Option<f64>,
    pub max_export_w: Option<f64>,
}

/// Machine codes of a refused body; the API maps them to its problem codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectCode {
    UnknownField,
    MissingField,
    InvalidValue,
    UnknownUnit,
    Expired,
}

impl RejectCode {
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectCode::UnknownField => "unknown_field",
            RejectCode::MissingField => "missing_field",
            RejectCode::InvalidValue => "invalid_value",
            RejectCode::UnknownUnit => "unknown_unit",
            RejectCode::Expired => "expired",
        }
    }
}

/// Why a body was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{detail}")]
pub struct Rejection {
    pub code: RejectCode,
    /// Dotted path of the field at fault, e.g. `energyStorageSetting.unit`.
    pub field: Option<String>,
    pub detail: String,
}

fn reject(code: RejectCode, field: &str, detail: impl Into<String>) -> Rejection {
    Rejection {
        code,
        field: (!field.is_empty()).then(|| field.to_string()),
        detail: detail.into(),
    }
}

/// Parses and validates a body for `endpoint`.
pub fn parse(endpoint: Endpoint, body: &Value, ctx: Context) -> Result<SteeringRequest, Rejection> {
    let obj = object(body, "")?;
    const ONE: &[&str] = &["setting", "validFrom", "validUntil"];
    let (ess_key, curt_key, grid_key, allowed): (&str, &str, &str, &[&str]) = match endpoint {
        Endpoint::Site => (
            "energyStorageSetting",
            "productionCurtailment",
            "gridLimit",
            &[
                "energyStorageSetting",
                "productionCurtailment",
                "maximizeGridImport",
                "gridLimit",
                "validFrom",
                "validUntil",
            ],
        ),
        Endpoint::Ess => ("setting", "", "", ONE),
        Endpoint::Curtailment => ("", "setting", "", ONE),
        Endpoint::GridLimit => ("", "", "setting", ONE),
    };
    no_unknown(obj, allowed, "")?;

    let valid_from = match present(obj, "validFrom") {
        Some(v) => Some(epoch_ms(v, "validFrom")?),
        None => None,
    };
    let valid_until = match present(obj, "validUntil") {
        Some(v) => epoch_ms(v, "validUntil")?,
        None => {
            return Err(reject(
                RejectCode::MissingField,
                "validUntil",
                "validUntil is required: the end of validity in epoch milliseconds",
            ))
        }
    };
    check_validity(valid_from, valid_until, ctx.now_ms)?;

    let mut req = SteeringRequest {
        ess: None,
        curtailment: None,
        maximize_grid_import: None,
        grid_limit: None,
        valid_from,
        valid_until,
    };
    if !ess_key.is_empty() {
        req.ess = match present(obj, ess_key) {
            Some(v) => Some(ess_setting(v, ess_key, ctx.site_soc)?),
            None if endpoint == Endpoint::Ess => return Err(missing_setting(ess_key)),
            None => None,
        };
    }
    if !curt_key.is_empty() {
        req.curtailment = match present(obj, curt_key) {
            Some(v) => Some(curtailment(v, curt_key)?),
            None if endpoint == Endpoint::Curtailment => return Err(missing_setting(curt_key)),
            None => None,
        };
    }
    if !grid_key.is_empty() {
        req.grid_limit = match present(obj, grid_key) {
            Some(v) => Some(grid_limit(v, grid_key, ctx.limits)?),
            None if endpoint == Endpoint::GridLimit => return Err(missing_setting(grid_key)),
            None => None,
        };
    }
    if endpoint == Endpoint::Site {
        req.maximize_grid_import = match present(obj, "maximizeGridImport") {
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                return Err(reject(
                    RejectCode::InvalidValue,
                    "maximizeGridImport",
                    format!("maximizeGridImport must be true or false, found {other}"),
                ))
            }
            None => None,
        };
        if req.ess.is_none()
            && req.curtailment.is_none()
            && req.maximize_grid_import.is_none()
            && req.grid_limit.is_none()
        {
            return Err(reject(
                RejectCode::MissingField,
                "",
                "the request carries no component: give energyStorageSetting, productionCurtailment, maximizeGridImport or gridLimit",
            ));
        }
        // Rule 3: absent means false for the same validity.
        req.maximize_grid_import.get_or_insert(false);
    }
    Ok(req)
}

fn missing_setting(key: &str) -> Rejection {
    reject(RejectCode::MissingField, key, format!("{key} is required"))
}

fn check_validity(from: Option<i64>, until: i64, now: i64) -> Result<(), Rejection> {
    if until <= now {
        return Err(reject(
            RejectCode::Expired,
            "validUntil",
            format!("validUntil {until} is not in the future (now is {now})"),
        ));
    }
    if let Some(from) = from {
        if from >= until {
            return Err(reject(
                RejectCode::InvalidValue,
                "validUntil",
                format!("validUntil {until} must be later than validFrom {from}"),
            ));
        }
    }
    if until - now > MAX_AHEAD_MS {
        return Err(reject(
            RejectCode::InvalidValue,
            "validUntil",
            format!(
                "validUntil {until} is more than 31 days ahead (now is {now}); timestamps are epoch milliseconds"
            ),
        ));
    }
    Ok(())
}

mod fields;

pub use fields::{curtailment, ess_setting, grid_limit};
use fields::{epoch_ms, no_unknown, object, present};

#[cfg(test)]
mod tests;
