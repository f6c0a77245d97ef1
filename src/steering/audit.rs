//! The audit log's records: every accepted steering change (who, from where, what,
//! which request id) and every device write that changed a setpoint or failed.
//!
//! Plain data; they are also the records `GET /sites/{s}/steering/history`
//! shows (the API renders them). Writing them down is the persistence layer's
//! job.

use super::decide::Command;
use super::request::RawBody;
use super::value::Component;

/// What a request record shows as its body.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestBody {
    /// A POST: the body as received.
    Posted(RawBody),
    /// A DELETE: the component ended from now on (`None`: all of them).
    Ended(Option<Component>),
}

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
        body: RequestBody,
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
}
