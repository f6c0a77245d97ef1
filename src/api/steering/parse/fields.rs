//! Reading the members of a steering body: presence, objects, unknown fields,
//! numbers, units, and the two component values (`EssSetting`,
//! `CurtailmentValue`). Each problem names its dotted field path.

use serde_json::{Map, Value};

use super::{reject, ConfiguredLimits, Rejection};
use crate::api::bounds::POWER_VALUE_MAX;
use crate::api::ErrorCode;
use crate::model::{PowerUnit, PowerValue};
use crate::steering::value::{CurtailmentValue, EssSetting, GridLimit};

/// A field that is there and not `null` (`null` counts as absent).
pub(super) fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

pub(super) fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, Rejection> {
    v.as_object().ok_or_else(|| {
        let what = if path.is_empty() { "the body" } else { path };
        reject(
            ErrorCode::InvalidValue,
            path,
            format!("{what} must be a JSON object, found {v}"),
        )
    })
}

pub(super) fn no_unknown(
    obj: &Map<String, Value>,
    allowed: &[&str],
    path: &str,
) -> Result<(), Rejection> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(reject(
            ErrorCode::UnknownField,
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
pub(super) fn epoch_ms(v: &Value, field: &str) -> Result<i64, Rejection> {
    let bad = || {
        reject(
            ErrorCode::InvalidValue,
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
            ErrorCode::MissingField,
            &field,
            format!("{field} is required"),
        )
    })?;
    match v.as_f64() {
        Some(f) if f.is_finite() => Ok(f),
        _ => Err(reject(
            ErrorCode::InvalidValue,
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
            ErrorCode::InvalidValue,
            &field,
            format!("{field} must be a string, found {other}"),
        )),
        None => Err(reject(
            ErrorCode::MissingField,
            &field,
            format!("{field} is required"),
        )),
    }
}

/// A power value at most [`POWER_VALUE_MAX`] in magnitude in its own unit,
/// so its W equivalent is finite.
fn power(value: f64, unit_str: &str, path: &str, allowed: &str) -> Result<PowerValue, Rejection> {
    let unit: PowerUnit = unit_str.parse().map_err(|_| {
        reject(
            ErrorCode::UnknownUnit,
            &join(path, "unit"),
            format!("unknown unit {unit_str:?} for {path}; expected {allowed}"),
        )
    })?;
    if value.abs() > POWER_VALUE_MAX {
        let field = join(path, "value");
        return Err(reject(
            ErrorCode::InvalidValue,
            &field,
            format!("{field} {value} {unit} is beyond the largest power taken, {POWER_VALUE_MAX:e} {unit} in magnitude"),
        ));
    }
    Ok(PowerValue { value, unit })
}

/// `EssSetting`: a power, a power with `untilSoc`, or `{"mode": "idle"}`.
pub(super) fn ess_setting(
    v: &Value,
    path: &str,
    site_soc: Option<f64>,
) -> Result<EssSetting, Rejection> {
    let obj = object(v, path)?;
    if obj.contains_key("mode") {
        no_unknown(obj, &["mode"], path)?;
        let field = join(path, "mode");
        return match obj.get("mode") {
            Some(Value::String(m)) if m == "idle" => Ok(EssSetting::Idle),
            other => Err(reject(
                ErrorCode::InvalidValue,
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
            ErrorCode::InvalidValue,
            &field,
            format!("{field} must be a SoC from 0 to 100 %, found {target}"),
        ));
    }
    // A zero power moves the SoC towards no target: the storage holds 0 W
    // until the validity ends, as `steering::decide` runs it.
    let w = p.as_watts();
    if let Some(soc) = site_soc {
        let away = (w > 0.0 && target > soc) || (w < 0.0 && target < soc);
        if away {
            let verb = if w > 0.0 { "discharging" } else { "charging" };
            return Err(reject(
                ErrorCode::InvalidValue,
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
pub(super) fn curtailment(v: &Value, path: &str) -> Result<CurtailmentValue, Rejection> {
    let obj = object(v, path)?;
    no_unknown(obj, &["value", "unit"], path)?;
    let value = number(obj, "value", path)?;
    let unit_str = unit(obj, path)?;
    let field = join(path, "value");
    if value < 0.0 {
        return Err(reject(
            ErrorCode::InvalidValue,
            &field,
            format!("{field} must not be negative, found {value}"),
        ));
    }
    if unit_str == "%" {
        if value > 100.0 {
            return Err(reject(
                ErrorCode::InvalidValue,
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

/// `GridLimit`: `maxImport` and/or `maxExport`, each a power of at least 0 W that
/// does not loosen the configured limit of its direction (`0` on `maxExport` is
/// zero export).
pub(super) fn grid_limit(
    v: &Value,
    path: &str,
    configured: ConfiguredLimits,
) -> Result<GridLimit, Rejection> {
    let obj = object(v, path)?;
    no_unknown(obj, &["maxImport", "maxExport"], path)?;
    let member = |key: &str, limit: Option<f64>| -> Result<Option<PowerValue>, Rejection> {
        let Some(v) = present(obj, key) else {
            return Ok(None);
        };
        let field = join(path, key);
        let o = object(v, &field)?;
        no_unknown(o, &["value", "unit"], &field)?;
        let value = number(o, "value", &field)?;
        let p = power(value, unit(o, &field)?, &field, "W, kW or MW")?;
        let w = p.as_watts();
        if w < 0.0 {
            return Err(reject(
                ErrorCode::InvalidValue,
                &join(&field, "value"),
                format!("{field} must not be negative, found {value} {}", p.unit),
            ));
        }
        if let Some(limit) = limit {
            if w > limit {
                return Err(reject(
                    ErrorCode::InvalidValue,
                    &field,
                    format!(
                        "{field} {value} {} is looser than the site's configured limit of {limit} W: a temporary limit may only tighten it",
                        p.unit
                    ),
                ));
            }
        }
        Ok(Some(p))
    };
    let g = GridLimit {
        max_import: member("maxImport", configured.max_import_w)?,
        max_export: member("maxExport", configured.max_export_w)?,
    };
    if g.max_import.is_none() && g.max_export.is_none() {
        let what = if path.is_empty() { "gridLimit" } else { path };
        return Err(reject(
            ErrorCode::MissingField,
            path,
            format!("{what} needs maxImport, maxExport or both"),
        ));
    }
    Ok(g)
}
