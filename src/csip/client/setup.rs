//! The client's start: its TLS from the checked certificate files, the
//! schedule as the store kept it, and its two halves wired to one shared
//! state.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::clock::ServerClock;
use super::events::Recorder;
use super::polls::Polls;
use super::readings::Averager;
use super::shared::{Shared, SharedRef};
use super::{evaluate, Client, Links, Parts};
use crate::csip::http::Http;
use crate::csip::limits::Ramps;
use crate::csip::status::State;
use crate::csip::store::Saved;
use crate::model::time::now_ms;

impl Client {
    /// The client and its evaluation half.
    pub(super) async fn new(p: Parts) -> (Client, evaluate::Evaluator) {
        let (lfdi, sfdi) = match &p.material {
            Ok(m) => (m.identity.lfdi.clone(), m.identity.sfdi),
            Err(_) => (String::new(), 0),
        };
        let timeout = Duration::from_millis(p.config.timeout_ms);
        let http = match p.material {
            Ok(m) => match crate::csip::tls::client_config(&m.tls) {
                Ok(tls) => Some(Http::new(p.config.server.clone(), Arc::new(tls), timeout)),
                Err(e) => {
                    tracing::error!(site = %p.config.site, error = %e, "CSIP-AUS client cannot set up TLS: the schedule as last received holds");
                    None
                }
            },
            Err(e) => {
                tracing::error!(site = %p.config.site, error = %e, "CSIP-AUS certificate files cannot be used: the schedule as last received holds");
                None
            }
        };
        let saved = match p.store.load(&p.config.site).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(site = %p.config.site, error = %e, "the CSIP-AUS schedule kept in the store cannot be read");
                None
            }
        };
        let Saved {
            schedule,
            offset_ms,
            pending,
        } = saved.unwrap_or_default();
        if !schedule.programs.is_empty() || !schedule.events.is_empty() {
            tracing::info!(
                site = %p.config.site,
                programs = schedule.programs.len(),
                events = schedule.events.len(),
                "CSIP-AUS schedule restored from the store"
            );
        }
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        let state = if http.is_some() {
            State::Discovering
        } else {
            State::NoCertificate
        };
        p.status.update(|s| s.state = state);
        let shared = SharedRef::new(Shared {
            schedule,
            clock: ServerClock::new(offset_ms),
            pending: pending.into(),
            dirty: false,
            held: crate::csip::site::Held::default(),
            set_grad_w: 0,
        });
        let recorder = Recorder {
            site_ref: p.config.site.clone(),
            site: p.site.clone(),
            live: p.live.clone(),
            steering: p.steering,
        };
        let evaluator = evaluate::Evaluator {
            recorder: recorder.clone(),
            shared: shared.clone(),
            status: p.status.clone(),
            ramps: Ramps::default(),
            last_ms: now_ms(),
        };
        let client = Client {
            lfdi,
            sfdi,
            discover_at: http.as_ref().map(|_| 0),
            http,
            site: p.site,
            live: p.live,
            recorder,
            store: p.store,
            status: p.status,
            state,
            shared,
            ns: crate::csip::xml::write::CSIPAUS.to_string(),
            links: Links::default(),
            discover_backoff_ms: 0,
            polls: Polls::default(),
            report_at: 0,
            report_backoff_ms: 0,
            averager: Averager::default(),
            readings: VecDeque::new(),
            mirrors: Vec::new(),
            der: None,
            sent_capability: None,
            sent_settings: None,
            sent_status: None,
            last_error: None,
            rng: u64::from_le_bytes(seed) | 1,
            started: tokio::time::Instant::now(),
            cfg: p.config,
        };
        (client, evaluator)
    }
}
