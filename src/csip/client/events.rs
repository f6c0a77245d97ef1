//! What the client does with what happened to an event: a record in the
//! site's history, a log line, and the Response the event asks for, queued
//! for the I/O half. A new event's values the site cannot or need not
//! follow are said here too.

use std::sync::Arc;

use super::shared::Shared;
use crate::csip::resource::program::{ControlBase, Mode};
use crate::csip::resource::response::ResponseStatus;
use crate::csip::schedule::Event;
use crate::csip::store::Pending;
use crate::steering::audit::{AuditEvent, AuditKind, ControlEvent};
use crate::steering::runtime::SiteRuntime;
use crate::steering::SteeringService;
use crate::telemetry::Live;

/// The most Responses kept waiting for the server.
pub const PENDING_MAX: usize = 1_000;

/// Who records events.
#[derive(Clone)]
pub(crate) struct Recorder {
    pub site_ref: String,
    pub site: Arc<SiteRuntime>,
    pub live: Arc<Live>,
    pub steering: SteeringService,
}

impl Recorder {
    /// Records `events` (under the shared lock the caller holds).
    pub fn record(&self, sh: &mut Shared, events: Vec<Event>) {
        for e in events {
            sh.dirty = true;
            let limits = sh
                .schedule
                .events
                .get(&e.mrid)
                .map(|t| describe(&t.control.base))
                .unwrap_or_default();
            if e.status == ResponseStatus::Received {
                if let Some(t) = sh.schedule.events.get(&e.mrid) {
                    self.check_values(&e.mrid, &t.control.base);
                }
            }
            let required = e.status.required_by(e.response_required);
            tracing::info!(
                site = %self.site_ref,
                mrid = %e.mrid,
                program = %e.program,
                event = e.status.wire_name(),
                limits = %limits,
                "CSIP-AUS control"
            );
            self.steering.note(AuditEvent {
                site: self.site_ref.clone(),
                at_ms: sh.clock.local_ms(e.at_ms),
                kind: AuditKind::Csip {
                    mrid: e.mrid.clone(),
                    program: e.program.clone(),
                    event: event_of(e.status),
                    limits,
                    response: required.then(|| e.status.code()),
                },
            });
            if let (true, Some(reply_to)) = (required, e.reply_to) {
                if sh.pending.len() >= PENDING_MAX {
                    tracing::warn!(site = %self.site_ref, "CSIP-AUS responses waiting for the server: the oldest dropped");
                    sh.pending.pop_front();
                }
                sh.pending.push_back(Pending {
                    reply_to,
                    mrid: e.mrid,
                    status: e.status,
                    at_s: e.at_ms.div_euclid(1000),
                });
            }
        }
    }

    /// Says what a new control asks that the site cannot or need not follow.
    fn check_values(&self, mrid: &str, base: &ControlBase) {
        let rating = crate::csip::site::snapshot(&self.live, &self.site.devices).set_max_w();
        for m in [Mode::Import, Mode::Export, Mode::Generation, Mode::Load] {
            let Some(v) = base.value(m) else {
                continue;
            };
            if v < 0.0 {
                tracing::warn!(site = %self.site_ref, mrid, mode = m.element(), value = v, "CSIP-AUS control with a negative limit: held as 0 W");
            } else if rating > 0.0 && v > rating && matches!(m, Mode::Generation | Mode::Load) {
                tracing::info!(site = %self.site_ref, mrid, mode = m.element(), value = v, rating, "CSIP-AUS limit above the DER's rating: it does not bind");
            }
        }
    }
}

fn event_of(s: ResponseStatus) -> ControlEvent {
    match s {
        ResponseStatus::Received => ControlEvent::Received,
        ResponseStatus::Started => ControlEvent::Started,
        ResponseStatus::Completed => ControlEvent::Completed,
        ResponseStatus::Cancelled => ControlEvent::Cancelled,
        ResponseStatus::Superseded => ControlEvent::Superseded,
        ResponseStatus::Expired => ControlEvent::Expired,
    }
}

/// What a control sets, in words.
pub fn describe(b: &ControlBase) -> String {
    Mode::ALL
        .iter()
        .filter_map(|m| {
            let v = b.value(*m)?;
            Some(match m {
                Mode::Connect | Mode::Energize => format!("{} {}", m.element(), v >= 0.5),
                Mode::MaxLimPct => format!("{} {v} %", m.element()),
                _ => format!("{} {} W", m.element(), v.round()),
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_is_described_in_its_elements_names() {
        let b = ControlBase {
            export_w: Some(1_500.4),
            connect: Some(false),
            ..Default::default()
        };
        assert_eq!(describe(&b), "opModConnect false, opModExpLimW 1500 W");
    }
}
