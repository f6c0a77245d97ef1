//! The operations channel's work: operations with an id, a state
//! (`accepted`, `running`, `succeeded`, `failed`) and an outcome, idempotent
//! by id, each in the audit history with its source (`docs/operations.md`,
//! "Operations"). The kinds: the newest log lines (`logs`), a support bundle
//! (`bundle`), a restart through systemd (`restart`), a re-scan of a bus
//! that proposes config blocks without applying them (`scan`), and the
//! configuration: read it, its history, change it (`config.*`).
//!
//! The API (`/admin/...`) and the uplink's ops channel (`{root}/ops/...`,
//! the same routes) call [`Ops`]; they parse and render, this module decides
//! and runs. It must not know JSON, topics or HTTP. A scan only proposes
//! config blocks; a restart only asks the process to exit
//! (`Ops::restart_requested`; `sitegate run` exits with [`EXIT_RESTART`],
//! which the unit restarts). The config operations (`config.get`,
//! `config.history`, `config.put`) change the config file only by whole
//! files renamed into place, keep the last good one, and put a change on
//! trial: healthy within `[ops] rollback_after_s` after the restart, or
//! rolled back (`config_ops.rs`, `config_trial.rs`, `pending.rs`,
//! `config_file.rs`).

mod audit;
mod bundle;
mod change;
mod config_file;
mod config_history;
mod config_ops;
mod config_trial;
mod ended;
mod error;
mod file_task;
mod gather;
mod health;
mod live_apply;
mod operation;
pub mod pending;
mod registry;
mod run;
mod safety;
mod scan;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use audit::KEEP as AUDIT_KEEP;
pub use bundle::{BUNDLE_MAX, CHUNK_BYTES};
pub use change::{ChangeResult, ConfigChange, ConfigRecord, ConfigView, Refusal};
pub use config_trial::UplinkProbe;
pub use error::OpsError;
pub use gather::build;
pub use live_apply::{LiveError, LiveParts, Reload};
pub use operation::{
    level_name, parse_level, OpId, OpKind, OpRequest, OpState, Operation, Outcome, Source,
    CONFIG_HISTORY_DEFAULT, CONFIG_HISTORY_MAX, ID_MAX, LOG_BYTES_DEFAULT, LOG_BYTES_MAX,
    LOG_LINES_DEFAULT, LOG_LINES_MAX, SCAN_TIMEOUT_MS_DEFAULT, SCAN_UNITS_DEFAULT, SCAN_UNITS_MAX,
};

use crate::config::Config;
use crate::metrics::Registry as Metrics;
use crate::model::time::now_ms;
use crate::store::StoreHandle;
use crate::telemetry::Live;
use registry::Table;

/// The exit code of `sitegate run` after a `restart` operation (EX_TEMPFAIL):
/// the unit restarts on it (`RestartForceExitStatus=75`).
pub const EXIT_RESTART: u8 = 75;
/// Operations running at once; another is answered busy.
pub const MAX_RUNNING: usize = 2;
/// How long after a `restart` operation succeeded the agent starts to stop,
/// so its answer and state go out first.
pub const RESTART_DELAY: Duration = Duration::from_millis(500);

/// What operations read.
#[derive(Clone)]
pub struct OpsContext {
    pub config: Arc<Config>,
    pub live: Arc<Live>,
    pub store: StoreHandle,
    pub steering: crate::steering::SteeringService,
    pub metrics: Option<Metrics>,
    /// What a config change applied live reaches (`None`: every change
    /// restarts).
    pub live_parts: Option<LiveParts>,
    /// The HTTPS certificate in service (its fingerprint goes into the
    /// bundle), when HTTPS is served.
    pub https: Option<Arc<crate::https::Certs>>,
    /// The event list (the bundle's `events` section), when it runs.
    pub events: Option<Arc<crate::events::EventLog>>,
}

/// One chunk of a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub index: usize,
    pub count: usize,
    pub text: String,
    /// Of the whole bundle.
    pub sha256: String,
}

/// The operations of this agent. Cheap to clone.
#[derive(Clone)]
pub struct Ops {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: OpsContext,
    table: Mutex<Table>,
    /// One submission at a time, so two of one id cannot both start it.
    submitting: tokio::sync::Mutex<()>,
    /// One `config.put` at a time.
    config_lock: tokio::sync::Mutex<()>,
    changes: broadcast::Sender<Arc<Operation>>,
    /// The config the agent runs: `ctx.config` until a change applied live.
    running: Mutex<Arc<Config>>,
    /// Whether the uplink is connected, once the agent gave it.
    uplink: Mutex<Option<UplinkProbe>>,
    restart: CancellationToken,
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl Ops {
    /// Marks what an earlier run left unfinished as failed, then serves.
    pub async fn start(ctx: OpsContext, tracker: &TaskTracker, cancel: CancellationToken) -> Ops {
        // A config change on trial stays `running` across its restart.
        let trial = config_trial::on_trial(&ctx.config).await;
        match audit::interrupted(&ctx.store, now_ms(), trial).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                operations = n,
                "operations of the last run ended unfinished: recorded as failed"
            ),
            Err(e) => tracing::error!(error = %e, "cannot read the operations' audit history"),
        }
        let (changes, _) = broadcast::channel(64);
        Ops {
            inner: Arc::new(Inner {
                running: Mutex::new(ctx.config.clone()),
                uplink: Mutex::new(None),
                ctx,
                table: Mutex::new(Table::default()),
                submitting: tokio::sync::Mutex::new(()),
                config_lock: tokio::sync::Mutex::new(()),
                changes,
                restart: CancellationToken::new(),
                tracker: tracker.clone(),
                cancel,
            }),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // The table is whole after any panic: every change is one insert.
        self.inner.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The config the agent runs now: the one it started on, or the last
    /// change applied live.
    pub fn running(&self) -> Arc<Config> {
        // Replaced whole under the lock: a panic cannot leave it half set.
        self.inner
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_running(&self, config: Arc<Config>) {
        *self.inner.running.lock().unwrap_or_else(|e| e.into_inner()) = config;
    }

    /// Whether the uplink is connected (`None` without `[mqtt]`).
    fn uplink_connected(&self) -> Option<bool> {
        let probe = self
            .inner
            .uplink
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        probe.map(|p| p())
    }

    /// Starts `request` as operation `id`, or returns the operation that id
    /// already names (`false`: not started again). The same id with other
    /// arguments is [`OpsError::IdReused`].
    pub async fn submit(
        &self,
        id: OpId,
        request: OpRequest,
        source: Source,
    ) -> Result<(Arc<Operation>, bool), OpsError> {
        let _one = self.inner.submitting.lock().await;
        let in_memory = self.table().get(&id);
        let known = match in_memory {
            Some(op) => Some(op),
            None => audit::find(&self.inner.ctx.store, &id).await?.map(Arc::new),
        };
        if let Some(op) = known {
            if op.kind != request.kind() || op.args != request.canonical() {
                return Err(OpsError::IdReused {
                    id,
                    kind: op.kind.as_str(),
                    args: op.args.clone(),
                });
            }
            return Ok((op, false));
        }
        scan::check(&self.inner.ctx.config, &request)?;
        let running = self.table().running();
        if running >= MAX_RUNNING {
            return Err(OpsError::Busy {
                running,
                max: MAX_RUNNING,
            });
        }
        let op = Operation {
            id,
            kind: request.kind(),
            args: request.canonical(),
            source,
            state: operation::OpState::Accepted,
            accepted_ms: now_ms(),
            finished_ms: None,
            outcome: None,
            summary: None,
            error: None,
        };
        audit::write(&self.inner.ctx.store, &op).await?;
        tracing::info!(
            operation = %op.id,
            kind = op.kind.as_str(),
            args = %op.args,
            transport = %op.source.transport,
            caller = %op.source.caller,
            "operation accepted"
        );
        let op = Arc::new(op);
        self.changed(op.clone());
        self.inner
            .tracker
            .spawn(run::run(self.clone(), op.clone(), request));
        Ok((op, true))
    }

    /// Records a new state of an operation and tells the subscribers.
    fn changed(&self, op: Arc<Operation>) {
        self.table().put(op.clone());
        let _ = self.inner.changes.send(op);
    }

    /// The operation `id`: this run's, or from the audit history.
    pub async fn get(&self, id: &OpId) -> Result<Arc<Operation>, OpsError> {
        let in_memory = self.table().get(id);
        if let Some(op) = in_memory {
            return Ok(op);
        }
        audit::find(&self.inner.ctx.store, id)
            .await?
            .map(Arc::new)
            .ok_or_else(|| OpsError::NotFound(id.clone()))
    }

    /// Waits at most `within` for operation `id` to end (or, for a config
    /// change, to be written and on trial); its state then.
    pub async fn settled(&self, id: &OpId, within: Duration) -> Result<Arc<Operation>, OpsError> {
        let mut changes = self.inner.changes.subscribe();
        let op = self.get(id).await?;
        if op.is_settled() {
            return Ok(op);
        }
        let wait = async {
            loop {
                match changes.recv().await {
                    Ok(op) if &op.id == id && op.is_settled() => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        };
        let _ = tokio::time::timeout(within, wait).await;
        self.get(id).await
    }

    /// The audit history, newest first.
    pub async fn history(&self, limit: usize) -> Result<Vec<Operation>, OpsError> {
        audit::newest(&self.inner.ctx.store, limit).await
    }

    /// Chunk `index` of the bundle of operation `id`.
    pub fn bundle_chunk(&self, id: &OpId, index: usize) -> Result<Chunk, OpsError> {
        let (text, sha256) = self
            .table()
            .bundle(id)
            .ok_or_else(|| OpsError::NoBundle(id.clone()))?;
        let ranges = bundle::chunks(&text);
        let count = ranges.len();
        let range = ranges.get(index).cloned().ok_or(OpsError::NoChunk {
            id: id.clone(),
            chunk: index,
            chunks: count,
        })?;
        Ok(Chunk {
            index,
            count,
            text: text[range].to_string(),
            sha256,
        })
    }

    /// Every change of state of every operation, as it happens.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Operation>> {
        self.inner.changes.subscribe()
    }

    /// Resolves a config change the last run left on trial or resolved
    /// (`<config>.pending`): watches the agent's health for the change's
    /// window, then applies it or restores the last good config and asks
    /// for a restart. Call once the uplink (when configured) is started;
    /// `uplink` tells whether it is connected.
    pub fn resolve_config_change(&self, uplink: Option<UplinkProbe>) {
        *self.inner.uplink.lock().unwrap_or_else(|e| e.into_inner()) = uplink;
        self.inner
            .tracker
            .spawn(config_trial::resolve(self.clone()));
    }

    /// Cancelled when a `restart` operation asks the process to exit.
    pub fn restart_requested(&self) -> CancellationToken {
        self.inner.restart.clone()
    }
}
