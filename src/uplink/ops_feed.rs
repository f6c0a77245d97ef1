//! The ops channel's outgoing side: every state an operation enters, from
//! either transport, on `{root}/ops/state/{id}` (not retained), and the
//! chunks of a bundle asked over MQTT on `{root}/ops/bundle/{id}`, through
//! the link's answer queue (sent while connected; a requester that missed
//! them reads `GET /admin/operations/{id}` and its `/bundle?chunk=N`).
//!
//! It must not run operations or decide what they do: it renders and queues.

use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::rpc::MQTT_TRANSPORT;
use super::topics::Topics;
use super::workers::Outgoing;
use crate::api::{render_bundle_chunk, render_operation};
use crate::ops::{OpKind, OpState, Ops};

pub(super) async fn run(
    ops: Ops,
    topics: Topics,
    out: mpsc::Sender<Outgoing>,
    cancel: CancellationToken,
) {
    let mut changes = ops.subscribe();
    loop {
        let op = tokio::select! {
            () = cancel.cancelled() => break,
            r = changes.recv() => match r {
                Ok(op) => op,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "operation states not published: they came faster than the link took them");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
        };
        let state = Outgoing {
            topic: topics.ops_state(op.id.as_str()),
            correlation: None,
            payload: serde_json::to_vec(&render_operation(&op)).unwrap_or_default(),
        };
        if out.send(state).await.is_err() {
            break;
        }
        let mqtt_bundle = op.kind == OpKind::Bundle
            && op.state == OpState::Succeeded
            && op.source.transport == MQTT_TRANSPORT.0;
        if !mqtt_bundle {
            continue;
        }
        let mut index = 0;
        while let Ok(chunk) = ops.bundle_chunk(&op.id, index) {
            let message = Outgoing {
                topic: topics.ops_bundle(op.id.as_str()),
                correlation: None,
                payload: serde_json::to_vec(&render_bundle_chunk(op.id.as_str(), &chunk))
                    .unwrap_or_default(),
            };
            if out.send(message).await.is_err() {
                return;
            }
            index += 1;
            if index >= chunk.count {
                break;
            }
        }
    }
}
