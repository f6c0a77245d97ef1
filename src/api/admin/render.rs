//! Operations and bundle chunks as JSON: the bodies of `/admin/...` and of
//! the ops channel's state messages (`{root}/ops/state/{id}`).
//!
//! It must not decide anything: it writes what the operations layer holds.

use serde_json::{json, Value};

use crate::ops::{level_name, Chunk, Operation, Outcome, CHUNK_BYTES};

/// One operation.
pub fn operation(op: &Operation) -> Value {
    json!({
        "id": op.id.as_str(),
        "kind": op.kind.as_str(),
        "args": op.args,
        "state": op.state.as_str(),
        "source": {"transport": op.source.transport, "caller": op.source.caller},
        "acceptedAt": op.accepted_ms,
        "finishedAt": op.finished_ms,
        "summary": op.outcome.as_ref().map(Outcome::summary).or(op.summary.clone()),
        "error": op.error,
        "result": op.outcome.as_ref().map(outcome),
    })
}

fn outcome(o: &Outcome) -> Value {
    match o {
        Outcome::Logs(t) => json!({
            "lines": t.lines.iter().map(|l| json!({
                "timestamp": l.ts_ms,
                "level": level_name(l.level),
                "target": l.target,
                "text": l.text,
            })).collect::<Vec<_>>(),
            "truncated": t.truncated,
            "forgotten": t.forgotten,
        }),
        Outcome::Bundle {
            bytes,
            sha256,
            chunks,
        } => json!({"bytes": bytes, "sha256": sha256, "chunks": chunks, "chunkBytes": CHUNK_BYTES}),
        Outcome::Restart { exit_at_ms } => json!({"exitAt": exit_at_ms}),
        Outcome::Scan {
            bus,
            found,
            config,
            notes,
        } => json!({"bus": bus, "found": found, "config": config, "notes": notes}),
    }
}

/// One chunk of a bundle.
pub fn chunk(id: &str, c: &Chunk) -> Value {
    json!({
        "id": id,
        "chunk": c.index,
        "chunks": c.count,
        "sha256": c.sha256,
        "data": c.text,
    })
}
