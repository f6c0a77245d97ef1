//! The JSON of steering's typed values: the bodies of the steering endpoints
//! (their schemas in `openapi.json`) and of the uplink's retained steering
//! state, which renders [`site_state`] too. The one place their wire shapes
//! are written; `openapi.json` describes them and `tests/it/openapi.rs` checks
//! real answers against it.
//!
//! Pure renderings of values; nothing here reads state.

use crate::steering::sources::Kind;
use serde_json::{json, Map, Value};

use crate::api::number::{Exact, Num};
use crate::config::EssFallback;
use crate::model::time::{now_ms, SimulatedClock};
use crate::model::PowerValue;
use crate::steering::audit::{
    describe, AuditEvent, AuditKind, ControlEvent, ForwardResult, LimitReason, RequestBody,
};
use crate::steering::decide::Command;
use crate::steering::limits::Limit;
use crate::steering::view::{
    setpoint_w, Allocation, DeviceState, GridLoopState, LimitNote, SiteState, SiteView,
};
use crate::steering::{
    Answer, Component, ComponentValue, CurtailmentValue, EssSetting, GridLimit, RawBody,
};
use crate::steering::{Entry, StoredEntry};

/// `{"value", "unit": "W"}`, or `null` (none, or released).
fn watts(w: Option<f64>) -> Value {
    w.map_or(Value::Null, |w| json!({"value": Num(w), "unit": "W"}))
}

fn power(p: &PowerValue) -> Value {
    json!({"value": Exact(p.value), "unit": p.unit.as_str()})
}

/// A body as received (it was JSON when it came).
fn raw(body: &RawBody) -> Value {
    serde_json::from_str(&body.0).unwrap_or_else(|_| Value::String(body.0.clone()))
}

/// `GET /sites/{s}`, and each item of `GET /sites`; with `simulation`
/// (the simulated time now and its speed) under `sitegate demo`.
pub fn site(v: &SiteView, simulated: Option<SimulatedClock>) -> Value {
    let mut out = json!({
        "siteReference": v.reference,
        "name": v.name,
        "devices": v.devices,
        "gridConnection": {"maxImport": watts(v.max_import_w), "maxExport": watts(v.max_export_w)},
        "ratedProductionPower": {"value": Num(v.rated_production_w), "unit": "W"},
        "fulfilment": {
            "ess": v.ess_fulfilment.wire_name(),
            "curtailment": v.curtailment_fulfilment.wire_name(),
        },
        "essFallback": match v.ess_fallback {
            EssFallback::Auto => "auto",
            EssFallback::Idle => "idle",
        },
        "controlIntervalMs": v.control_interval_ms,
        "revertTimeoutS": v.revert_timeout_s,
    });
    if let Some(c) = simulated {
        out["simulation"] = json!({"time": c.at(now_ms()), "speed": Num(c.speed)});
    }
    out
}

/// An `EssSetting`: a power, a power with `untilSoc`, or `{"mode": "idle"}`.
fn ess(e: &EssSetting) -> Value {
    match e {
        EssSetting::Power(p) => power(p),
        EssSetting::UntilSoc {
            power: p,
            until_soc,
        } => {
            json!({"value": Exact(p.value), "unit": p.unit.as_str(), "untilSoc": Exact(*until_soc)})
        }
        EssSetting::Idle => json!({"mode": "idle"}),
    }
}

fn curtailment(c: &CurtailmentValue) -> Value {
    match c {
        CurtailmentValue::Power(p) => power(p),
        CurtailmentValue::Percent(pct) => json!({"value": Exact(*pct), "unit": "%"}),
    }
}

/// The members given, and only those.
fn grid_limit(g: &GridLimit) -> Value {
    let mut o = Map::new();
    for (key, p) in [("maxImport", &g.max_import), ("maxExport", &g.max_export)] {
        if let Some(p) = p {
            o.insert(key.into(), power(p));
        }
    }
    Value::Object(o)
}

/// An entry's validity and request id, with its value under `key`.
fn entry<T>(e: &Entry<T>, key: &str, value: Value) -> Value {
    let mut v = json!({
        "validFrom": e.from,
        "validUntil": e.until,
        "requestId": e.request_id,
    });
    v[key] = value;
    v
}

/// A scheduled entry: `setting` (or `value` for maximize grid import) and its
/// component.
fn scheduled(s: &StoredEntry) -> Value {
    let (key, value) = match &s.entry.value {
        ComponentValue::Ess(e) => ("setting", ess(e)),
        ComponentValue::Curtailment(c) => ("setting", curtailment(c)),
        ComponentValue::MaximizeGridImport(b) => ("value", json!(b)),
        ComponentValue::GridLimit(g) => ("setting", grid_limit(g)),
    };
    let mut v = entry(&s.entry, key, value);
    v["component"] = json!(s.component.wire_name());
    v
}

fn device(d: &DeviceState) -> Value {
    json!({
        "deviceReference": d.device,
        "component": d.component.map(Component::wire_name),
        "setpoint": watts(d.setpoint_w),
        "state": d.state.as_str(),
        "writtenAt": d.written_at_ms,
        "confirmed": d.confirmed,
        "error": d.error,
    })
}

fn limit_note(n: &LimitNote) -> Value {
    json!({
        "component": n.component.wire_name(),
        "requested": watts(n.requested_w),
        "applied": watts(n.applied_w),
        "reason": n.reason,
        "devices": n.devices,
    })
}

/// The grid loop's mode and the limits in force, with where each came from.
fn grid_loop(g: &GridLoopState) -> Value {
    let limit = |l: Option<Limit>| match l {
        Some(l) => json!({"value": Num(l.w), "unit": "W", "source": l.source.wire_name()}),
        None => Value::Null,
    };
    json!({
        "mode": g.grid.mode.wire_name(),
        "maxImport": limit(g.grid.limits.import),
        "maxExport": limit(g.grid.limits.export),
        "signals": g.signals.iter().map(|s| json!({
            "name": s.name,
            "inputs": s.inputs,
            "online": s.online,
            "failsafe": s.failsafe,
            "error": s.error,
        })).collect::<Vec<_>>(),
        "sources": g.sources.iter().map(|l| {
            let value = match l.kind {
                Kind::Connect | Kind::Energize => json!(l.value >= 0.5),
                _ => json!({"value": Num(l.value), "unit": "W"}),
            };
            json!({
                "source": l.source.wire_name(),
                "kind": l.kind.wire_name(),
                "value": value,
                "until": l.until_ms,
                "since": l.since_ms,
                "failsafe": l.failsafe,
                "reference": l.reference,
            })
        }).collect::<Vec<_>>(),
        "csip": g.csip.as_ref().map(|c| json!({
            "state": c.state,
            "server": c.server,
            "lfdi": c.identity,
            "lastContact": c.last_contact_ms,
            "error": c.error,
        })),
        "eebus": g.eebus.as_ref().map(|c| json!({
            "state": c.state,
            "peer": c.server,
            "ski": c.identity,
            "lastContact": c.last_contact_ms,
            "error": c.error,
        })),
    })
}

/// `GET /sites/{s}/steering`, and the uplink's retained steering state.
pub fn site_state(s: &SiteState) -> Value {
    let a = &s.active;
    let mut ess_entry = a.ess.as_ref().map(|e| entry(e, "setting", ess(&e.value)));
    if let (Some(v), true) = (ess_entry.as_mut(), s.until_soc_reached) {
        v["untilSocReached"] = json!(true);
    }
    json!({
        "siteReference": s.site,
        "energyStorageSetting": ess_entry,
        "productionCurtailment": a.curtailment.as_ref().map(|e| entry(e, "setting", curtailment(&e.value))),
        "maximizeGridImport": a.maximize_grid_import.as_ref().map(|e| entry(e, "value", json!(e.value))),
        "gridLimit": a.grid_limit.as_ref().map(|e| entry(e, "setting", grid_limit(&e.value))),
        "scheduled": s.scheduled.iter().map(scheduled).collect::<Vec<_>>(),
        "devices": s.devices.iter().map(device).collect::<Vec<_>>(),
        "limits": s.limits.iter().map(limit_note).collect::<Vec<_>>(),
        "gridLoop": grid_loop(&s.grid_loop),
        "evaluatedAt": s.evaluated_at_ms,
        "durable": s.durable,
    })
}

/// A dry run's answer: `{"requestId": null, "allocation": [...]}`.
pub fn dry_run(allocation: &[Allocation]) -> Value {
    let items: Vec<Value> = allocation
        .iter()
        .map(|a| {
            json!({
                "deviceReference": a.device,
                "component": a.component.wire_name(),
                "setpoint": watts(a.setpoint_w),
                "fallback": a.fallback,
            })
        })
        .collect();
    json!({"requestId": null, "allocation": items})
}

/// An accepted request's answer: the body as received plus `requestId` and
/// `durable` (false while the change, in effect, waits to be written).
pub fn answer(a: &Answer, durable: bool) -> Value {
    let mut v = raw(&a.body);
    if let Some(o) = v.as_object_mut() {
        o.insert("requestId".into(), Value::String(a.request_id.clone()));
        o.insert("durable".into(), Value::Bool(durable));
    }
    v
}

/// One record of `GET /sites/{s}/steering/history`.
pub fn history_record(e: &AuditEvent) -> Value {
    let at = e.at_ms;
    match &e.kind {
        AuditKind::Request {
            source,
            token,
            action,
            body,
            request_id,
        } => request_record(at, source, token, action, body, request_id),
        AuditKind::Write {
            device,
            component,
            command,
            error,
            confirmed,
        } => write_record(at, device, *component, *command, error, *confirmed),
        AuditKind::ModbusLimit {
            client,
            unit_id,
            register,
            max_export_w,
            reason,
        } => modbus_limit_record(at, client, *unit_id, *register, *max_export_w, *reason),
        AuditKind::ForwardedWrite {
            client,
            device,
            register,
            values,
            result,
            exception,
        } => forwarded_write_record(at, client, device, *register, values, *result, *exception),
        AuditKind::Eebus {
            use_case,
            state,
            limit_w,
            failsafe,
        } => eebus_record(at, use_case, state, *limit_w, *failsafe),
        AuditKind::Csip {
            mrid,
            program,
            event,
            limits,
            response,
        } => csip_record(at, mrid, program, *event, limits, *response),
    }
}

/// An accepted POST or DELETE: its body as received, or what it ended.
fn request_record(
    at: i64,
    source: &str,
    token: &str,
    action: &str,
    body: &RequestBody,
    request_id: &Option<String>,
) -> Value {
    json!({
        "type": "request",
        "time": at,
        "source": source,
        "token": token,
        "action": action,
        "body": match body {
            RequestBody::Posted(b) => raw(b),
            RequestBody::Ended(c) => json!({"component": c.map(Component::wire_name)}),
        },
        "requestId": request_id,
    })
}

/// A write to a device, or an attempt.
fn write_record(
    at: i64,
    device: &str,
    component: Option<Component>,
    command: Command,
    error: &Option<String>,
    confirmed: bool,
) -> Value {
    json!({
        "type": "write",
        "time": at,
        "deviceReference": device,
        "component": component.map(Component::wire_name),
        "action": describe(command),
        "setpoint": watts(setpoint_w(command)),
        "result": if error.is_none() { "ok" } else { "error" },
        "confirmed": confirmed,
        "error": error,
    })
}

/// A SCADA's export limit over the Modbus server set, changed or ended.
fn modbus_limit_record(
    at: i64,
    client: &str,
    unit_id: u8,
    register: Option<u16>,
    max_export_w: Option<f64>,
    reason: LimitReason,
) -> Value {
    json!({
        "type": "modbusLimit",
        "time": at,
        "source": "modbus",
        "client": client,
        "unitId": unit_id,
        "register": register,
        "maxExport": watts(max_export_w),
        "reason": reason.wire_name(),
    })
}

/// A write a Modbus server client asked to pass on to a device.
fn forwarded_write_record(
    at: i64,
    client: &str,
    device: &str,
    register: u16,
    values: &[u16],
    result: ForwardResult,
    exception: Option<u8>,
) -> Value {
    json!({
        "type": "forwardedWrite",
        "time": at,
        "source": "modbus",
        "client": client,
        "deviceReference": device,
        "register": register,
        "values": values,
        "result": result.wire_name(),
        "exception": exception,
    })
}

/// A change of what a control box's use case holds.
fn eebus_record(
    at: i64,
    use_case: &str,
    state: &str,
    limit_w: Option<f64>,
    failsafe: bool,
) -> Value {
    json!({
        "type": "eebus",
        "time": at,
        "source": "eebus",
        "useCase": use_case,
        "state": state,
        "limit": limit_w.map(|w| json!({"value": Num(w.round()), "unit": "W"})),
        "failsafe": failsafe,
    })
}

/// What happened to a utility server's control over CSIP-AUS.
fn csip_record(
    at: i64,
    mrid: &str,
    program: &str,
    event: ControlEvent,
    limits: &str,
    response: Option<u8>,
) -> Value {
    json!({
        "type": "csip",
        "time": at,
        "source": "csip",
        "mrid": mrid,
        "program": program,
        "event": event.wire_name(),
        "limits": limits,
        "response": response,
    })
}

#[cfg(test)]
mod tests;
