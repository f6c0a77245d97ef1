//! Once a second, a look at the agent (its devices, each site's steering
//! state, the store, the clock) compared with the look before; what changed
//! goes into the list, and into the log at info.
//!
//! Reads only: the live state, the steering service's state, the store's
//! counters and the clock watch.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::observe::{
    changes, DeviceObserved, LimitObserved, Observed, SignalObserved, SiteObserved,
};
use super::EventLog;
use crate::clock::ClockWatch;
use crate::model::time::now_ms;
use crate::model::DeviceId;
use crate::steering::hold::LoopMode;
use crate::steering::view::SiteState;
use crate::steering::SteeringService;
use crate::store::StoreHandle;
use crate::telemetry::Live;

const EVERY: Duration = Duration::from_secs(1);

/// What the task looks at.
pub struct Sources {
    pub live: Arc<Live>,
    pub steering: Option<SteeringService>,
    pub store: Option<StoreHandle>,
    pub clock: Option<ClockWatch>,
}

/// Looks every second until `cancel`, adding what changed to `log`.
pub async fn run(sources: Sources, log: Arc<EventLog>, cancel: CancellationToken) {
    let mut before = look(&sources).await;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
        let now = look(&sources).await;
        let events = changes(&before, &now, now_ms());
        for e in &events {
            tracing::info!(subject = %e.subject, kind = e.kind.wire_name(), detail = %e.detail, "event");
        }
        log.push(events);
        before = now;
    }
}

async fn look(s: &Sources) -> Observed {
    let devices = s
        .live
        .devices()
        .iter()
        .enumerate()
        .map(|(i, d)| {
            // Under the device's read lock, the three fields only: no copy of
            // its readings, once a second for every device.
            let (online, error) = s.live.inspect(DeviceId(i as u16), |snap| {
                (
                    snap.attempted.then_some(snap.online),
                    (!snap.online).then(|| snap.last_error.clone()).flatten(),
                )
            });
            DeviceObserved {
                reference: d.reference.clone(),
                online,
                error,
            }
        })
        .collect();
    let mut sites = Vec::new();
    if let Some(steering) = &s.steering {
        for site in steering.sites() {
            let reference = site.config.reference.clone();
            if let Ok(state) = steering.state(&reference).await {
                sites.push(site_of(reference, &state));
            }
        }
    }
    Observed {
        devices,
        sites,
        store_problem: s.store.as_ref().and_then(|st| st.stats().problem()),
        clock_step: s.clock.as_ref().and_then(ClockWatch::last_step),
    }
}

fn site_of(reference: String, state: &SiteState) -> SiteObserved {
    let a = &state.active;
    let mut signals = Vec::new();
    let mut signal = |component: &'static str, entry: Option<(&str, i64)>| {
        if let Some((request_id, until_ms)) = entry {
            signals.push(SignalObserved {
                component,
                request_id: request_id.to_string(),
                until_ms,
            });
        }
    };
    signal(
        "energyStorageSetting",
        a.ess.as_ref().map(|e| (e.request_id.as_str(), e.until)),
    );
    signal(
        "productionCurtailment",
        a.curtailment
            .as_ref()
            .map(|e| (e.request_id.as_str(), e.until)),
    );
    signal(
        "maximizeGridImport",
        a.maximize_grid_import
            .as_ref()
            .map(|e| (e.request_id.as_str(), e.until)),
    );
    signal(
        "gridLimit",
        a.grid_limit
            .as_ref()
            .map(|e| (e.request_id.as_str(), e.until)),
    );
    let limits = state
        .grid_loop
        .sources
        .iter()
        .map(|l| LimitObserved {
            key: format!("{} {}", l.source.wire_name(), l.kind.wire_name()),
            value: l.value,
            failsafe: l.failsafe,
            reference: l.reference.clone(),
        })
        .collect();
    SiteObserved {
        reference,
        meter_lost: state.grid_loop.grid.mode == LoopMode::MeterLost,
        signals,
        limits,
    }
}
