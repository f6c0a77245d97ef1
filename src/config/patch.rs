//! A merge patch (RFC 7396's rules) over a config's TOML structure: objects
//! merge key by key, a removal deletes the key, anything else replaces the
//! value (arrays are replaced whole). The API turns a JSON merge patch into
//! a [`Patch`]; TOML has no null, so removal is a variant of its own, which
//! a TOML merge patch ([`from_toml`]) cannot express.
//!
//! Pure: it must not read or write files, nor check the result (the config
//! loader does, on the patched text).

use std::fmt::Write as _;

/// One node of a merge patch.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// JSON `null`: remove the key.
    Remove,
    /// A value that replaces the target's (arrays, strings, numbers, ...).
    Set(toml::Value),
    /// A JSON object: merged key by key into the target's table.
    Merge(Vec<(String, Patch)>),
}

impl Patch {
    /// Deterministic text of the patch (keys sorted), what a repeated
    /// operation id is compared by (through its hash).
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Patch::Remove => out.push_str("null"),
            Patch::Set(v) => {
                let _ = write!(out, "{v}");
            }
            Patch::Merge(entries) => {
                let mut sorted: Vec<&(String, Patch)> = entries.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(&b.0));
                out.push('{');
                for (i, (k, p)) in sorted.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k:?}=");
                    p.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A TOML merge patch: the entries of a TOML text whose tables (`[ops]`,
/// inline tables) merge key by key and whose other values replace the
/// target's (arrays, `[[devices]]` among them, whole). TOML has no null, so
/// it removes nothing. `Err`: where the text is not TOML (line and column,
/// counted from 1, the line's text) and why.
pub fn from_toml(text: &str) -> Result<Vec<(String, Patch)>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let message = e.message().trim().replace('\n', "; ");
        match e.span() {
            Some(span) => {
                let (line, column, source) = position(text, span.start);
                format!("not valid TOML at line {line}, column {column} ({source:?}): {message}")
            }
            None => format!("not valid TOML: {message}"),
        }
    })?;
    Ok(table_entries(table))
}

fn table_entries(table: toml::Table) -> Vec<(String, Patch)> {
    table
        .into_iter()
        .map(|(k, v)| {
            let node = match v {
                toml::Value::Table(t) => Patch::Merge(table_entries(t)),
                other => Patch::Set(other),
            };
            (k, node)
        })
        .collect()
}

/// Line and column (from 1, the column in characters) of byte `offset` in
/// `text`, and that line's text.
fn position(text: &str, offset: usize) -> (usize, usize, &str) {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = text[..start].matches('\n').count() + 1;
    let column = text[start..offset].chars().count() + 1;
    (line, column, text[start..end].trim_end_matches('\r'))
}

/// Applies a top-level patch (an object) to a config's table.
pub fn apply(target: &mut toml::Table, entries: &[(String, Patch)]) {
    for (key, patch) in entries {
        match patch {
            Patch::Remove => {
                target.remove(key);
            }
            Patch::Set(v) => {
                target.insert(key.clone(), v.clone());
            }
            Patch::Merge(inner) => {
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if !slot.is_table() {
                    *slot = toml::Value::Table(toml::Table::new());
                }
                if let toml::Value::Table(t) = slot {
                    apply(t, inner);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().expect("toml")
    }

    fn check(before: &str, patch: Vec<(String, Patch)>, after: &str) {
        let mut t = table(before);
        apply(&mut t, &patch);
        assert_eq!(t, table(after));
    }

    fn set(v: impl Into<toml::Value>) -> Patch {
        Patch::Set(v.into())
    }

    #[test]
    fn merges_removes_and_replaces_as_rfc_7396_says() {
        check(
            "a = 1\n[b]\nc = 2\nd = 3\n",
            vec![
                ("a".into(), set(5)),
                (
                    "b".into(),
                    Patch::Merge(vec![("c".into(), Patch::Remove), ("e".into(), set("x"))]),
                ),
            ],
            "a = 5\n[b]\nd = 3\ne = \"x\"\n",
        );
        // An object over a scalar replaces it with a table; a removal of a
        // missing key changes nothing; arrays are replaced whole.
        check(
            "a = 1\nl = [1, 2]\n",
            vec![
                ("a".into(), Patch::Merge(vec![("x".into(), set(true))])),
                ("gone".into(), Patch::Remove),
                ("l".into(), set(toml::Value::Array(vec![3.into()]))),
            ],
            "l = [3]\n[a]\nx = true\n",
        );
    }

    #[test]
    fn a_toml_patch_merges_tables_and_replaces_the_rest() {
        let before =
            "a = 1\nl = [1, 2]\n[b]\nc = 2\nd = 3\n[[devices]]\nx = 1\n[[devices]]\nx = 2\n";
        let patch =
            from_toml("a = 5\nl = [3]\nb = { e = \"x\" }\n[f.g]\nh = true\n[[devices]]\nx = 9\n")
                .expect("patch");
        check(
            before,
            patch,
            "a = 5\nl = [3]\n[b]\nc = 2\nd = 3\ne = \"x\"\n[f.g]\nh = true\n[[devices]]\nx = 9\n",
        );
        // A table over a scalar replaces it; an empty patch changes nothing.
        check(
            "a = 1\n",
            from_toml("[a]\nx = 1\n").expect("patch"),
            "[a]\nx = 1\n",
        );
        check("a = 1\n", from_toml("").expect("patch"), "a = 1\n");
    }

    #[test]
    fn a_bad_toml_patch_says_where() {
        let e = from_toml("[ops]\nrollback_after_s = 30\nmax_export = 5 kW\n").expect_err("bad");
        assert!(
            e.starts_with("not valid TOML at line 3, column 14 (\"max_export = 5 kW\"): "),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        let e = from_toml("a = 1\na = 2\n").expect_err("duplicate");
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("duplicate"), "{e}");
    }

    #[test]
    fn canonical_text_does_not_depend_on_key_order() {
        let a = Patch::Merge(vec![("x".into(), set(1)), ("y".into(), Patch::Remove)]);
        let b = Patch::Merge(vec![("y".into(), Patch::Remove), ("x".into(), set(1))]);
        assert_eq!(a.canonical(), b.canonical());
        assert_eq!(a.canonical(), "{\"x\"=1,\"y\"=null}");
        assert_ne!(
            a.canonical(),
            Patch::Merge(vec![("x".into(), set(2))]).canonical()
        );
    }
}
