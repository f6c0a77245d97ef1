//! The steering service: the handle the API (and the MQTT RPC bridge, through the
//! API) uses to change and read a site's signal. A change is validated, made
//! durable, applied in memory and handed to the site's control loop, in that
//! order; a failure at any step leaves nothing changed.
//!
//! This file owns no task; `start` in `mod.rs` spawns the loops and actuators.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::alloc::site_soc;
use super::audit::{AuditEvent, AuditKind};
use super::control::SiteRuntime;
use super::persist::{Commit, PersistError, SteeringStore, IDEMPOTENCY_MS};
use super::request::{self, Context, Endpoint, Rejection};
use super::value::Component;
use super::view;
use crate::model::time::now_ms;
use crate::telemetry::Live;

/// Why a steering call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SteeringError {
    #[error("unknown site {0:?}")]
    SiteNotFound(String),
    #[error("{0}")]
    Invalid(#[from] Rejection),
    #[error("{0}")]
    Store(#[from] PersistError),
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

/// Cheap to clone.
#[derive(Clone)]
pub struct SteeringService {
    inner: Arc<Inner>,
}

struct Inner {
    sites: Vec<Arc<SiteRuntime>>,
    by_ref: HashMap<String, usize>,
    store: Arc<dyn SteeringStore>,
    live: Arc<Live>,
}

/// `req_` and 16 hex digits from the OS's random source (time-based if it fails).
fn new_request_id() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        b = (now_ms() as u64).to_be_bytes();
    }
    format!("req_{}", hex::encode(b))
}

impl SteeringService {
    pub fn new(
        sites: Vec<Arc<SiteRuntime>>,
        store: Arc<dyn SteeringStore>,
        live: Arc<Live>,
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
                live,
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

    pub fn live(&self) -> &Arc<Live> {
        &self.inner.live
    }

    /// A steering POST. Returns the body as received plus `requestId`, or for a
    /// dry run `{"requestId": null, "allocation": [...]}`.
    pub async fn submit(
        &self,
        site_ref: &str,
        endpoint: Endpoint,
        body: &Value,
        origin: &Origin,
        dry_run: bool,
    ) -> Result<Value, SteeringError> {
        let site = self.site(site_ref)?.clone();
        let live = &self.inner.live;
        let mut signal = site.signal.lock().await;
        if let (Some(key), false) = (&origin.idempotency_key, dry_run) {
            let since = now_ms() - IDEMPOTENCY_MS;
            let first = self
                .inner
                .store
                .replay(origin.caller.clone(), key.clone(), since)
                .await?;
            if let Some(answer) = first {
                return Ok(answer);
            }
        }
        let now = now_ms();
        let soc = site_soc(&site.inputs(now_ms(), live).batteries);
        let req = request::parse(
            endpoint,
            body,
            Context {
                now_ms: now,
                site_soc: soc,
                limits: request::ConfiguredLimits {
                    max_import_w: site.config.max_import.map(|p| p.watts()),
                    max_export_w: site.config.max_export.map(|p| p.watts()),
                },
            },
        )?;
        let mut next = signal.clone();
        next.prune(now);
        if dry_run {
            next.apply(&req, "dryRun", now);
            let d = site.evaluate(&next, now, live);
            return Ok(json!({"requestId": null, "allocation": site.allocation_json(&d, live)}));
        }
        let id = new_request_id();
        let changed = next.apply(&req, &id, now);
        let mut answer = body.clone();
        if let Some(obj) = answer.as_object_mut() {
            obj.insert("requestId".into(), Value::String(id.clone()));
        }
        let commit = Commit {
            site: site_ref.to_string(),
            entries: next.entries_of(&changed),
            components: changed,
            audit: self.request_event(site_ref, now, origin, body.clone(), Some(id)),
            idempotency: origin
                .idempotency_key
                .clone()
                .map(|k| (origin.caller.clone(), k, answer.clone())),
        };
        self.inner.store.commit(commit).await?;
        *signal = next;
        drop(signal);
        site.wake.notify_one();
        site.changed.notify_one();
        Ok(answer)
    }

    /// `DELETE /sites/{s}/steering[?component=]`: the component (or all) is at its
    /// fallback from now on. Returns the new state.
    pub async fn end(
        &self,
        site_ref: &str,
        component: Option<Component>,
        origin: &Origin,
    ) -> Result<Value, SteeringError> {
        let site = self.site(site_ref)?.clone();
        let mut signal = site.signal.lock().await;
        let now = now_ms();
        let mut next = signal.clone();
        next.prune(now);
        let changed = next.end(component, now);
        let body = json!({"component": component.map(Component::wire_name)});
        let commit = Commit {
            site: site_ref.to_string(),
            entries: next.entries_of(&changed),
            components: changed,
            audit: self.request_event(site_ref, now, origin, body, None),
            idempotency: None,
        };
        self.inner.store.commit(commit).await?;
        *signal = next;
        drop(signal);
        site.wake.notify_one();
        site.changed.notify_one();
        self.state(site_ref).await
    }

    /// `GET /sites/{s}/steering`.
    pub async fn state(&self, site_ref: &str) -> Result<Value, SteeringError> {
        let site = self.site(site_ref)?;
        let signal = site.signal.lock().await.clone();
        Ok(view::state_json(site, &signal, now_ms()))
    }

    /// `GET /sites/{s}/steering/history?limit=N`, newest first.
    pub async fn history(&self, site_ref: &str, limit: usize) -> Result<Value, SteeringError> {
        self.site(site_ref)?;
        let records = self
            .inner
            .store
            .history(site_ref.to_string(), limit)
            .await?;
        Ok(Value::Array(records))
    }

    /// `GET /sites`.
    pub fn sites_json(&self) -> Value {
        Value::Array(
            self.inner
                .sites
                .iter()
                .map(|s| view::site_json(s, &self.inner.live))
                .collect(),
        )
    }

    /// `GET /sites/{s}`.
    pub fn site_json(&self, site_ref: &str) -> Result<Value, SteeringError> {
        Ok(view::site_json(self.site(site_ref)?, &self.inner.live))
    }

    fn request_event(
        &self,
        site: &str,
        now: i64,
        origin: &Origin,
        body: Value,
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
}
