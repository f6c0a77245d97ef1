//! Steering's decisions stay pure: no file under `src/steering/decisions/`
//! spawns, awaits, locks, reads a clock or touches a socket, a file or the
//! store, and each names of the crate only what a decision works on
//! (`config`, `model`, `util`, the command types of `modbus::control`, and
//! steering's own typed data).
//!
//! Reads files only; it must not build, start or import anything of the
//! agent.

use super::source::masked;
use super::{read, root, source_files};

/// What a decision may not say, and why.
const NOT_IN_A_DECISION: [(&str, &str); 13] = [
    ("tokio", "a runtime"),
    ("async ", "an async function"),
    (".await", "a wait"),
    ("spawn", "a task or thread"),
    ("Mutex", "a lock"),
    ("RwLock", "a lock"),
    ("std::fs", "a file"),
    ("std::net", "a socket"),
    ("Instant", "a clock"),
    ("now_ms()", "the wall clock"),
    ("crate::store", "the store"),
    ("crate::telemetry", "the live view"),
    ("crate::modbus::bus", "a bus"),
];

/// The crate paths a decision may name.
const MAY_NAME: [&str; 5] = [
    "crate::config",
    "crate::model",
    "crate::util",
    "crate::modbus::control",
    "crate::steering",
];

/// What `text` (a file under the decisions) says that a decision may not:
/// `line: what (why)`.
fn breaches(text: &str) -> Vec<String> {
    let code = masked(text);
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for (what, why) in NOT_IN_A_DECISION {
            if line.contains(what) {
                out.push(format!("{}: {what} ({why})", n + 1));
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let path = &rest[at..];
            if !MAY_NAME.iter().any(|m| path.starts_with(m)) {
                let named: String = path
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                out.push(format!("{}: {named} (not a decision's input)", n + 1));
            }
            rest = &rest[at + "crate::".len()..];
        }
    }
    out
}

#[test]
fn steerings_decisions_spawn_wait_lock_and_read_no_clock_and_no_io() {
    let mut found = Vec::new();
    let mut files = 0;
    for (relative, file) in &source_files() {
        if !relative.starts_with("src/steering/decisions/") {
            continue;
        }
        files += 1;
        found.extend(
            breaches(&read(file))
                .into_iter()
                .map(|b| format!("{relative}:{b}")),
        );
    }
    assert!(
        files >= 10,
        "the decisions are under {}",
        root().join("src/steering/decisions").display()
    );
    assert!(found.is_empty(), "not pure:\n{}", found.join("\n"));
}

#[test]
fn the_decisions_check_sees_each_kind_of_breach() {
    for bad in [
        "fn f() { tokio::spawn(async {}); }\n",
        "async fn f() {}\n",
        "fn f(x: &std::sync::Mutex<u8>) {}\n",
        "fn f() -> i64 { crate::model::time::now_ms() }\n",
        "use crate::store::StoreHandle;\n",
        "use crate::telemetry::Live;\n",
        "use crate::api::ApiError;\n",
        "fn f() { let _ = std::fs::read(\"x\"); }\n",
    ] {
        assert!(!breaches(bad).is_empty(), "{bad:?}");
    }
    let clean = "// tokio, .await, crate::store in a comment\n\
                 use crate::config::ExportOrder;\n\
                 use crate::steering::value::Component;\n\
                 fn f(now_ms: i64) -> &'static str { let _ = now_ms; \"spawn\" }\n";
    assert!(breaches(clean).is_empty(), "{:?}", breaches(clean));
}
