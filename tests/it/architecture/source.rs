//! Source text for the structural checks (circles and sizes): code with its
//! comments and literals blanked, code without its `#[cfg(test)]` modules,
//! which files are test modules, and the module paths a file names.
//!
//! Blanking keeps every byte offset and line number, so what is found in the
//! blanked text is reported at its place in the file. Reads text only; it
//! must not build, start or import anything of the agent.

use std::collections::BTreeSet;

use super::{ident_at, module_path, top_level_items};

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `text` with the insides of comments, strings and char literals replaced
/// by spaces (newlines kept): same length, same lines.
pub fn masked(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    fn blank(out: &mut [u8], from: usize, to: usize) {
        let to = to.min(out.len());
        for c in out.iter_mut().take(to).skip(from) {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let after_ident = i > 0 && is_ident(b[i - 1]);
        if text[i..].starts_with("//") {
            let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if text[i..].starts_with("/*") {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if text[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if text[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if c == b'r'
            && (!after_ident || (b[i - 1] == b'b' && (i < 2 || !is_ident(b[i - 2]))))
            && matches!(b.get(i + 1), Some(b'#' | b'"'))
        {
            let hashes = b[i + 1..].iter().take_while(|&&h| h == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let start = i + 2 + hashes;
            let end_mark = format!("\"{}", "#".repeat(hashes));
            let end = text[start..].find(&end_mark).map_or(b.len(), |n| start + n);
            blank(&mut out, start, end);
            i = end + end_mark.len();
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{7b}'), else a lifetime.
            let end = if b.get(i + 1) == Some(&b'\\') {
                text.get(i + 3..)
                    .and_then(|t| t.find('\''))
                    .map(|n| i + 3 + n)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 1 + ch)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    // Only ASCII bytes were written, over whole characters' bytes.
    String::from_utf8(out).expect("blanking keeps UTF-8")
}

/// The byte offset of the `}` that closes the `{` at `open`, in masked code.
pub fn closing_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// After a `#[cfg(test)]` at `from`: the other attributes and `pub(...)`
/// skipped, the name of the `mod` item it marks and the offset just past the
/// name, if it marks one.
fn test_module_at(code: &str, from: usize) -> Option<(String, usize)> {
    let mut rest = &code[from + "#[cfg(test)]".len()..];
    loop {
        rest = rest.trim_start();
        if rest.starts_with("#[") {
            rest = &rest[rest.find(']')? + 1..];
        } else if let Some(r) = rest.strip_prefix("pub") {
            rest = r.trim_start();
            if rest.starts_with('(') {
                rest = &rest[rest.find(')')? + 1..];
            }
        } else {
            break;
        }
    }
    let name = ident_at(rest.strip_prefix("mod ")?.trim_start());
    (!name.is_empty()).then(|| {
        let at = code.len() - rest.len();
        let past = at + code[at..].find(name).unwrap_or(0) + name.len();
        (name.to_string(), past)
    })
}

/// Masked code with each inline `#[cfg(test)] mod name { ... }` blanked.
pub fn without_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]").map(|n| from + n) {
        from = at + 1;
        let Some((_, past)) = test_module_at(code, at) else {
            continue;
        };
        let next = code[past..].find(['{', ';']).map(|n| past + n);
        if let Some(open) = next.filter(|&o| code.as_bytes()[o] == b'{') {
            let close = closing_brace(code, open).unwrap_or(code.len() - 1);
            let blanked: String = code[at..=close]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' })
                .collect();
            out.replace_range(at..=close, &blanked);
            from = close;
        }
    }
    out
}

/// The module paths of the files that are test modules: each `#[cfg(test)]
/// mod name;` declared in a file of `files` (relative path, masked code).
/// A file is test code when its module path starts with one of them.
pub fn test_module_paths(files: &[(String, String)]) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for (relative, code) in files {
        let mut from = 0;
        while let Some(at) = code[from..].find("#[cfg(test)]").map(|n| from + n) {
            from = at + 1;
            if let Some((name, past)) = test_module_at(code, at) {
                if code[past..].trim_start().starts_with(';') {
                    let mut path = module_path(relative);
                    path.push(name);
                    out.insert(path);
                }
            }
        }
    }
    out
}

/// Whether the file at `relative` is (under) a test module.
pub fn is_test_file(relative: &str, test_modules: &BTreeSet<Vec<String>>) -> bool {
    let path = module_path(relative);
    test_modules.iter().any(|t| path.starts_with(t))
}

/// The paths after `prefix` (the text just past a `crate::`, `super::` or
/// `self::`), with `{...}` groups expanded, each appended to `base`.
fn expand(rest: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = base;
    let mut rest = rest.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                expand(item, path.clone(), out);
            }
            return;
        }
        let id = ident_at(rest);
        if id.is_empty() {
            break;
        }
        if id != "self" {
            path.push(id.to_string());
        }
        rest = &rest[id.len()..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    out.push(path);
}

/// Every crate path masked `code` names, made absolute (`["modbus",
/// "device", "DeviceMap"]`), with its line: `crate::...`, `super::...`
/// chains and `self::...`, grouped or not, over several lines or not.
/// `module` is the file's module path, the base of `super::` and `self::`.
pub fn named_paths(code: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = |p: &str| code[i..].starts_with(p);
        if i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':') {
            i += 1;
            continue;
        }
        let (base, skip) = if starts("crate::") {
            (Vec::new(), "crate::".len())
        } else if starts("self::") {
            (module.to_vec(), "self::".len())
        } else if starts("super::") {
            let mut ups = 0;
            let mut j = i;
            while code[j..].starts_with("super::") {
                ups += 1;
                j += "super::".len();
            }
            (module[..module.len().saturating_sub(ups)].to_vec(), j - i)
        } else {
            i += 1;
            continue;
        };
        let line = code[..i].matches('\n').count() + 1;
        let mut paths = Vec::new();
        expand(&code[i + skip..], base, &mut paths);
        found.extend(paths.into_iter().map(|p| (line, p)));
        i += skip;
    }
    found
}
