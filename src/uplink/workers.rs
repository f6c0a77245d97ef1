//! The RPC workers: [`WORKERS`] tasks on the agent's `TaskTracker` answer RPC
//! requests through the bridge, fed by one queue bounded both in requests
//! ([`QUEUE`]) and in payload bytes ([`QUEUE_BYTES`]). So at most [`WORKERS`]
//! requests run through the router at once, whatever the broker delivers.
//!
//! The link task only offers requests: [`Workers::offer`] never waits. Past a
//! bound it hands the request back, and the link answers it 429
//! `rate_limited` itself (or, without an id or response topic, logs and counts
//! it). Workers stop with the agent's cancellation: each finishes the request
//! it holds (the API's request time limit bounds it) and takes no more; what is
//! still queued is dropped unanswered, and its requesters retry with the same
//! id.
//!
//! This file must not parse requests (the bridge does) nor publish (the link
//! does); it must not start a task per request.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken;

use super::client::Incoming;
use super::rpc::{Answer, Bridge};
use super::stats::{bump, LinkStats};
use super::topics::Topics;

/// Requests answered at once.
pub const WORKERS: usize = 4;
/// Requests waiting for a worker at most.
pub const QUEUE: usize = 128;
/// Payload bytes waiting for a worker at most.
pub const QUEUE_BYTES: usize = 1 << 20;
/// Answers waiting for the link task at most; workers wait beyond that.
const ANSWERS: usize = 64;

/// An RPC answer on its way out.
pub(super) struct Outgoing {
    pub(super) topic: String,
    pub(super) correlation: Option<axum::body::Bytes>,
    pub(super) payload: Vec<u8>,
}

/// What the workers are busy with, for `/metrics` and the bound itself.
#[derive(Debug, Default)]
pub(super) struct Load {
    queued: AtomicUsize,
    queued_bytes: AtomicUsize,
    running: AtomicUsize,
    /// Requests refused past a bound, answered 429.
    pub(super) refused_answered: AtomicU64,
    /// Requests refused past a bound that had no id or response topic.
    pub(super) refused_unanswered: AtomicU64,
}

impl Load {
    pub(super) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    pub(super) fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Relaxed)
    }

    pub(super) fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

/// Why a request was handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Full {
    Requests,
    Bytes,
}

impl Full {
    /// The problem's detail.
    pub(super) fn detail(self) -> String {
        match self {
            Full::Requests => format!(
                "the gateway has {QUEUE} RPC requests waiting for its {WORKERS} workers; retry later with the same id"
            ),
            Full::Bytes => format!(
                "the RPC requests waiting for the gateway's {WORKERS} workers hold {QUEUE_BYTES} bytes; retry later with the same id"
            ),
        }
    }
}

/// What became of an offered request.
pub(super) enum Offer {
    Queued,
    /// Handed back: the queue is at a bound.
    Refused(Incoming, Full),
}

struct Job {
    message: Incoming,
    bytes: usize,
}

/// The link's end of the queue.
pub(super) struct Workers {
    tx: mpsc::Sender<Job>,
    load: Arc<Load>,
}

/// What the workers need from the uplink.
pub(super) struct Context {
    pub(super) bridge: Arc<Bridge>,
    /// The ops channel's bridge (`{root}/ops/request`).
    pub(super) ops_bridge: Arc<Bridge>,
    pub(super) topics: Topics,
    pub(super) stats: Arc<LinkStats>,
    pub(super) load: Arc<Load>,
    /// The largest message to send, bytes (`mqtt.max_outgoing_kb`).
    pub(super) max_outgoing: usize,
    /// The broker's own Maximum Packet Size from its last CONNACK (MQTT 5;
    /// 0: it said none).
    pub(super) broker_max: AtomicUsize,
}

impl Context {
    /// The broker connected and said (or did not say) the largest packet
    /// it takes.
    pub(super) fn broker_said(&self, max_packet: Option<u32>) {
        let max = max_packet.map_or(0, |m| m as usize);
        let before = self.broker_max.swap(max, Ordering::Relaxed);
        if max != 0 && max < self.max_outgoing && max != before {
            tracing::info!(broker_max_bytes = max, max_outgoing_kb = self.max_outgoing / 1024,
                "the MQTT broker takes smaller messages than mqtt.max_outgoing_kb: RPC answers are held to its Maximum Packet Size");
        }
    }

    /// The largest message to send now, and what bounds it.
    fn outgoing_bound(&self) -> (usize, &'static str) {
        match self.broker_max.load(Ordering::Relaxed) {
            m if m != 0 && m < self.max_outgoing => (m, "the broker's Maximum Packet Size"),
            _ => (self.max_outgoing, "mqtt.max_outgoing_kb"),
        }
    }
}

/// Room in a PUBLISH packet beside its topic and payload: the fixed
/// header, the topic's length, the packet id and MQTT 5's properties
/// (the correlation data counted apart).
const PUBLISH_OVERHEAD: usize = 64;

impl Workers {
    /// Starts the workers on `tasks`; returns the queue and the receiver of
    /// their answers (the link's).
    pub(super) fn start(
        context: Arc<Context>,
        tasks: &super::tasks::Tasks,
        cancel: &CancellationToken,
    ) -> (Workers, mpsc::Sender<Outgoing>, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (answers_tx, answers) = mpsc::channel(ANSWERS);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WORKERS {
            tasks.spawn(work(
                rx.clone(),
                context.clone(),
                answers_tx.clone(),
                cancel.clone(),
            ));
        }
        let load = context.load.clone();
        (Workers { tx, load }, answers_tx, answers)
    }

    /// Queues `message` for a worker, or hands it back when a bound is reached.
    /// Never waits. Only the link task offers, so the byte check cannot race
    /// another offer.
    pub(super) fn offer(&self, message: Incoming) -> Offer {
        let bytes = message.payload.len();
        if self.load.queued_bytes().saturating_add(bytes) > QUEUE_BYTES {
            return Offer::Refused(message, Full::Bytes);
        }
        self.load.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.load.queued.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(Job { message, bytes }) {
            Ok(()) => Offer::Queued,
            Err(e) => {
                self.load.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.load.queued.fetch_sub(1, Ordering::Relaxed);
                // Closed only when the workers stopped: shutting down, so busy too.
                let job = match e {
                    mpsc::error::TrySendError::Full(j) | mpsc::error::TrySendError::Closed(j) => j,
                };
                Offer::Refused(job.message, Full::Requests)
            }
        }
    }
}

async fn work(
    queue: Arc<Mutex<mpsc::Receiver<Job>>>,
    context: Arc<Context>,
    answers: mpsc::Sender<Outgoing>,
    cancel: CancellationToken,
) {
    let load = &context.load;
    loop {
        let job = tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            job = async { queue.lock().await.recv().await } => match job {
                Some(job) => job,
                None => break,
            },
        };
        load.queued.fetch_sub(1, Ordering::Relaxed);
        load.queued_bytes.fetch_sub(job.bytes, Ordering::Relaxed);
        load.running.fetch_add(1, Ordering::Relaxed);
        let out = respond(&context, job.message).await;
        load.running.fetch_sub(1, Ordering::Relaxed);
        if let Some(out) = out {
            if answers.send(out).await.is_err() {
                break;
            }
        }
    }
}

/// Answers one request through the bridge; `None` when there is nowhere to
/// send the answer.
pub(super) async fn respond(context: &Context, m: Incoming) -> Option<Outgoing> {
    let bytes = m.payload.len();
    let ops = m.topic == context.topics.ops_request();
    let bridge = if ops {
        &context.ops_bridge
    } else {
        &context.bridge
    };
    let Answer {
        id,
        payload,
        oversized,
    } = bridge.answer(&m.payload).await;
    if oversized {
        bump(&context.stats.rpc_too_large);
        tracing::warn!(rpc_id = ?id, bytes, "RPC request too large: answered 413");
    }
    let Some(topic) = destination(&context.topics, ops, m.response_topic, id.clone()) else {
        tracing::warn!(
            bytes,
            "RPC request without a usable id or response topic: not answered"
        );
        return None;
    };
    let packet = payload.len()
        + topic.len()
        + m.correlation.as_ref().map_or(0, |c| c.len())
        + PUBLISH_OVERHEAD;
    let (max, bound) = context.outgoing_bound();
    let payload = if packet > max {
        bump(&context.stats.answers_too_large);
        tracing::warn!(rpc_id = ?id, bytes = payload.len(), max, bound,
            "RPC answer over the largest message the broker takes: answered 413 with what to ask instead");
        super::rpc::answer_too_large(id.as_deref(), payload.len(), max, bound).await
    } else {
        payload
    };
    Some(Outgoing {
        topic,
        correlation: m.correlation,
        payload,
    })
}

/// Where the answer goes: the request's response topic (MQTT 5), else the
/// response topic of its id on its channel (`ops`: the ops channel).
pub(super) fn destination(
    topics: &Topics,
    ops: bool,
    response_topic: Option<String>,
    id: Option<String>,
) -> Option<String> {
    match (response_topic, id) {
        (Some(t), _) => Some(t),
        (None, Some(id)) if ops => Some(topics.ops_response(&id)),
        (None, Some(id)) => Some(topics.rpc_response(&id)),
        (None, None) => None,
    }
}
