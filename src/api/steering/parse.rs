//! Steering request bodies: from a `serde_json::Value` to steering's typed
//! [`SteeringRequest`], or a [`Rejection`] naming the code, the field and the bad
//! value (the request schemas of `openapi.json`).
//!
//! Pure: the steering service gives the [`Context`] (the time, the site's SoC,
//! the configured grid limits). This file must not touch timelines, devices or
//! the store.

use serde_json::{Map, Value};

use crate::api::ErrorCode;
use crate::steering::request::{ConfiguredLimits, Context, SteeringRequest};

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

/// Why a body was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{detail}")]
pub struct Rejection {
    /// One of `unknown_field`, `missing_field`, `invalid_value`, `unknown_unit`,
    /// `expired`.
    pub code: ErrorCode,
    /// Dotted path of the field at fault, e.g. `energyStorageSetting.unit`.
    pub field: Option<String>,
    pub detail: String,
}

fn reject(code: ErrorCode, field: &str, detail: impl Into<String>) -> Rejection {
    Rejection {
        code,
        field: (!field.is_empty()).then(|| field.to_string()),
        detail: detail.into(),
    }
}

/// Parses and validates a body for `endpoint`.
pub fn parse(
    endpoint: Endpoint,
    body: &Value,
    ctx: &Context,
) -> Result<SteeringRequest, Rejection> {
    let obj = object(body, "")?;
    let Keys {
        ess: ess_key,
        curtailment: curt_key,
        grid: grid_key,
        allowed,
    } = Keys::of(endpoint);
    no_unknown(obj, allowed, "")?;

    let (valid_from, valid_until) = validity(obj, ctx)?;

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
        site_rules(obj, &mut req)?;
    }
    Ok(req)
}

/// Where a body for one endpoint gives its settings: the members of the
/// storage setting, the curtailment and the grid limit (empty: not on this
/// endpoint), and every member it may hold.
struct Keys {
    ess: &'static str,
    curtailment: &'static str,
    grid: &'static str,
    allowed: &'static [&'static str],
}

impl Keys {
    /// An endpoint of one setting: no member but `setting` and the validity.
    const ONE: Keys = Keys {
        ess: "",
        curtailment: "",
        grid: "",
        allowed: &["setting", "validFrom", "validUntil"],
    };

    /// The members of `endpoint`'s body.
    fn of(endpoint: Endpoint) -> Keys {
        match endpoint {
            Endpoint::Site => Keys {
                ess: "energyStorageSetting",
                curtailment: "productionCurtailment",
                grid: "gridLimit",
                allowed: &[
                    "energyStorageSetting",
                    "productionCurtailment",
                    "maximizeGridImport",
                    "gridLimit",
                    "validFrom",
                    "validUntil",
                ],
            },
            Endpoint::Ess => Keys {
                ess: "setting",
                ..Keys::ONE
            },
            Endpoint::Curtailment => Keys {
                curtailment: "setting",
                ..Keys::ONE
            },
            Endpoint::GridLimit => Keys {
                grid: "setting",
                ..Keys::ONE
            },
        }
    }
}

/// `validFrom` (optional) and `validUntil` (required), checked against the
/// time in `ctx`.
fn validity(obj: &Map<String, Value>, ctx: &Context) -> Result<(Option<i64>, i64), Rejection> {
    let valid_from = match present(obj, "validFrom") {
        Some(v) => Some(epoch_ms(v, "validFrom")?),
        None => None,
    };
    let valid_until = match present(obj, "validUntil") {
        Some(v) => epoch_ms(v, "validUntil")?,
        None => {
            return Err(reject(
                ErrorCode::MissingField,
                "validUntil",
                "validUntil is required: the end of validity in epoch milliseconds",
            ))
        }
    };
    check_validity(valid_from, valid_until, ctx)?;
    Ok((valid_from, valid_until))
}

/// What only the site endpoint has: `maximizeGridImport`, at least one
/// component, and rule 3.
fn site_rules(obj: &Map<String, Value>, req: &mut SteeringRequest) -> Result<(), Rejection> {
    req.maximize_grid_import = match present(obj, "maximizeGridImport") {
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(reject(
                ErrorCode::InvalidValue,
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
            ErrorCode::MissingField,
            "",
            "the request carries no component: give energyStorageSetting, productionCurtailment, maximizeGridImport or gridLimit",
        ));
    }
    // Rule 3: with both the storage setting and the curtailment and no
    // maximizeGridImport, it is false for the same validity; otherwise
    // an absent maximizeGridImport keeps its setting (rule 2).
    if req.ess.is_some() && req.curtailment.is_some() {
        req.maximize_grid_import.get_or_insert(false);
    }
    Ok(())
}

fn missing_setting(key: &str) -> Rejection {
    reject(ErrorCode::MissingField, key, format!("{key} is required"))
}

/// Times before 1973-03-03 in ms are 5138 and later in seconds: a
/// `validUntil` below this was most likely given in seconds.
const SECONDS_BELOW: i64 = 100_000_000_000;

/// A hint for a time that looks like seconds, naming the ms value meant.
fn seconds_hint(t: i64) -> String {
    if (1..SECONDS_BELOW).contains(&t) {
        format!(
            "; it looks like seconds since the epoch: times are in milliseconds, {} for that instant",
            t * 1000
        )
    } else {
        String::new()
    }
}

fn check_validity(from: Option<i64>, until: i64, ctx: &Context) -> Result<(), Rejection> {
    let now = ctx.now_ms;
    // Said where a partner's time is compared with a clock known to be wrong.
    let clock = if ctx.clock_unsynchronised {
        "; the controller's clock is not synchronised, so its time may be wrong"
    } else {
        ""
    };
    if until <= now {
        return Err(reject(
            ErrorCode::Expired,
            "validUntil",
            format!(
                "validUntil {until} is not in the future (now is {now}{clock}){}",
                seconds_hint(until)
            ),
        ));
    }
    if let Some(from) = from {
        if from >= until {
            return Err(reject(
                ErrorCode::InvalidValue,
                "validUntil",
                format!("validUntil {until} must be later than validFrom {from}"),
            ));
        }
    }
    if until - now > MAX_AHEAD_MS {
        return Err(reject(
            ErrorCode::InvalidValue,
            "validUntil",
            format!(
                "validUntil {until} is more than 31 days ahead (now is {now}{clock}); timestamps are epoch milliseconds"
            ),
        ));
    }
    Ok(())
}

mod fields;

use fields::{curtailment, epoch_ms, ess_setting, grid_limit, no_unknown, object, present};

#[cfg(test)]
mod tests;
