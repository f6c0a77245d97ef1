//! What the CSIP-AUS client of a site has done, for `/metrics`, the steering
//! state and the support bundle: its state, the server's last answer, polls
//! and failures counted, the responses posted, and the limits in force.
//!
//! Counters change only where the client counts; collecting reads them
//! under a short lock and does no I/O.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::metrics::{Collect, Encoder, Kind};
use crate::steering::sources::{Kind as LimitKind, OperatorSet};

/// Where the client stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum State {
    /// Looking for its EndDevice, or registering.
    #[default]
    Discovering,
    /// Following the programs.
    Following,
    /// The server cannot be reached: the schedule as last received holds.
    Unreachable,
    /// The server's Registration PIN is not the configured one: the client
    /// stopped talking to it.
    PinRefused,
    /// The certificate files cannot be used: the client cannot connect.
    NoCertificate,
}

impl State {
    pub fn wire_name(self) -> &'static str {
        match self {
            State::Discovering => "discovering",
            State::Following => "following",
            State::Unreachable => "unreachable",
            State::PinRefused => "pinRefused",
            State::NoCertificate => "noCertificate",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub site: String,
    pub state: State,
    pub lfdi: String,
    pub sfdi: u64,
    pub server: String,
    /// Local wall time of the last answer, ms.
    pub last_contact_ms: Option<i64>,
    pub last_error: Option<String>,
    /// Server time minus local time, ms.
    pub offset_ms: i64,
    pub polls: BTreeMap<&'static str, u64>,
    pub failures: BTreeMap<&'static str, u64>,
    pub responses: BTreeMap<u8, u64>,
    pub responses_failed: u64,
    pub events_followed: usize,
    pub limits: OperatorSet,
}

/// One client's status, shared.
#[derive(Clone, Default)]
pub struct Status {
    inner: Arc<Mutex<Snapshot>>,
}

impl Status {
    pub fn new(site: &str, lfdi: &str, sfdi: u64, server: String) -> Status {
        Status {
            inner: Arc::new(Mutex::new(Snapshot {
                site: site.to_string(),
                lfdi: lfdi.to_string(),
                sfdi,
                server,
                ..Snapshot::default()
            })),
        }
    }

    pub fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        // Plain data: keep it after a panic elsewhere.
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn snapshot(&self) -> Snapshot {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What the steering state shows of the client.
    pub fn source_status(&self) -> crate::steering::sources::SourceStatus {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        crate::steering::sources::SourceStatus {
            state: s.state.wire_name().to_string(),
            server: s.server.clone(),
            identity: s.lfdi.clone(),
            last_contact_ms: s.last_contact_ms,
            error: s.last_error.clone(),
        }
    }
}

/// Every site's client, as one collector.
#[derive(Clone, Default)]
pub struct Statuses(pub Vec<Status>);

impl Collect for Statuses {
    fn collect(&self, out: &mut Encoder) {
        let all: Vec<Snapshot> = self.0.iter().map(Status::snapshot).collect();
        if all.is_empty() {
            return;
        }
        let mut f = out.family(
            "sitegate_csip_following",
            Kind::Gauge,
            "1 while the CSIP-AUS client follows its server's programs; 0 while it discovers, cannot reach the server, was refused its PIN or has no usable certificate.",
        );
        for s in &all {
            f.sample(
                &[("site", &s.site)],
                if s.state == State::Following {
                    1.0
                } else {
                    0.0
                },
            );
        }
        let mut f = out.family(
            "sitegate_csip_last_contact_seconds",
            Kind::Gauge,
            "Wall time of the utility server's last answer, seconds since the epoch.",
        );
        for s in &all {
            if let Some(t) = s.last_contact_ms {
                f.sample(&[("site", &s.site)], t as f64 / 1000.0);
            }
        }
        let mut f = out.family(
            "sitegate_csip_polls_total",
            Kind::Counter,
            "Resources polled and answered, by resource (dcap, tm, edev, fsa, derp, der, mup).",
        );
        for s in &all {
            for (r, n) in &s.polls {
                f.sample(&[("site", &s.site), ("resource", r)], *n as f64);
            }
        }
        let mut f = out.family(
            "sitegate_csip_failures_total",
            Kind::Counter,
            "Requests to the utility server that failed, by kind (connect, tls, timeout, io, status, redirect, body, xml, other_host).",
        );
        for s in &all {
            for (k, n) in &s.failures {
                f.sample(&[("site", &s.site), ("kind", k)], *n as f64);
            }
        }
        let mut f = out.family(
            "sitegate_csip_responses_total",
            Kind::Counter,
            "Responses posted to events, by 2030.5 status (1 received, 2 started, 3 completed, 6 cancelled, 7 superseded, 254 expired).",
        );
        for s in &all {
            for (code, n) in &s.responses {
                f.sample(
                    &[("site", &s.site), ("status", &code.to_string())],
                    *n as f64,
                );
            }
        }
        let mut f = out.family(
            "sitegate_csip_limit_watts",
            Kind::Gauge,
            "The utility server's limit in force, by kind (maxImport, maxExport, maxGeneration, maxLoad, storageTarget); absent: none.",
        );
        for s in &all {
            for l in &s.limits.limits {
                if !matches!(l.kind, LimitKind::Connect | LimitKind::Energize) {
                    f.sample(&[("site", &s.site), ("kind", l.kind.wire_name())], l.value);
                }
            }
        }
        let mut f = out.family(
            "sitegate_csip_failsafe",
            Kind::Gauge,
            "1 while what holds is the schedule as last received (the server cannot be reached).",
        );
        for s in &all {
            f.sample(
                &[("site", &s.site)],
                if s.state == State::Unreachable {
                    1.0
                } else {
                    0.0
                },
            );
        }
    }
}
