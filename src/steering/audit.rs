//! The audit log's records: every accepted steering change (who, from where, what,
//! which request id), every device write that changed a setpoint or failed,
//! every change of a SCADA's export limit over the Modbus server (a write
//! that sets, changes or ends it, a heartbeat that lapses), every write
//! a Modbus server client asked to pass on to a device, what happened
//! to each control of a utility server over CSIP-AUS, and each change of
//! what a control box's use case holds over EEBus.
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
    /// A SCADA's export limit over the Modbus server set, changed or ended.
    ModbusLimit {
        /// The client's address and port (for a lapsed heartbeat: the
        /// client that wrote the limit last).
        client: String,
        /// The site's unit id on the server.
        unit_id: u8,
        /// The register written; `None` when the heartbeat lapsed.
        register: Option<u16>,
        /// The export limit taken, W; `None`: the SCADA's limit ended.
        max_export_w: Option<f64>,
        reason: LimitReason,
    },
    /// What happened to a utility server's control over CSIP-AUS: received,
    /// started, completed, cancelled, superseded, or refused as expired.
    Csip {
        /// The control's mRID.
        mrid: String,
        /// The href of its DER program.
        program: String,
        event: ControlEvent,
        /// What it sets, in words (`maxExport 1500 W, connect false`).
        limits: String,
        /// The Response status the client answers with, when the control
        /// asks for one.
        response: Option<u8>,
    },
    /// What a control box's use case (LPC, LPP) holds changed: a limit in
    /// force, ended, the failsafe entered or left.
    Eebus {
        /// `lpc` or `lpp`.
        use_case: String,
        /// The use case's state, as the specification names it.
        state: String,
        /// The limit that holds now, W; `None`: no operator limit.
        limit_w: Option<f64>,
        failsafe: bool,
    },
    /// A write a Modbus server client asked to pass on to a device.
    ForwardedWrite {
        client: String,
        device: String,
        register: u16,
        values: Vec<u16>,
        result: ForwardResult,
        /// The Modbus exception the client was answered, if any.
        exception: Option<u8>,
    },
}

/// Why a SCADA's limit changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitReason {
    /// A write set a limit where the SCADA had none (or the failsafe held).
    Set,
    /// A write changed the SCADA's limit.
    Changed,
    /// A write ended it.
    Ended,
    /// No write within the heartbeat: the failsafe holds.
    HeartbeatFailsafe,
    /// No write within the heartbeat: the limits without the SCADA hold.
    HeartbeatEnded,
}

impl LimitReason {
    pub const ALL: [LimitReason; 5] = [
        LimitReason::Set,
        LimitReason::Changed,
        LimitReason::Ended,
        LimitReason::HeartbeatFailsafe,
        LimitReason::HeartbeatEnded,
    ];

    pub fn wire_name(self) -> &'static str {
        match self {
            LimitReason::Set => "set",
            LimitReason::Changed => "changed",
            LimitReason::Ended => "ended",
            LimitReason::HeartbeatFailsafe => "heartbeatFailsafe",
            LimitReason::HeartbeatEnded => "heartbeatEnded",
        }
    }

    pub fn from_wire(s: &str) -> Option<LimitReason> {
        Self::ALL.into_iter().find(|r| r.wire_name() == s)
    }
}

/// What happened to a control, as the history names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlEvent {
    Received,
    Started,
    Completed,
    Cancelled,
    Superseded,
    Expired,
}

impl ControlEvent {
    pub const ALL: [ControlEvent; 6] = [
        ControlEvent::Received,
        ControlEvent::Started,
        ControlEvent::Completed,
        ControlEvent::Cancelled,
        ControlEvent::Superseded,
        ControlEvent::Expired,
    ];

    pub fn wire_name(self) -> &'static str {
        match self {
            ControlEvent::Received => "received",
            ControlEvent::Started => "started",
            ControlEvent::Completed => "completed",
            ControlEvent::Cancelled => "cancelled",
            ControlEvent::Superseded => "superseded",
            ControlEvent::Expired => "expired",
        }
    }

    pub fn from_wire(s: &str) -> Option<ControlEvent> {
        Self::ALL.into_iter().find(|e| e.wire_name() == s)
    }
}

/// How a forwarded write ended (the labels of
/// `sitegate_modbus_server_forwarded_writes_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardResult {
    /// The device took it.
    Ok,
    /// Refused before the bus: steering may write the register.
    Steered,
    /// Refused busy (the bounds on forwarded requests).
    Busy,
    /// The device refused it, or did not answer.
    Failed,
}

impl ForwardResult {
    pub const ALL: [ForwardResult; 4] = [
        ForwardResult::Ok,
        ForwardResult::Steered,
        ForwardResult::Busy,
        ForwardResult::Failed,
    ];

    pub fn wire_name(self) -> &'static str {
        match self {
            ForwardResult::Ok => "ok",
            ForwardResult::Steered => "steered",
            ForwardResult::Busy => "busy",
            ForwardResult::Failed => "failed",
        }
    }

    pub fn from_wire(s: &str) -> Option<ForwardResult> {
        Self::ALL.into_iter().find(|r| r.wire_name() == s)
    }
}

/// Whether a SCADA's write changes its limit, and how: `before` is the
/// limit in force from the SCADA (the failsafe's too, `failsafe` true while
/// it holds), `after` the one written. `None`: a refresh that changes
/// nothing (no record).
pub fn limit_change(
    before: Option<f64>,
    failsafe: bool,
    after: Option<f64>,
) -> Option<LimitReason> {
    match (before, after) {
        (None, None) => None,
        (None, Some(_)) => Some(LimitReason::Set),
        (Some(_), Some(_)) if failsafe => Some(LimitReason::Set),
        (Some(a), Some(b)) if a == b => None,
        (Some(_), Some(_)) => Some(LimitReason::Changed),
        (Some(_), None) => Some(LimitReason::Ended),
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
            AuditKind::ModbusLimit { .. } => "modbusLimit",
            AuditKind::ForwardedWrite { .. } => "forwardedWrite",
            AuditKind::Csip { .. } => "csip",
            AuditKind::Eebus { .. } => "eebus",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scada_write_is_a_change_only_when_the_limit_moves() {
        use LimitReason::*;
        assert_eq!(limit_change(None, false, None), None);
        assert_eq!(limit_change(None, false, Some(20e3)), Some(Set));
        assert_eq!(
            limit_change(Some(20e3), false, Some(20e3)),
            None,
            "a refresh"
        );
        assert_eq!(limit_change(Some(20e3), false, Some(10e3)), Some(Changed));
        assert_eq!(limit_change(Some(20e3), false, None), Some(Ended));
        // The failsafe held: a write takes the SCADA's limit again, even at
        // the failsafe's value.
        assert_eq!(limit_change(Some(10e3), true, Some(10e3)), Some(Set));
        assert_eq!(limit_change(Some(10e3), true, None), Some(Ended));
    }

    #[test]
    fn wire_names_read_back() {
        for r in LimitReason::ALL {
            assert_eq!(LimitReason::from_wire(r.wire_name()), Some(r));
        }
        for r in ForwardResult::ALL {
            assert_eq!(ForwardResult::from_wire(r.wire_name()), Some(r));
        }
        for e in ControlEvent::ALL {
            assert_eq!(ControlEvent::from_wire(e.wire_name()), Some(e));
        }
        assert_eq!(LimitReason::from_wire("lapsed"), None);
    }
}
