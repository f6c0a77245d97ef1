//! Operations and bundle chunks as JSON: the bodies of `/admin/...` and of
//! the ops channel's state messages (`{root}/ops/state/{id}`).
//!
//! It must not decide anything: it writes what the operations layer holds.

use serde_json::{json, Value};

use crate::ops::{level_name, Chunk, ConfigRecord, Operation, Outcome, Refusal, CHUNK_BYTES};

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
        Outcome::Config(v) => json!({
            "sha256": v.sha256,
            "version": v.version,
            "file": v.file,
            "toml": v.toml,
            "redacted": v.redacted,
        }),
        Outcome::ConfigHistory(rows) => {
            json!({"changes": rows.iter().map(record).collect::<Vec<_>>()})
        }
        Outcome::GridEvents {
            csv,
            events,
            truncated,
        } => json!({"csv": csv, "events": events, "truncated": truncated}),
        Outcome::ConfigWritten {
            old_sha256,
            new_sha256,
            within_s,
            watch,
            allowed,
            live,
        } => json!({
            "result": "pending",
            "live": live,
            "oldSha256": old_sha256,
            "newSha256": new_sha256,
            "rollbackAfterS": within_s,
            "watch": watch,
            "lessSafeAllowed": allowed,
        }),
        Outcome::ConfigUnchanged { sha256 } => json!({"result": "unchanged", "sha256": sha256}),
        Outcome::ConfigApplied { sha256, version } => {
            json!({"result": "applied", "sha256": sha256, "version": version})
        }
        Outcome::ConfigRefused(Refusal::Invalid(problems)) => json!({
            "result": "refused",
            "problems": problems.iter().map(|p| json!({"path": p.path, "message": p.message})).collect::<Vec<_>>(),
        }),
        Outcome::ConfigRefused(Refusal::LessSafe(changes)) => json!({
            "result": "refused",
            "lessSafe": changes,
            "needs": "allowLessSafe",
        }),
        Outcome::ConfigRolledBack {
            old_sha256,
            new_sha256,
            reason,
        } => json!({
            "result": "rolled_back",
            "oldSha256": old_sha256,
            "newSha256": new_sha256,
            "reason": reason,
        }),
    }
}

fn record(r: &ConfigRecord) -> Value {
    json!({
        "id": r.op_id,
        "at": r.at_ms,
        "source": {"transport": r.transport, "caller": r.caller},
        "oldSha256": r.old_sha256,
        "newSha256": r.new_sha256,
        "result": r.result.as_str(),
        "reason": r.reason,
        "version": r.version,
        "live": r.live,
    })
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
