//! Sizes: no file under `src/` over 600 lines, and no production function
//! over 100 lines (from its `fn` to its closing brace; test modules, test
//! files and `tests/` are not production) but those still listed in
//! `LONG_FNS_ALLOWED`.
//!
//! Reads files only; it must not build, start or import anything of the agent.

use std::collections::BTreeSet;

use super::source::{closing_brace, is_test_file, masked, test_module_paths, without_test_modules};
use super::{ident_at, read, source_files};

/// The most lines a file under `src/` may have.
const FILE_MAX: usize = 600;

/// The most lines a production function may have.
const FN_MAX: usize = 100;

/// Functions over [`FN_MAX`] lines not yet split, as `path::name` (issue
/// 47, "Sizes"). Each leaves this list when it is split; a name here that
/// is no longer too long fails the test, so the list only shrinks.
const LONG_FNS_ALLOWED: &[&str] = &[];

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every function with a body in masked `code`: its name, the line of its
/// `fn` and its length in lines (the `fn` line to the closing brace).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ").map(|n| from + n) {
        from = at + 3;
        if at > 0 && is_ident(b[at - 1]) {
            continue;
        }
        let name = ident_at(code[at + 3..].trim_start());
        if name.is_empty() {
            continue;
        }
        // The body's `{`: the first at depth 0 of `(`/`[`, unless a `;`
        // comes first (a declaration without a body).
        let mut depth = 0i32;
        let mut open = None;
        for (i, c) in code[at..].char_indices() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    open = Some(at + i);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let Some(close) = closing_brace(code, open) else {
            continue;
        };
        let line = code[..at].matches('\n').count() + 1;
        let lines = code[at..=close].matches('\n').count() + 1;
        out.push((name.to_string(), line, lines));
    }
    out
}

/// The production functions of `files` (relative path, text) over
/// [`FN_MAX`] lines, as (`path::name`, `path:line: name, N lines`).
fn long_functions(files: &[(String, String)]) -> Vec<(String, String)> {
    let code: Vec<(String, String)> = files
        .iter()
        .map(|(relative, text)| (relative.clone(), masked(text)))
        .collect();
    let tests = test_module_paths(&code);
    let mut out = Vec::new();
    for (relative, code) in &code {
        if is_test_file(relative, &tests) {
            continue;
        }
        for (name, line, lines) in functions(&without_test_modules(code)) {
            if lines > FN_MAX {
                out.push((
                    format!("{relative}::{name}"),
                    format!("{relative}:{line}: {name}, {lines} lines"),
                ));
            }
        }
    }
    out
}

fn project_files() -> Vec<(String, String)> {
    let files: Vec<(String, String)> = source_files()
        .into_iter()
        .map(|(relative, path)| (relative, read(&path)))
        .collect();
    assert!(
        files.len() > 100,
        "only {} files found under src/",
        files.len()
    );
    files
}

#[test]
fn no_file_under_src_is_over_600_lines() {
    let long: Vec<String> = project_files()
        .iter()
        .map(|(relative, text)| (relative, text.lines().count()))
        .filter(|(_, lines)| *lines > FILE_MAX)
        .map(|(relative, lines)| format!("{relative}: {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {FILE_MAX} lines (split each along its seams, one job per file):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_production_function_is_over_100_lines() {
    let long = long_functions(&project_files());
    let allowed: BTreeSet<&str> = LONG_FNS_ALLOWED.iter().copied().collect();
    let found: BTreeSet<&str> = long.iter().map(|(key, _)| key.as_str()).collect();
    let over: Vec<&str> = long
        .iter()
        .filter(|(key, _)| !allowed.contains(key.as_str()))
        .map(|(_, report)| report.as_str())
        .collect();
    assert!(
        over.is_empty(),
        "production functions over {FN_MAX} lines:\n{}",
        over.join("\n")
    );
    let mended: Vec<&&str> = allowed.iter().filter(|a| !found.contains(**a)).collect();
    assert!(
        mended.is_empty(),
        "no longer over {FN_MAX} lines: take them off LONG_FNS_ALLOWED: {mended:?}"
    );
}

/// The measure counts from `fn` to the closing brace, takes no declaration
/// without a body, no test module, no test file, and no brace in a string,
/// a char or a comment.
#[test]
fn the_function_measure_counts_from_fn_to_its_brace() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let src = format!(
        "trait T {{\n    fn declared(&self) -> [u8; 4];\n}}\n\
         pub fn long() -> [u8; 4] {{\n{}    let s = \"}}\"; let c = '}}'; // }}\n    [0; 4]\n}}\n\
         fn short() {{\n{}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn in_test() {{\n{}    }}\n}}\n",
        body(97),
        body(98),
        body(200)
    );
    let files = [
        ("src/a/mod.rs".to_string(), src),
        (
            "src/a/b.rs".to_string(),
            "#[cfg(test)]\nmod tests;\n".to_string(),
        ),
        (
            "src/a/b/tests.rs".to_string(),
            format!("fn in_test_file() {{\n{}}}\n", body(200)),
        ),
    ];
    let long = long_functions(&files);
    assert_eq!(
        long,
        [(
            "src/a/mod.rs::long".to_string(),
            "src/a/mod.rs:4: long, 101 lines".to_string()
        )]
    );
    let f = functions(&masked("fn short() {\n}\n"));
    assert_eq!(f, [("short".to_string(), 1, 2)]);
}
