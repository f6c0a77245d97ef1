//! The layer rules of `ARCHITECTURE.md` ("Layers"), checked against the source.
//!
//! The rules are read from the `text` block under that heading: which crate
//! modules each top-level module may name, and where `serde_json` may appear.
//! Every `crate::` path in `src/` (plain, grouped `crate::{a, b::C}`, and
//! `super::` chains that climb out of their top-level module) is resolved to
//! the top-level module it names and checked; comments are skipped. The rules
//! themselves must form no cycle, and every module of `src/lib.rs` must have
//! one. The binary's own files (`src/main.rs`, `src/cli/`) are outside the
//! library and may use all of it.
//!
//! The map itself stays a map: at most 300 lines, with an entry in its
//! "Code map" for every folder and file directly under `src/`. Nothing in
//! `src/` but the demo names the simulator. Inside each folder, imports form
//! no circle (`architecture/circles.rs`); files and functions keep their
//! sizes (`architecture/sizes.rs`); steering's decisions stay pure
//! (`architecture/decisions.rs`).
//!
//! Reads files only; it must not build, start or import anything of the agent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod circles;
mod decisions;
mod sizes;
mod source;

/// The rules: per module, the modules it may import (`None`: any), and the
/// file prefixes (`src/...`) where `serde_json` may appear.
struct Rules {
    imports: BTreeMap<String, Option<BTreeSet<String>>>,
    json: Vec<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `text` block after `## Layers` in ARCHITECTURE.md.
fn rules_from(architecture: &str) -> Rules {
    let section = architecture
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Layers` section");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the Layers section has a ```text block of rules");
    let mut rules = Rules {
        imports: BTreeMap::new(),
        json: Vec::new(),
    };
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(paths) = line.strip_prefix("serde_json:") {
            rules.json = paths
                .split_whitespace()
                .map(|p| format!("src/{p}"))
                .collect();
        } else if let Some((module, allowed)) = line.split_once("->") {
            let allowed = allowed.trim();
            let set =
                (allowed != "*").then(|| allowed.split_whitespace().map(String::from).collect());
            let previous = rules.imports.insert(module.trim().to_string(), set);
            assert!(previous.is_none(), "{module} has two rules");
        } else {
            panic!("a rule line is `module -> modules` or `serde_json: paths`: {line:?}");
        }
    }
    rules
}

/// The top-level modules `src/lib.rs` declares.
fn library_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .map(str::trim)
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
        })
        .filter_map(|l| l.strip_suffix(';'))
        .map(String::from)
        .collect()
}

/// The text without `//` and `/* */` comments; string and char literals are kept.
fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' && i + 1 < b.len() {
                out.push_str(&text[i..i + 2]);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
        } else if c == b'\'' && b.get(i + 1) == Some(&b'"') && b.get(i + 2) == Some(&b'\'') {
            out.push_str("'\"'");
            i += 3;
            continue;
        } else if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(b.len(), |n| i + n);
            continue;
        } else if text[i..].starts_with("/*") {
            i = text[i..].find("*/").map_or(b.len(), |n| i + n + 2);
            continue;
        }
        let ch = text[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level crate modules a piece of source names, with their line numbers.
/// `module_path` is the file's module path (`["config", "load"]`), for `super::`.
fn named_modules(code: &str, module_path: &[String]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            let after = &rest[at + "crate::".len()..];
            rest = after;
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue; // `sitegate_crate::`, not ours
            }
            if let Some(group) = after.strip_prefix('{') {
                for item in top_level_items(group) {
                    let name = ident_at(item.trim());
                    if !name.is_empty() && name != "self" {
                        found.push((n + 1, name.to_string()));
                    }
                }
            } else {
                let name = ident_at(after);
                if !name.is_empty() {
                    found.push((n + 1, name.to_string()));
                }
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("super::") {
            let before = rest[..at].chars().last();
            let chain = &rest[at..];
            rest = &rest[at + "super::".len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue; // inside a chain already counted
            }
            let mut ups = 0;
            let mut tail = chain;
            while let Some(t) = tail.strip_prefix("super::") {
                ups += 1;
                tail = t;
            }
            if ups >= module_path.len() {
                let name = ident_at(tail);
                if !name.is_empty() {
                    found.push((n + 1, name.to_string()));
                }
            }
        }
    }
    found
}

/// The comma-separated items of a `{...}` group (the text after its `{`), at
/// depth zero only.
fn top_level_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// `src/config/load.rs` → `["config", "load"]`; `src/config/mod.rs` → `["config"]`.
fn module_path(relative: &str) -> Vec<String> {
    let inner = relative.trim_start_matches("src/").trim_end_matches(".rs");
    let mut parts: Vec<String> = inner.split('/').map(String::from).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every rule one file breaks, as `path:line: what`.
fn violations(relative: &str, text: &str, rules: &Rules) -> Vec<String> {
    let path = module_path(relative);
    let Some(module) = path.first() else {
        return Vec::new();
    };
    let Some(allowed) = rules.imports.get(module) else {
        return vec![format!(
            "{relative}: module {module} has no rule in ARCHITECTURE.md"
        )];
    };
    let code = strip_comments(text);
    let mut out = Vec::new();
    if let Some(allowed) = allowed {
        for (line, named) in named_modules(&code, &path) {
            let known = rules.imports.contains_key(&named);
            if known && named != *module && !allowed.contains(&named) {
                out.push(format!(
                    "{relative}:{line}: {module} imports {named} (allowed: {})",
                    allowed.iter().cloned().collect::<Vec<_>>().join(" ")
                ));
            }
        }
    }
    let under = |p: &String| {
        relative
            .strip_prefix(p.as_str())
            .is_some_and(|rest| rest.is_empty() || rest == ".rs" || rest.starts_with('/'))
    };
    if !rules.json.iter().any(under) {
        for (n, line) in code.lines().enumerate() {
            if line.contains("serde_json") {
                out.push(format!(
                    "{relative}:{}: serde_json outside {}",
                    n + 1,
                    rules.json.join(" ")
                ));
            }
        }
    }
    out
}

/// Every `.rs` file under `src/`, sorted: its path from the crate root with
/// `/` separators (`src/model/time.rs`), and its absolute path.
fn source_files() -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut paths = Vec::new();
    walk(&root.join("src"), &mut paths);
    let mut files: Vec<(String, PathBuf)> = paths
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&root)
                .expect("under the project")
                .to_string_lossy()
                .replace('\\', "/");
            (relative, path)
        })
        .collect();
    files.sort();
    files
}

fn project_rules() -> Rules {
    rules_from(&read(&root().join("ARCHITECTURE.md")))
}

/// The names the `## Code map` section of ARCHITECTURE.md gives an entry:
/// each line there that starts with `` - `NAME` ``, as `NAME`.
fn map_entries(architecture: &str) -> BTreeSet<String> {
    let section = architecture
        .split("\n## Code map")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Code map` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(String::from)
        .collect()
}

/// What lies directly under `src/` now: each folder as `name/`, each `.rs`
/// file as `name.rs`.
fn top_level_entries() -> BTreeSet<String> {
    let src = root().join("src");
    let entries = std::fs::read_dir(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_string_lossy().into_owned();
            if path.is_dir() {
                Some(format!("{name}/"))
            } else {
                name.ends_with(".rs").then_some(name)
            }
        })
        .collect()
}

/// ARCHITECTURE.md is a map a newcomer reads in one sitting: at most 300
/// lines (bounds, decisions and detail live in `docs/design-notes.md`), with
/// a `` - `agent/` `` or `` - `lib.rs` `` entry in its code map for every
/// folder and file directly under `src/`, and none for what is gone.
#[test]
fn the_map_names_every_top_level_folder_in_at_most_300_lines() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let lines = architecture.lines().count();
    assert!(
        lines <= 300,
        "ARCHITECTURE.md has {lines} lines, more than 300: move detail to docs/design-notes.md"
    );
    let on_disk = top_level_entries();
    assert!(on_disk.contains("agent/") && on_disk.contains("lib.rs"));
    let mapped = map_entries(&architecture);
    let missing: Vec<String> = on_disk.difference(&mapped).cloned().collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map has no entry (a line \"- `NAME`: ...\") for:\n{}",
        missing.join("\n")
    );
    let gone: Vec<String> = mapped.difference(&on_disk).cloned().collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md's code map names what src/ does not hold:\n{}",
        gone.join("\n")
    );
}

/// The code map's reader takes the entries of that section only.
#[test]
fn the_map_reader_takes_the_code_map_entries_only() {
    let text = [
        "# A",
        "",
        "- `before/`: no",
        "",
        "## Code map",
        "",
        "- `agent/`: the agent,",
        "  `not/` an entry",
        "- `lib.rs`: the library",
        "",
        "## Layers",
        "",
        "- `after/`: no",
    ]
    .join("\n");
    let entries: Vec<String> = map_entries(&text).into_iter().collect();
    assert_eq!(entries, ["agent/", "lib.rs"]);
}

#[test]
fn every_library_module_has_a_rule_and_the_rules_have_no_cycle() {
    let rules = project_rules();
    let modules = library_modules(&read(&root().join("src/lib.rs")));
    let ruled: BTreeSet<String> = rules.imports.keys().cloned().collect();
    assert_eq!(modules, ruled, "src/lib.rs's modules and the rules differ");
    for (module, allowed) in &rules.imports {
        for dep in allowed.iter().flatten() {
            assert!(
                ruled.contains(dep),
                "{module} may import {dep}, which is no module"
            );
        }
    }
    // Depth-first search over the explicit rules (`*` is the wiring at the top).
    fn visit(m: &str, rules: &Rules, stack: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if done.contains(m) {
            return;
        }
        assert!(
            !stack.iter().any(|s| s == m),
            "the layer rules have a cycle: {} -> {m}",
            stack.join(" -> ")
        );
        stack.push(m.to_string());
        if let Some(Some(allowed)) = rules.imports.get(m) {
            for dep in allowed {
                visit(dep, rules, stack, done);
            }
        }
        stack.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in rules.imports.keys() {
        visit(m, &rules, &mut Vec::new(), &mut done);
    }
    for (module, allowed) in &rules.imports {
        if allowed.is_some() {
            for (other, any) in &rules.imports {
                assert!(
                    any.is_some() || !allowed.as_ref().is_some_and(|a| a.contains(other)),
                    "{module} may import the wiring module {other}"
                );
            }
        }
    }
}

#[test]
fn the_source_keeps_the_layer_rules() {
    let rules = project_rules();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (relative, file) in &source_files() {
        if relative == "src/main.rs" || relative == "src/lib.rs" || relative.starts_with("src/cli/")
        {
            continue;
        }
        checked += 1;
        broken.extend(violations(relative, &read(file), &rules));
    }
    assert!(checked > 100, "only {checked} files found under src/");
    assert!(
        broken.is_empty(),
        "layer rules of ARCHITECTURE.md broken:\n{}",
        broken.join("\n")
    );
}

/// The checker finds each kind of breach (so a green run means something).
#[test]
fn the_checker_sees_each_kind_of_breach() {
    let rules = rules_from(
        "# A\n\n## Layers\n\n```text\nmodel ->\nconfig -> model\nmodbus -> config model\n\
         api -> model\nagent -> *\nserde_json: api\n```\n",
    );
    let clean = "use crate::model::Power;\nuse super::raw::Raw;\n// crate::modbus in a comment\n\
                 /* serde_json */ let s = \"crate::modbus in a string is still read\";\n";
    assert_eq!(
        violations("src/config/load.rs", clean, &rules),
        ["src/config/load.rs:4: config imports modbus (allowed: model)"]
    );
    let plain = "use crate::modbus::profile::Profile;\n";
    assert_eq!(violations("src/config/mod.rs", plain, &rules).len(), 1);
    let grouped = "use crate::{\n    model::Power,\n};\nuse crate::{model, modbus::{io, plan}};\n";
    assert_eq!(
        violations("src/config/raw.rs", grouped, &rules),
        ["src/config/raw.rs:4: config imports modbus (allowed: model)"]
    );
    let climbing = "use super::super::super::modbus::Bus;\nuse super::super::load::Problem;\n";
    assert_eq!(
        violations("src/config/tls/x.rs", climbing, &rules),
        ["src/config/tls/x.rs:1: config imports modbus (allowed: model)"]
    );
    let inline = "fn f() -> crate::modbus::Op { todo!() }\n";
    assert_eq!(violations("src/model/a.rs", inline, &rules).len(), 1);
    let json = "let v: serde_json::Value = todo!();\n";
    assert_eq!(
        violations("src/modbus/bus.rs", json, &rules),
        ["src/modbus/bus.rs:1: serde_json outside src/api"]
    );
    assert!(violations("src/api/x.rs", json, &rules).is_empty());
    assert!(violations("src/api.rs", json, &rules).is_empty());
    assert_eq!(
        violations("src/apis/x.rs", json, &rules).len(),
        1,
        "no rule, no JSON"
    );
    assert!(violations("src/agent/mod.rs", plain, &rules).is_empty());
    assert_eq!(
        violations("src/newlayer/mod.rs", "", &rules),
        ["src/newlayer/mod.rs: module newlayer has no rule in ARCHITECTURE.md"]
    );
}

/// One clock: the std clocks are read in `src/model/time.rs` alone (wall
/// time); monotonic time is tokio's `Instant`, which a paused test clock
/// moves. `clippy.toml` says the same to clippy.
#[test]
fn the_std_clocks_are_read_in_one_place() {
    let files = source_files();
    let mut readers = Vec::new();
    for (relative, file) in &files {
        let code = strip_comments(&read(file));
        let std_instant = code.contains("std::time::Instant")
            || code
                .lines()
                .any(|l| l.trim_start().starts_with("use std::time::{") && l.contains("Instant"));
        let system_now = code.contains("SystemTime::now");
        if (std_instant || system_now) && relative != "src/model/time.rs" {
            readers.push(relative.clone());
        }
    }
    assert!(
        files.len() > 100,
        "only {} files found under src/",
        files.len()
    );
    assert!(
        readers.is_empty(),
        "a std clock read outside src/model/time.rs:\n{}",
        readers.join("\n")
    );
}

/// Where the simulator may be named outside `src/sim/`: the demo. The
/// benches and `tests/` are outside `src/`.
const SIM_USERS: [&str; 1] = ["src/cli/demo.rs"];

/// The lines of a file (outside `src/sim/`) that name the simulator: a
/// `crate::sim` path (plain, grouped or climbing out with `super::`) or,
/// in the binary's files, `sitegate::sim`.
fn sim_imports(relative: &str, text: &str) -> Vec<usize> {
    let code = strip_comments(text);
    let mut lines: Vec<usize> = named_modules(&code, &module_path(relative))
        .into_iter()
        .filter(|(_, named)| named == "sim")
        .map(|(line, _)| line)
        .collect();
    for (n, line) in code.lines().enumerate() {
        if line.contains("sitegate::sim") || line.contains("sitegate::{sim") {
            lines.push(n + 1);
        }
    }
    lines.sort();
    lines.dedup();
    lines
}

/// The production code does not depend on the simulator: nothing in `src/`
/// but `src/sim/` itself, `lib.rs` (which declares it) and the demo names
/// `sim`. What the Modbus server and the simulator share (the SunSpec
/// image) lives in `modbus::sunspec::layout`.
#[test]
fn nothing_in_src_but_the_demo_imports_the_simulator() {
    let mut found = Vec::new();
    for (relative, file) in &source_files() {
        if relative.starts_with("src/sim/") || relative == "src/lib.rs" {
            continue;
        }
        let lines = sim_imports(relative, &read(file));
        if !SIM_USERS.contains(&relative.as_str()) {
            found.extend(lines.iter().map(|l| format!("{relative}:{l}")));
        }
    }
    assert!(
        found.is_empty(),
        "the simulator named outside the demo ({}):\n{}",
        SIM_USERS.join(", "),
        found.join("\n")
    );
    let demo = read(&root().join(SIM_USERS[0]));
    assert!(
        !sim_imports(SIM_USERS[0], &demo).is_empty(),
        "the demo names sim: the check reads it"
    );
}

/// The simulator check sees each way of naming `sim`.
#[test]
fn the_simulator_check_sees_each_way_of_naming_it() {
    for way in [
        "use crate::sim::layouts::Block;\n",
        "use crate::{model, sim::SimSite};\n",
        "use super::super::sim::map;\n",
        "fn f() -> crate::sim::SimSite { todo!() }\n",
        "use sitegate::sim::{SimSite, SimSiteSpec};\n",
    ] {
        assert_eq!(
            sim_imports("src/modbus_server/site_map.rs", way),
            [1],
            "{way:?}"
        );
    }
    let clean = "// crate::sim::x\nuse crate::modbus::sunspec::layout;\nuse super::sim_like;\n";
    assert!(sim_imports("src/modbus_server/site_map.rs", clean).is_empty());
}
