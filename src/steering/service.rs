//! The steering service: the handle the API (and the MQTT RPC bridge, through the
//! API) uses to change and read a site's signal. A change is validated, applied
//! in memory, handed to the site's control loop and queued to be made durable
//! (`durable.rs`: control never waits on the disk; the caller learns whether
//! the change was written within a short wait). A failure of validation leaves
//! nothing changed.
//!
//! It speaks in typed values: a [`Change`] takes a typed request (the API
//! parses bodies with the [`Context`] the change gives it), and reads return
//! views (`view.rs`) and audit records, which the API renders.
//!
//! This file owns no task; `start` in `mod.rs` spawns the loops and actuators.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::OwnedMutexGuard;

use super::alloc::site_soc;
use super::audit::{AuditEvent, AuditKind, RequestBody};
use super::durable::{Durability, Durable};
use super::persist::{Commit, PersistError, SteeringStore, IDEMPOTENCY_MS};
use super::request::{Answer, ConfiguredLimits, Context, RawBody, SteeringRequest};
use super::runtime::SiteRuntime;
use super::signal::SiteSignal;
use super::value::Component;
use super::view::{Allocation, SiteState, SiteView};
use crate::model::time::now_ms;
use crate::telemetry::Live;

/// Why a steering call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SteeringError {
    #[error("unknown site {0:?}")]
    SiteNotFound(String),
    #[error("{0}")]
    Store(#[from] PersistError),
    /// An `Idempotency-Key` seen with another operation or another body.
    #[error("Idempotency-Key {key:?} was first used on {first_operation} {with}")]
    KeyReused {
        key: String,
        first_operation: String,
        /// "with another body" or "(not this operation)".
        with: &'static str,
    },
}

/// Who asks, and how.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// Token name.
    pub caller: String,
    /// Transport (`http`, `mqtt`).
    pub source: String,
    /// Method and path.
    pub action: String,
    pub idempotency_key: Option<String>,
}

/// How long an end of steering waits for the control loop to evaluate it
/// before answering.
const EVALUATION_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Cheap to clone.
#[derive(Clone)]
pub struct SteeringService {
    inner: Arc<Inner>,
}

struct Inner {
    sites: Vec<Arc<SiteRuntime>>,
    by_ref: HashMap<String, usize>,
    store: Arc<dyn SteeringStore>,
    durable: Arc<Durable>,
    live: Arc<Live>,
    clock: std::sync::OnceLock<crate::clock::ClockWatch>,
    /// The audit writer's queue (`mod.rs`), for records of changes made
    /// outside a `Change`.
    audit: tokio::sync::mpsc::Sender<AuditEvent>,
}

/// `req_` and 16 hex digits from the OS's random source (time-based if it fails).
fn new_request_id() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        b = (now_ms() as u64).to_be_bytes();
    }
    format!("req_{}", hex::encode(b))
}

/// The history writer's queue, as a producer holds it.
#[derive(Clone)]
pub struct AuditQueue(pub tokio::sync::mpsc::Sender<AuditEvent>);

impl AuditQueue {
    /// Queues `event`; never waits: a full queue drops it with a warning.
    pub fn note(&self, event: AuditEvent) {
        if let Err(e) = self.0.try_send(event) {
            let kind = match &e {
                tokio::sync::mpsc::error::TrySendError::Full(ev)
                | tokio::sync::mpsc::error::TrySendError::Closed(ev) => ev.kind_name(),
            };
            tracing::warn!(
                kind,
                "audit queue full or closed: a history record was dropped"
            );
        }
    }
}

impl SteeringService {
    pub fn new(
        sites: Vec<Arc<SiteRuntime>>,
        store: Arc<dyn SteeringStore>,
        durable: Arc<Durable>,
        live: Arc<Live>,
        audit: tokio::sync::mpsc::Sender<AuditEvent>,
    ) -> Self {
        let by_ref = sites
            .iter()
            .enumerate()
            .map(|(i, s)| (s.config.reference.clone(), i))
            .collect();
        Self {
            inner: Arc::new(Inner {
                sites,
                by_ref,
                store,
                durable,
                live,
                clock: std::sync::OnceLock::new(),
                audit,
            }),
        }
    }

    pub fn sites(&self) -> &[Arc<SiteRuntime>] {
        &self.inner.sites
    }

    pub fn site(&self, reference: &str) -> Result<&Arc<SiteRuntime>, SteeringError> {
        self.inner
            .by_ref
            .get(reference)
            .map(|i| &self.inner.sites[*i])
            .ok_or_else(|| SteeringError::SiteNotFound(reference.to_string()))
    }

    /// Validation says when the controller's clock is not synchronised
    /// (set once, by the agent).
    pub fn watch_clock(&self, clock: crate::clock::ClockWatch) {
        let _ = self.inner.clock.set(clock);
    }

    pub fn live(&self) -> &Arc<Live> {
        &self.inner.live
    }

    /// Queues an audit record for the site's history (the Modbus server's
    /// SCADA limits and forwarded writes). Never waits: a full queue drops
    /// the record with a warning.
    pub fn note(&self, event: AuditEvent) {
        self.audit_queue().note(event);
    }

    /// The history writer's queue, for a task that records changes of its
    /// own (the EEBus node).
    pub fn audit_queue(&self) -> AuditQueue {
        AuditQueue(self.inner.audit.clone())
    }

    /// Starts a change of the site's signal (a steering POST): the site's
    /// signal is locked until the change is committed or dropped, so that
    /// changes reach memory in the order they reached the disk. The change
    /// gives the [`Context`] a body is validated with.
    pub async fn begin(&self, site_ref: &str, origin: Origin) -> Result<Change, SteeringError> {
        let site = self.site(site_ref)?.clone();
        let signal = site.signal.clone().lock_owned().await;
        let now = now_ms();
        let context = Context {
            now_ms: now,
            site_soc: site_soc(&site.inputs(now, &self.inner.live).batteries),
            limits: site.limits(),
            clock_unsynchronised: self
                .inner
                .clock
                .get()
                .is_some_and(|c| c.sync().is_unsynchronised()),
        };
        Ok(Change {
            service: self.clone(),
            site,
            signal,
            origin,
            context,
        })
    }

    /// `DELETE /sites/{s}/steering[?component=]`: the component (or all) is at its
    /// fallback from now on. Returns the new state.
    pub async fn end(
        &self,
        site_ref: &str,
        component: Option<Component>,
        origin: &Origin,
    ) -> Result<SiteState, SteeringError> {
        let site = self.site(site_ref)?.clone();
        let mut signal = site.signal.lock().await;
        let now = now_ms();
        let mut next = signal.clone();
        next.prune(now);
        let changed = next.end(component, now);
        let commit = Commit {
            site: site_ref.to_string(),
            entries: next.entries_of(&changed),
            components: changed,
            audit: request_event(site_ref, now, origin, RequestBody::Ended(component), None),
            idempotency: None,
        };
        // In effect at once; durable when the disk allows.
        *signal = next;
        let seq = self.inner.durable.enqueue(commit);
        // The control loop evaluates the change and then tells the feed.
        let revision = site.committed_change();
        drop(signal);
        self.inner.durable.wait(seq).await;
        // The answer shows what the release did to the devices (released,
        // pending until written), not the setpoints from before it.
        if !site.evaluated(revision, EVALUATION_WAIT).await {
            tracing::warn!(site = %site_ref, "steering ended; the control loop has not evaluated it yet: the answer shows the setpoints from before");
        }
        self.state(site_ref).await
    }

    /// The queue of changes waiting to be written.
    pub fn durable(&self) -> &Arc<Durable> {
        &self.inner.durable
    }

    /// `GET /sites/{s}/steering`.
    pub async fn state(&self, site_ref: &str) -> Result<SiteState, SteeringError> {
        let site = self.site(site_ref)?;
        let signal = site.signal.lock().await.clone();
        let durable = !self.inner.durable.pending(site_ref);
        Ok(SiteState::of(site, &signal, now_ms(), durable))
    }

    /// The state once the control loop has evaluated every committed change,
    /// `None` while one waits for it: the signal and what the loop made of it
    /// (the grid limits in force, the notes) agree. For the state feed.
    pub async fn evaluated_state(
        &self,
        site_ref: &str,
    ) -> Result<Option<SiteState>, SteeringError> {
        let site = self.site(site_ref)?;
        let signal = site.signal.lock().await;
        if !site.evaluated_every_change() {
            return Ok(None);
        }
        let durable = !self.inner.durable.pending(site_ref);
        Ok(Some(SiteState::of(site, &signal, now_ms(), durable)))
    }

    /// `GET /sites/{s}/steering/history?limit=N`, newest first.
    pub async fn history(
        &self,
        site_ref: &str,
        limit: usize,
    ) -> Result<Vec<AuditEvent>, SteeringError> {
        self.site(site_ref)?;
        Ok(self
            .inner
            .store
            .history(site_ref.to_string(), limit)
            .await?)
    }

    /// `GET /sites`.
    pub fn site_views(&self) -> Vec<SiteView> {
        self.inner
            .sites
            .iter()
            .map(|s| SiteView::of(s, &self.inner.live))
            .collect()
    }

    /// `GET /sites/{s}`.
    pub fn site_view(&self, site_ref: &str) -> Result<SiteView, SteeringError> {
        Ok(SiteView::of(self.site(site_ref)?, &self.inner.live))
    }

    /// The site's configured grid limits from now on (a config change
    /// applied live): its control loop holds them from its next tick, woken
    /// for it. Whether the change may lower safety is the caller's to check.
    pub fn set_grid_limits(
        &self,
        site_ref: &str,
        limits: ConfiguredLimits,
    ) -> Result<(), SteeringError> {
        let site = self.site(site_ref)?;
        let before = site.limits();
        site.set_limits(limits);
        tracing::info!(
            site = %site_ref,
            max_import_w = ?limits.max_import_w,
            max_export_w = ?limits.max_export_w,
            was_import_w = ?before.max_import_w,
            was_export_w = ?before.max_export_w,
            "configured grid limits changed live"
        );
        Ok(())
    }
}

fn request_event(
    site: &str,
    now: i64,
    origin: &Origin,
    body: RequestBody,
    request_id: Option<String>,
) -> AuditEvent {
    AuditEvent {
        site: site.to_string(),
        at_ms: now,
        kind: AuditKind::Request {
            source: origin.source.clone(),
            token: origin.caller.clone(),
            action: origin.action.clone(),
            body,
            request_id,
        },
    }
}

/// A change of one site's signal in progress ([`SteeringService::begin`]);
/// holds the site's signal lock until it is committed or dropped.
pub struct Change {
    service: SteeringService,
    site: Arc<SiteRuntime>,
    signal: OwnedMutexGuard<SiteSignal>,
    origin: Origin,
    context: Context,
}

impl Change {
    /// What validation needs to know of the site now.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The answer first given to the caller's `Idempotency-Key` within the last
    /// 24 h, if any, when it answered this operation and this `body`: it is the
    /// answer again. A key used with another operation or body is refused.
    pub async fn replay(&self, body: &RawBody) -> Result<Option<Answer>, SteeringError> {
        let Some(key) = &self.origin.idempotency_key else {
            return Ok(None);
        };
        let inner = &self.service.inner;
        let first = match inner.durable.replay(&self.origin.caller, key) {
            Some(a) => Some(a),
            None => {
                let since = now_ms() - IDEMPOTENCY_MS;
                inner
                    .store
                    .replay(self.origin.caller.clone(), key.clone(), since)
                    .await?
            }
        };
        let Some(first) = first else { return Ok(None) };
        let reused = |with| SteeringError::KeyReused {
            key: key.clone(),
            first_operation: first.operation.clone(),
            with,
        };
        if !first.operation.is_empty() && first.operation != self.origin.action {
            return Err(reused("(not this operation)"));
        }
        if first.body != *body {
            return Err(reused("with another body"));
        }
        Ok(Some(first))
    }

    /// What `req` would make of the devices now, changing nothing (a dry run:
    /// no idempotency key is used or stored).
    pub fn dry_run(&self, req: &SteeringRequest) -> Vec<Allocation> {
        let now = self.context.now_ms;
        let live = &self.service.inner.live;
        let mut next = self.signal.clone();
        next.prune(now);
        next.apply(req, "dryRun", now);
        let d = self.site.evaluate(&next, now, live);
        Allocation::of(&self.site, &d, live)
    }

    /// Applies `req`, wakes the site's control loop, and queues it to be made
    /// durable (the changed timelines, the audit record with `body` and the
    /// idempotency answer in one commit). Returns the answer (`body` and the
    /// new request id) and whether it was written within the wait.
    pub async fn commit(
        mut self,
        req: &SteeringRequest,
        body: RawBody,
    ) -> Result<(Answer, Durability), SteeringError> {
        let now = self.context.now_ms;
        let site_ref = self.site.config.reference.clone();
        let mut next = self.signal.clone();
        next.prune(now);
        let id = new_request_id();
        let changed = next.apply(req, &id, now);
        let answer = Answer {
            body: body.clone(),
            request_id: id.clone(),
            operation: self.origin.action.clone(),
        };
        let commit = Commit {
            site: site_ref.clone(),
            entries: next.entries_of(&changed),
            components: changed,
            audit: request_event(
                &site_ref,
                now,
                &self.origin,
                RequestBody::Posted(body),
                Some(id),
            ),
            idempotency: self
                .origin
                .idempotency_key
                .clone()
                .map(|k| (self.origin.caller.clone(), k, answer.clone())),
        };
        *self.signal = next;
        let seq = self.service.inner.durable.enqueue(commit);
        // The control loop evaluates the change and then tells the feed.
        self.site.committed_change();
        drop(self.signal);
        let durability = self.service.inner.durable.wait(seq).await;
        Ok((answer, durability))
    }
}
