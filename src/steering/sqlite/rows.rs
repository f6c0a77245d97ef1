//! How steering's rows hold their values in SQLite: component values, audit
//! records and idempotency answers as JSON text.
//!
//! This is the store's format, not the API's: it keeps the shapes the first
//! releases wrote (then the API's), so that databases written by them still
//! load, and it may change only with a migration of the rows. It is the one
//! place in steering that knows JSON (ARCHITECTURE.md, "Only api and uplink
//! know JSON").

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::modbus::control::{Originals, RegWrite};
use crate::model::{PowerUnit, PowerValue};
use crate::steering::audit::{
    describe, AuditEvent, AuditKind, ControlEvent, ForwardResult, LimitReason, RequestBody,
};
use crate::steering::decide::Command;
use crate::steering::request::{Answer, RawBody};
use crate::steering::value::{Component, ComponentValue, CurtailmentValue, EssSetting, GridLimit};

/// A power, a percentage (`unit = "%"`, curtailment only), or a power with
/// `untilSoc` (ESS only).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Amount {
    value: f64,
    unit: String,
    #[serde(rename = "untilSoc", default, skip_serializing_if = "Option::is_none")]
    until_soc: Option<f64>,
}

impl Amount {
    fn power(p: &PowerValue) -> Amount {
        Amount {
            value: p.value,
            unit: p.unit.as_str().to_string(),
            until_soc: None,
        }
    }

    fn as_power(&self) -> Option<PowerValue> {
        Some(PowerValue {
            value: self.value,
            unit: self.unit.parse::<PowerUnit>().ok()?,
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Idle,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Ess {
    Mode { mode: Mode },
    Amount(Amount),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_import: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_export: Option<Amount>,
}

fn text<T: Serialize>(v: &T) -> String {
    // Plain structs of numbers, strings and options: serializing cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

/// A timeline entry's value as stored.
pub fn encode_value(v: &ComponentValue) -> String {
    match v {
        ComponentValue::Ess(EssSetting::Idle) => text(&Ess::Mode { mode: Mode::Idle }),
        ComponentValue::Ess(EssSetting::Power(p)) => text(&Amount::power(p)),
        ComponentValue::Ess(EssSetting::UntilSoc { power, until_soc }) => text(&Amount {
            until_soc: Some(*until_soc),
            ..Amount::power(power)
        }),
        ComponentValue::Curtailment(CurtailmentValue::Power(p)) => text(&Amount::power(p)),
        ComponentValue::Curtailment(CurtailmentValue::Percent(pct)) => text(&Amount {
            value: *pct,
            unit: "%".into(),
            until_soc: None,
        }),
        ComponentValue::MaximizeGridImport(b) => text(b),
        ComponentValue::GridLimit(g) => text(&Limits {
            max_import: g.max_import.as_ref().map(Amount::power),
            max_export: g.max_export.as_ref().map(Amount::power),
        }),
    }
}

/// A stored value of `component`; `None` when it is not one.
pub fn decode_value(component: Component, stored: &str) -> Option<ComponentValue> {
    Some(match component {
        Component::Ess => ComponentValue::Ess(match serde_json::from_str(stored).ok()? {
            Ess::Mode { mode: Mode::Idle } => EssSetting::Idle,
            Ess::Amount(a) => match a.until_soc {
                None => EssSetting::Power(a.as_power()?),
                Some(until_soc) => EssSetting::UntilSoc {
                    power: a.as_power()?,
                    until_soc,
                },
            },
        }),
        Component::Curtailment => {
            let a: Amount = serde_json::from_str(stored).ok()?;
            ComponentValue::Curtailment(match (a.unit.as_str(), a.until_soc) {
                ("%", None) => CurtailmentValue::Percent(a.value),
                (_, None) => CurtailmentValue::Power(a.as_power()?),
                (_, Some(_)) => return None,
            })
        }
        Component::MaximizeGridImport => {
            ComponentValue::MaximizeGridImport(serde_json::from_str(stored).ok()?)
        }
        Component::GridLimit => {
            let l: Limits = serde_json::from_str(stored).ok()?;
            let power = |a: Option<Amount>| match a {
                None => Some(None),
                Some(a) => a.as_power().map(Some),
            };
            ComponentValue::GridLimit(GridLimit {
                max_import: power(l.max_import)?,
                max_export: power(l.max_export)?,
            })
        }
    })
}

/// An audit record as stored (the history record of the first releases).
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Record {
    Request(RequestRecord),
    Write(WriteRecord),
    #[serde(rename = "modbusLimit")]
    ModbusLimit(LimitRecord),
    #[serde(rename = "forwardedWrite")]
    ForwardedWrite(ForwardedRecord),
    Csip(CsipRecord),
    Eebus(EebusRecord),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CsipRecord {
    time: i64,
    mrid: String,
    program: String,
    event: String,
    limits: String,
    response: Option<u8>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EebusRecord {
    time: i64,
    use_case: String,
    state: String,
    limit_w: Option<f64>,
    failsafe: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LimitRecord {
    time: i64,
    client: String,
    unit_id: u8,
    register: Option<u16>,
    max_export: Option<Watts>,
    reason: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForwardedRecord {
    time: i64,
    client: String,
    device_reference: String,
    register: u16,
    values: Vec<u16>,
    result: String,
    exception: Option<u8>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestRecord {
    time: i64,
    source: String,
    token: String,
    action: String,
    body: Value,
    request_id: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WriteRecord {
    time: i64,
    device_reference: String,
    component: Option<String>,
    action: String,
    setpoint: Option<Watts>,
    /// `ok` or `error`; what `error` says already.
    result: String,
    confirmed: bool,
    error: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Watts {
    value: f64,
    unit: String,
}

/// A DELETE's body: `{"component": name or null}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ended {
    component: Option<String>,
}

/// An audit record as stored.
pub fn encode_record(e: &AuditEvent) -> String {
    let record = match &e.kind {
        AuditKind::Request {
            source,
            token,
            action,
            body,
            request_id,
        } => Record::Request(RequestRecord {
            time: e.at_ms,
            source: source.clone(),
            token: token.clone(),
            action: action.clone(),
            body: body_value(body),
            request_id: request_id.clone(),
        }),
        AuditKind::Write {
            device,
            component,
            command,
            error,
            confirmed,
        } => Record::Write(WriteRecord {
            time: e.at_ms,
            device_reference: device.clone(),
            component: component.map(|c| c.wire_name().to_string()),
            action: describe(*command).to_string(),
            setpoint: match command {
                Command::EssPower(w) | Command::ProductionLimit(w) => Some(watts(w.round())),
                Command::EssRelease | Command::ProductionRelease => None,
            },
            result: if error.is_none() { "ok" } else { "error" }.into(),
            confirmed: *confirmed,
            error: error.clone(),
        }),
        AuditKind::ModbusLimit {
            client,
            unit_id,
            register,
            max_export_w,
            reason,
        } => Record::ModbusLimit(LimitRecord {
            time: e.at_ms,
            client: client.clone(),
            unit_id: *unit_id,
            register: *register,
            max_export: max_export_w.map(watts),
            reason: reason.wire_name().into(),
        }),
        AuditKind::ForwardedWrite {
            client,
            device,
            register,
            values,
            result,
            exception,
        } => Record::ForwardedWrite(ForwardedRecord {
            time: e.at_ms,
            client: client.clone(),
            device_reference: device.clone(),
            register: *register,
            values: values.clone(),
            result: result.wire_name().into(),
            exception: *exception,
        }),
        AuditKind::Csip {
            mrid,
            program,
            event,
            limits,
            response,
        } => Record::Csip(CsipRecord {
            time: e.at_ms,
            mrid: mrid.clone(),
            program: program.clone(),
            event: event.wire_name().into(),
            limits: limits.clone(),
            response: *response,
        }),
        AuditKind::Eebus {
            use_case,
            state,
            limit_w,
            failsafe,
        } => Record::Eebus(EebusRecord {
            time: e.at_ms,
            use_case: use_case.clone(),
            state: state.clone(),
            limit_w: *limit_w,
            failsafe: *failsafe,
        }),
    };
    text(&record)
}

/// A request's body as recorded: the JSON posted (its text where it is
/// none), or which component an end ended.
fn body_value(body: &RequestBody) -> Value {
    match body {
        RequestBody::Posted(raw) => {
            serde_json::from_str(&raw.0).unwrap_or_else(|_| Value::String(raw.0.clone()))
        }
        RequestBody::Ended(c) => serde_json::to_value(Ended {
            component: c.map(|c| c.wire_name().to_string()),
        })
        .unwrap_or_default(),
    }
}

fn watts(value: f64) -> Watts {
    Watts {
        value,
        unit: "W".into(),
    }
}

/// A stored audit record of `site`; `None` when it is not one.
pub fn decode_record(site: &str, stored: &str) -> Option<AuditEvent> {
    let (at_ms, kind) = match serde_json::from_str(stored).ok()? {
        Record::Request(r) => {
            let ended = match r.action.starts_with("DELETE ") {
                true => serde_json::from_value::<Ended>(r.body.clone()).ok(),
                false => None,
            };
            let body = match ended {
                Some(Ended { component: None }) => RequestBody::Ended(None),
                Some(Ended { component: Some(c) }) => match Component::from_wire(&c) {
                    Some(c) => RequestBody::Ended(Some(c)),
                    None => RequestBody::Posted(RawBody(r.body.to_string())),
                },
                None => RequestBody::Posted(RawBody(r.body.to_string())),
            };
            let kind = AuditKind::Request {
                source: r.source,
                token: r.token,
                action: r.action,
                body,
                request_id: r.request_id,
            };
            (r.time, kind)
        }
        Record::Write(w) => {
            let value = w.setpoint.map(|s| s.value);
            let command = [
                value.map(Command::EssPower),
                Some(Command::EssRelease),
                value.map(Command::ProductionLimit),
                Some(Command::ProductionRelease),
            ]
            .into_iter()
            .flatten()
            .find(|c| describe(*c) == w.action)?;
            let component = match w.component {
                None => None,
                Some(c) => Some(Component::from_wire(&c)?),
            };
            let kind = AuditKind::Write {
                device: w.device_reference,
                component,
                command,
                error: w.error,
                confirmed: w.confirmed,
            };
            (w.time, kind)
        }
        Record::ModbusLimit(l) => {
            let kind = AuditKind::ModbusLimit {
                client: l.client,
                unit_id: l.unit_id,
                register: l.register,
                max_export_w: l.max_export.map(|w| w.value),
                reason: LimitReason::from_wire(&l.reason)?,
            };
            (l.time, kind)
        }
        Record::ForwardedWrite(f) => {
            let kind = AuditKind::ForwardedWrite {
                client: f.client,
                device: f.device_reference,
                register: f.register,
                values: f.values,
                result: ForwardResult::from_wire(&f.result)?,
                exception: f.exception,
            };
            (f.time, kind)
        }
        Record::Csip(c) => {
            let kind = AuditKind::Csip {
                mrid: c.mrid,
                program: c.program,
                event: ControlEvent::from_wire(&c.event)?,
                limits: c.limits,
                response: c.response,
            };
            (c.time, kind)
        }
        Record::Eebus(r) => (
            r.time,
            AuditKind::Eebus {
                use_case: r.use_case,
                state: r.state,
                limit_w: r.limit_w,
                failsafe: r.failsafe,
            },
        ),
    };
    Some(AuditEvent {
        site: site.to_string(),
        at_ms,
        kind,
    })
}

/// The key an answer's operation is stored under, beside the body's fields
/// (no request body has a field of this name).
const OPERATION: &str = "@operation";

/// A device's registers as found: `[[addr, [word, ...]], ...]`.
pub fn encode_points(o: &Originals) -> String {
    let points: Vec<Value> = o
        .points
        .iter()
        .map(|p| serde_json::json!([p.addr, p.values]))
        .collect();
    Value::Array(points).to_string()
}

/// Registers as found; `None` when the text is not such a list.
pub fn decode_points(text: &str) -> Option<Originals> {
    let Value::Array(items) = serde_json::from_str(text).ok()? else {
        return None;
    };
    let points = items
        .iter()
        .map(|item| {
            let addr = u16::try_from(item.get(0)?.as_u64()?).ok()?;
            let values = item
                .get(1)?
                .as_array()?
                .iter()
                .map(|w| u16::try_from(w.as_u64()?).ok())
                .collect::<Option<Vec<u16>>>()?;
            Some(RegWrite { addr, values })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Originals { points })
}

/// An idempotency answer as stored: the body with its `requestId` and the
/// operation it answered.
pub fn encode_answer(a: &Answer) -> String {
    let mut body = match serde_json::from_str(&a.body.0) {
        Ok(Value::Object(o)) => o,
        _ => Map::new(),
    };
    body.insert("requestId".into(), Value::String(a.request_id.clone()));
    body.insert(OPERATION.into(), Value::String(a.operation.clone()));
    Value::Object(body).to_string()
}

/// A stored idempotency answer; `None` when it is not one.
pub fn decode_answer(stored: &str) -> Option<Answer> {
    let Value::Object(mut body) = serde_json::from_str(stored).ok()? else {
        return None;
    };
    let Value::String(request_id) = body.remove("requestId")? else {
        return None;
    };
    let operation = match body.remove(OPERATION) {
        Some(Value::String(op)) => op,
        _ => String::new(),
    };
    Some(Answer {
        body: RawBody(Value::Object(body).to_string()),
        request_id,
        operation,
    })
}

#[cfg(test)]
mod tests;
