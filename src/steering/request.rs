//! Steering request bodies: from a `serde_json::Value` to a typed
//! [`SteeringRequest`], or a [`Rejection`] naming the code, the field and the bad
//! value (`api.md`, "Sites and steering").
//!
//! Pure: the caller passes the time and the site's SoC. This file must not touch
//! timelines, devices or the store.

use serde_json::{Map, Value};

use super::value::{CurtailmentValue, EssSetting};
use crate::model::{PowerUnit, PowerValue};

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
}

impl Endpoint {
    pub const fn wire_name(self) -> &'static str {
        match self {
            Endpoint::Site => "site",
            Endpoint::Ess => "ess",
            Endpoint::Curtailment => "curtailment",
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
    let (ess_key, curt_key, allowed): (&str, &str, &[&str]) = match endpoint {
        Endpoint::Site => (
            "energyStorageSetting",
            "productionCurtailment",
            &[
                "energyStorageSetting",
                "productionCurtailment",
                "maximizeGridImport",
                "validFrom",
                "validUntil",
            ],
        ),
        Endpoint::Ess => ("setting", "", &["setting", "validFrom", "validUntil"]),
        Endpoint::Curtailment => ("", "setting", &["setting", "validFrom", "validUntil"]),
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
        if req.ess.is_none() && req.curtailment.is_none() && req.maximize_grid_import.is_none() {
            return Err(reject(
                RejectCode::MissingField,
                "",
                "the request carries no component: give energyStorageSetting, productionCurtailment or maximizeGridImport",
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

/// A field that is there and not `null` (`null` counts as absent).
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, Rejection> {
    v.as_object().ok_or_else(|| {
        let what = if path.is_empty() { "the body" } else { path };
        reject(
            RejectCode::InvalidValue,
            path,
            format!("{what} must be a JSON object, found {v}"),
        )
    })
}

fn no_unknown(obj: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), Rejection> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(reject(
            RejectCode::UnknownField,
            &join(path, k),
            format!(
                "unknown field {:?}; expected {}",
                join(path, k),
                allowed.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// An integer number of epoch milliseconds.
fn epoch_ms(v: &Value, field: &str) -> Result<i64, Rejection> {
    let bad = || {
        reject(
            RejectCode::InvalidValue,
            field,
            format!("{field} must be an integer of epoch milliseconds, found {v}"),
        )
    };
    if let Some(i) = v.as_i64() {
        return Ok(i);
    }
    let f = v.as_f64().ok_or_else(bad)?;
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 {
        Ok(f as i64)
    } else {
        Err(bad())
    }
}

fn number(obj: &Map<String, Value>, key: &str, path: &str) -> Result<f64, Rejection> {
    let field = join(path, key);
    let v = present(obj, key).ok_or_else(|| {
        reject(
            RejectCode::MissingField,
            &field,
            format!("{field} is required"),
        )
    })?;
    match v.as_f64() {
        Some(f) if f.is_finite() => Ok(f),
        _ => Err(reject(
            RejectCode::InvalidValue,
            &field,
            format!("{field} must be a finite number, found {v}"),
        )),
    }
}

fn unit<'a>(obj: &'a Map<String, Value>, path: &str) -> Result<&'a str, Rejection> {
    let field = join(path, "unit");
    match present(obj, "unit") {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(reject(
            RejectCode::InvalidValue,
            &field,
            format!("{field} must be a string, found {other}"),
        )),
        None => Err(reject(
            RejectCode::MissingField,
            &field,
            format!("{field} is required"),
        )),
    }
}

/// A power value whose W equivalent is finite.
fn power(value: f64, unit_str: &str, path: &str, allowed: &str) -> Result<PowerValue, Rejection> {
    let unit: PowerUnit = unit_str.parse().map_err(|_| {
        reject(
            RejectCode::UnknownUnit,
            &join(path, "unit"),
            format!("unknown unit {unit_str:?} for {path}; expected {allowed}"),
        )
    })?;
    let p = PowerValue { value, unit };
    if !p.as_watts().is_finite() {
        return Err(reject(
            RejectCode::InvalidValue,
            &join(path, "value"),
            format!("{value} {unit} is not a finite power"),
        ));
    }
    Ok(p)
}

/// `EssSetting`: a power, a power with `untilSoc`, or `{"mode": "idle"}`.
pub fn ess_setting(v: &Value, path: &str, site_soc: Option<f64>) -> Result<EssSetting, Rejection> {
    let obj = object(v, path)?;
    if obj.contains_key("mode") {
        no_unknown(obj, &["mode"], path)?;
        let field = join(path, "mode");
        return match obj.get("mode") {
            Some(Value::String(m)) if m == "idle" => Ok(EssSetting::Idle),
            other => Err(reject(
                RejectCode::InvalidValue,
                &field,
                format!(
                    "{field} must be \"idle\", found {}",
                    other.cloned().unwrap_or(Value::Null)
                ),
            )),
        };
    }
    no_unknown(obj, &["value", "unit", "untilSoc"], path)?;
    let value = number(obj, "value", path)?;
    let unit_str = unit(obj, path)?;
    let p = power(value, unit_str, path, "W, kW or MW")?;
    let Some(_) = present(obj, "untilSoc") else {
        return Ok(EssSetting::Power(p));
    };
    let field = join(path, "untilSoc");
    let target = number(obj, "untilSoc", path)?;
    if !(0.0..=100.0).contains(&target) {
        return Err(reject(
            RejectCode::InvalidValue,
            &field,
            format!("{field} must be a SoC from 0 to 100 %, found {target}"),
        ));
    }
    let w = p.as_watts();
    if w == 0.0 {
        return Err(reject(
            RejectCode::InvalidValue,
            &field,
            format!("{field} needs a non-zero power to reach {target} %"),
        ));
    }
    if let Some(soc) = site_soc {
        let away = (w > 0.0 && target > soc) || (w < 0.0 && target < soc);
        if away {
            let verb = if w > 0.0 { "discharging" } else { "charging" };
            return Err(reject(
                RejectCode::InvalidValue,
                &field,
                format!(
                    "{verb} moves the site SoC ({soc:.1} %) away from {field} {target} %: use a {} value",
                    if w > 0.0 { "negative (charge)" } else { "positive (discharge)" }
                ),
            ));
        }
    }
    Ok(EssSetting::UntilSoc {
        power: p,
        until_soc: target,
    })
}

/// `CurtailmentValue`: a power or a percentage, never negative, % at most 100.
pub fn curtailment(v: &Value, path: &str) -> Result<CurtailmentValue, Rejection> {
    let obj = object(v, path)?;
    no_unknown(obj, &["value", "unit"], path)?;
    let value = number(obj, "value", path)?;
    let unit_str = unit(obj, path)?;
    let field = join(path, "value");
    if value < 0.0 {
        return Err(reject(
            RejectCode::InvalidValue,
            &field,
            format!("{field} must not be negative, found {value}"),
        ));
    }
    if unit_str == "%" {
        if value > 100.0 {
            return Err(reject(
                RejectCode::InvalidValue,
                &field,
                format!(
                    "{field} is a share of the rated production power: 0 to 100 %, found {value}"
                ),
            ));
        }
        return Ok(CurtailmentValue::Percent(value));
    }
    Ok(CurtailmentValue::Power(power(
        value,
        unit_str,
        path,
        "W, kW, MW or %",
    )?))
}

#[cfg(test)]
mod tests;
