//! The audit log's records: every accepted steering change (who, from where, what,
//! which request id) and every device write that changed a setpoint or failed.
//!
//! Plain data with its JSON shape (`GET /sites/{s}/steering/history`); writing it
//! down is the persistence layer's job.

use serde_json::{json, Value};

use super::decide::Command;
use super::value::Component;

/// One audit record of one site.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEvent {
    pub site: String,
    pub at_ms: i64,
    pub kind: AuditKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AuditKind {
    /// An accepted POST or DELETE.
    Request {
        /// Transport, e.g. `http` or `mqtt`.
        source: String,
        /// The token's name (`anonymous` without auth).
        token: String,
        /// Method and path, e.g. `POST /sites/ste_home/steering/ess`.
        action: String,
        body: Value,
        request_id: Option<String>,
    },
    /// A write to a device (or an attempt).
    Write {
        device: String,
        component: Option<Component>,
        command: Command,
        /// `None` when written and confirmed.
        error: Option<String>,
        /// Read back and matched.
        confirmed: bool,
    },
}

/// The wire shape of a setpoint: W for powers and limits, `null` for a release.
pub fn setpoint_json(c: Command) -> Value {
    match c {
        Command::EssPower(w) | Command::ProductionLimit(w) => {
            json!({"value": w.round(), "unit": "W"})
        }
        Command::EssRelease | Command::ProductionRelease => Value::Null,
    }
}

/// What a command means, in words, for logs and history.
pub fn describe(c: Command) -> &'static str {
    match c {
        Command::EssPower(_) => "storage power",
        Command::EssRelease => "storage control released",
        Command::ProductionLimit(_) => "production limit",
        Command::ProductionRelease => "production limit released",
    }
}

impl AuditEvent {
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            AuditKind::Request { .. } => "request",
            AuditKind::Write { .. } => "write",
        }
    }

    pub fn to_json(&self) -> Value {
        match &self.kind {
            AuditKind::Request {
                source,
                token,
                action,
                body,
                request_id,
            } => json!({
                "type": "request",
                "time": self.at_ms,
                "source": source,
                "token": token,
                "action": action,
                "body": body,
                "requestId": request_id,
            }),
            AuditKind::Write {
                device,
                component,
                command,
                error,
                confirmed,
            } => json!({
                "type": "write",
                "time": self.at_ms,
                "deviceReference": device,
                "component": component.map(Component::wire_name),
                "action": describe(*command),
                "setpoint": setpoint_json(*command),
                "result": if error.is_none() { "ok" } else { "error" },
                "confirmed": confirmed,
                "error": error,
            }),
        }
    }
}
