//! The MQTT uplink (`docs/mqtt.md`): status with a last will, the retained device
//! listing and steering states, measurement batches from a durable outbox, and the
//! RPC bridge onto the HTTP router.
//!
//! Only this module knows topics and MQTT. It must never hold up measuring or
//! steering: without a broker, with a broker that refuses our publishes, and
//! with TLS files it cannot use, everything else goes on and telemetry waits in
//! the outbox.
//!
//! # Wiring
//!
//! ```text
//! Telemetry::record + downstream ─► store writer ─► OutboxSink (same transaction) ─► Outbox ─► link ─► broker
//! steering::follow_states ─► SteeringFeed::publish_steering_state ─► link (retained)
//! broker ─► link ─► workers (4, bounded queue) ─► rpc::Bridge ─► api::router (oneshot) ─► link ─► broker
//!   (the ops channel `{root}/ops/request`: the same workers, its own bridge, `/admin/...` only)
//! ops::Ops::subscribe ─► ops_feed ─► link ─► {root}/ops/state/{id}, {root}/ops/bundle/{id}
//! ```

mod backoff;
mod client;
mod dedup;
mod flight;
mod link;
mod ops_feed;
pub mod outbox;
mod payload;
mod read_answers;
mod refusal;
mod rpc;
mod stats;
mod steering;
mod tasks;
mod tls;
mod topics;
mod workers;

pub use dedup::{
    Dedup, DedupStats, Seen, MAX_ANSWER as DEDUP_MAX_ANSWER, MAX_BYTES as DEDUP_MAX_BYTES,
    MAX_ROWS as DEDUP_MAX_ROWS, WINDOW_MS as DEDUP_WINDOW_MS,
};
pub use outbox::{Cap, Outbox, OutboxSink, OutboxState, OutboxStats};
pub use payload::{measurements as measurements_payload, parse_rpc_request, RpcMethod, RpcRequest};
pub use rpc::{
    idempotency_key, Answer, Bridge, Channel, MAX_REQUEST as RPC_MAX_REQUEST, MQTT_CALLER,
    MQTT_TRANSPORT,
};
pub use steering::SteeringFeed;
pub use tls::SetupError;
pub use topics::Topics;
pub use workers::{QUEUE as RPC_QUEUE, QUEUE_BYTES as RPC_QUEUE_BYTES, WORKERS as RPC_WORKERS};

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::Auth;
use crate::config::MqttConfig;
use crate::liveness::{Heartbeat, Pulse};
use crate::model::time::now_ms;
use crate::telemetry::Live;
use stats::LinkStats;

/// Everything the uplink needs from the rest of the agent.
pub struct UplinkParts {
    pub config: MqttConfig,
    pub gateway_id: String,
    /// The HTTP API router (the same instance the listeners serve).
    pub router: axum::Router,
    /// The API's token table, for `token` in RPC payloads.
    pub auth: Arc<Auth>,
    pub live: Arc<Live>,
    /// `Telemetry::catalog_changes()`: republishes the device listing.
    pub catalog: watch::Receiver<u64>,
    /// On the agent's store, which was opened with the outbox's sink.
    pub outbox: Outbox,
    pub steering: SteeringFeed,
    /// The operations whose states go out on `{root}/ops/state/{id}` (the
    /// agent's; `None` publishes none, for benches of the link alone).
    pub ops: Option<crate::ops::Ops>,
}

/// A running uplink.
#[derive(Clone)]
pub struct Uplink {
    connected: watch::Receiver<bool>,
    outbox: Outbox,
    steering: SteeringFeed,
    topics: Topics,
    task: AbortHandle,
    /// The link task's counters (`stats()` is the outbox's).
    link_stats: Arc<LinkStats>,
    /// The RPC workers' queue and counts.
    rpc_load: Arc<workers::Load>,
    dedup: Dedup,
    pulse: Pulse,
    tasks: tasks::Tasks,
}

impl Uplink {
    /// Starts the link task and the outbox's upkeep on `tracker`; they run until
    /// `cancel`, then the link publishes `{"online": false}` and disconnects
    /// cleanly. Never fails: TLS files that cannot be used are retried with
    /// backoff ([`Uplink::setup_problem`] says why meanwhile), an unreachable
    /// broker forever.
    pub fn start(parts: UplinkParts, tracker: &TaskTracker, cancel: CancellationToken) -> Uplink {
        let tasks = tasks::Tasks::new(tracker);
        let topics = Topics::new(&parts.config.prefix, &parts.gateway_id);
        let dedup = Dedup::new(parts.outbox.store().clone());
        let ops_bridge = Bridge::ops(
            parts.router.clone(),
            parts.auth.clone(),
            parts.config.require_token,
            dedup.clone(),
        );
        let bridge = Bridge::new(
            parts.router,
            parts.auth,
            parts.config.require_token,
            dedup.clone(),
        );
        let (connected_tx, connected) = watch::channel(false);
        let link_stats = Arc::new(LinkStats::default());
        let rpc_load = Arc::new(workers::Load::default());
        let rpc_context = Arc::new(workers::Context {
            bridge: Arc::new(bridge),
            ops_bridge: Arc::new(ops_bridge),
            topics: topics.clone(),
            stats: link_stats.clone(),
            load: rpc_load.clone(),
            max_outgoing: parts.config.max_outgoing_kb as usize * 1024,
            broker_max: Default::default(),
        });
        let (rpc, answers_tx, answers) =
            workers::Workers::start(rpc_context.clone(), &tasks, &cancel);
        if let Some(ops) = parts.ops {
            tasks.spawn(ops_feed::run(
                ops,
                topics.clone(),
                answers_tx,
                cancel.child_token(),
            ));
        }
        let heartbeat = Heartbeat::new("mqtt link");
        let pulse = heartbeat.pulse();
        let client_id = client::client_id(&parts.config, &parts.gateway_id);
        tracing::info!(url = %parts.config.url, root = topics.root(), client_id, "MQTT uplink starting");
        let setup = link::Setup {
            config: parts.config.clone(),
            gateway_id: parts.gateway_id,
            topics: topics.clone(),
        };
        let link = link::Parts {
            client_id,
            max_incoming_kb: parts.config.max_incoming_kb,
            topics: topics.clone(),
            outbox: parts.outbox.clone(),
            rpc,
            rpc_context,
            dedup: dedup.clone(),
            tasks: tasks.clone(),
            live: parts.live,
            catalog: parts.catalog,
            steering: parts.steering.subscribe(),
            started_at_ms: now_ms(),
            drain_rate: parts.config.drain_rate,
            connected: connected_tx,
            stats: link_stats.clone(),
            heartbeat,
        };
        tasks.spawn(parts.outbox.clone().run_upkeep(cancel.child_token()));
        let task = tasks
            .spawn(link::run(setup, link, answers, cancel))
            .abort_handle();
        Uplink {
            connected,
            outbox: parts.outbox,
            steering: parts.steering,
            topics,
            task,
            link_stats,
            rpc_load,
            dedup,
            pulse,
            tasks,
        }
    }

    /// The uplink's own tasks alive now: the link, the outbox's upkeep, the
    /// RPC workers, the operations feed and a dedup prune while one runs. A
    /// request never adds one: it waits in the workers' bounded queue.
    pub fn tasks(&self) -> usize {
        self.tasks.alive()
    }

    /// Why the uplink cannot be set up (its TLS files), while it cannot; `None`
    /// once it could. For `/readyz`.
    pub fn setup_problem(&self) -> Option<String> {
        self.link_stats.setup_problem()
    }

    /// The link task's heartbeat, for the watchdog.
    pub fn pulse(&self) -> &Pulse {
        &self.pulse
    }

    /// True while a session with the broker is up and the RPC subscription was
    /// acknowledged.
    pub fn is_connected(&self) -> bool {
        *self.connected.borrow()
    }

    /// Changes on every connect and disconnect.
    pub fn connection(&self) -> watch::Receiver<bool> {
        self.connected.clone()
    }

    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    pub fn stats(&self) -> OutboxStats {
        self.outbox.stats()
    }

    pub fn topics(&self) -> &Topics {
        &self.topics
    }

    /// See [`SteeringFeed::publish_steering_state`].
    pub fn publish_steering_state(&self, site: &str, state: &crate::steering::SiteState) {
        self.steering.publish_steering_state(site, state);
    }

    /// Stops the link task at once, without DISCONNECT: the broker sees the
    /// connection drop and publishes the will. For tests of a dying agent.
    pub fn kill(&self) {
        self.task.abort();
    }
}
