//! A JSON Schema (2020-12) validator for the subset that `src/api/openapi.json`
//! uses, with references resolved inside that one document.
//!
//! A keyword outside the subset is an error, never silently ignored, so the
//! document cannot lean on a rule that nothing checks. Annotations (`title`,
//! `description`, `example`, `examples`, `default`, `deprecated`) are allowed and
//! not checked here. `pattern` is read in its one supported form
//! ([`Pattern`]); `contentMediaType` only as `application/toml` (the string
//! must parse as TOML); OpenAPI's `discriminator` is an annotation, checked
//! only in the document: it sits beside a `oneOf` each of whose branches
//! requires the named property as a distinct `const` (and its `mapping`, when
//! given, names each branch by that `const`). The `jsonschema` crate was measured as the alternative: 24
//! crates and about 150 s of compilation (89 s for itself) on the 2-core
//! machine, for a subset this file covers in a few hundred lines.

use serde_json::{Map, Value};

mod discriminator;
mod pattern;

pub use pattern::Pattern;

/// Keywords that constrain an instance.
const CHECKED: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "properties",
    "additionalProperties",
    "propertyNames",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "format",
    "pattern",
    "contentMediaType",
];

/// Keywords that only describe.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "example",
    "examples",
    "default",
    "deprecated",
];

/// Formats checked (`date-time`: RFC 3339; `int64`: an integer within i64).
const FORMATS: &[&str] = &["date-time", "int64"];

/// Content media types checked (`application/toml`: the string parses as a
/// TOML document).
const MEDIA_TYPES: &[&str] = &["application/toml"];

/// `$ref` chains deeper than this are taken for a loop.
const MAX_DEPTH: usize = 64;

/// Validates instances against schemas found in `root` (the whole document),
/// whose `$ref`s are local JSON pointers (`#/components/schemas/Device`).
pub struct Validator<'a> {
    root: &'a Value,
}

impl<'a> Validator<'a> {
    pub fn new(root: &'a Value) -> Self {
        Self { root }
    }

    /// The schema at a `$ref` target such as `#/components/schemas/Device`.
    pub fn resolve(&self, reference: &str) -> Result<&'a Value, String> {
        let pointer = reference
            .strip_prefix('#')
            .ok_or_else(|| format!("{reference:?} is not a reference into this document"))?;
        self.root
            .pointer(pointer)
            .ok_or_else(|| format!("{reference:?} points at nothing"))
    }

    /// Every way `instance` breaks `schema`, each as "at <instance path>: ...";
    /// empty when it is valid. Schema errors (an unknown keyword, a dangling
    /// `$ref`) are reported the same way, so they fail a test too.
    pub fn errors(&self, schema: &Value, instance: &Value) -> Vec<String> {
        let mut out = Vec::new();
        self.check(schema, instance, "", 0, &mut out);
        out
    }

    /// Keywords of `schema` and of every schema inside it (through `$ref`s too)
    /// that this validator does not know.
    pub fn unsupported(&self, schema: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen = Vec::new();
        self.lint(schema, "", &mut seen, &mut out);
        out
    }

    fn lint(&self, schema: &Value, at: &str, seen: &mut Vec<String>, out: &mut Vec<String>) {
        let Some(obj) = schema.as_object() else {
            if !schema.is_boolean() {
                out.push(format!("{at}: a schema must be an object or a boolean"));
            }
            return;
        };
        for (key, value) in obj {
            let here = format!("{at}/{key}");
            match key.as_str() {
                "$ref" => match value.as_str() {
                    Some(r) if seen.iter().any(|s| s == r) => {}
                    Some(r) => {
                        seen.push(r.to_string());
                        match self.resolve(r) {
                            Ok(target) => self.lint(target, r, seen, out),
                            Err(e) => out.push(format!("{here}: {e}")),
                        }
                    }
                    None => out.push(format!("{here}: must be a string")),
                },
                "allOf" | "anyOf" | "oneOf" => match value.as_array() {
                    Some(list) if !list.is_empty() => {
                        for (i, s) in list.iter().enumerate() {
                            self.lint(s, &format!("{here}/{i}"), seen, out);
                        }
                    }
                    _ => out.push(format!("{here}: must be a non-empty array")),
                },
                "not" | "additionalProperties" | "propertyNames" | "items" => {
                    self.lint(value, &here, seen, out)
                }
                "properties" => match value.as_object() {
                    Some(props) => {
                        for (name, s) in props {
                            self.lint(s, &format!("{here}/{name}"), seen, out);
                        }
                    }
                    None => out.push(format!("{here}: must be an object")),
                },
                "format" => {
                    if !value.as_str().is_some_and(|f| FORMATS.contains(&f)) {
                        out.push(format!("{here}: format {value} is not checked"));
                    }
                }
                "pattern" => match value.as_str().map(Pattern::parse) {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => out.push(format!("{here}: {e}")),
                    None => out.push(format!("{here}: must be a string")),
                },
                "contentMediaType" => {
                    if !value.as_str().is_some_and(|m| MEDIA_TYPES.contains(&m)) {
                        out.push(format!("{here}: content media type {value} is not checked"));
                    }
                }
                "discriminator" => {
                    if let Err(e) = self.discriminator(obj, value) {
                        out.push(format!("{here}: {e}"));
                    }
                }
                k if CHECKED.contains(&k) || ANNOTATIONS.contains(&k) => {}
                k => out.push(format!("{here}: keyword {k:?} is not supported")),
            }
        }
    }

    fn check(
        &self,
        schema: &Value,
        instance: &Value,
        at: &str,
        depth: usize,
        out: &mut Vec<String>,
    ) {
        let place = if at.is_empty() { "/" } else { at };
        let obj = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                out.push(format!("at {place}: nothing is allowed here"));
                return;
            }
            Value::Object(obj) => obj,
            other => {
                out.push(format!("at {place}: the schema {other} is not a schema"));
                return;
            }
        };
        if depth > MAX_DEPTH {
            out.push(format!("at {place}: $ref loop"));
            return;
        }
        for (key, arg) in obj {
            self.keyword(key, arg, obj, instance, at, depth, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn keyword(
        &self,
        key: &str,
        arg: &Value,
        schema: &Map<String, Value>,
        instance: &Value,
        at: &str,
        depth: usize,
        out: &mut Vec<String>,
    ) {
        let place = if at.is_empty() { "/" } else { at };
        let err = |msg: String| format!("at {place}: {msg}");
        match key {
            "$ref" => match arg.as_str().map(|r| (r, self.resolve(r))) {
                Some((_, Ok(target))) => self.check(target, instance, at, depth + 1, out),
                Some((_, Err(e))) => out.push(err(e)),
                None => out.push(err(format!("$ref {arg} is not a string"))),
            },
            "type" => {
                let types: Vec<&str> = match arg {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                if !types.iter().any(|t| has_type(instance, t)) {
                    out.push(err(format!("{instance} is not of type {arg}")));
                }
            }
            "enum" => {
                let options = arg.as_array().map(Vec::as_slice).unwrap_or_default();
                if !options.iter().any(|o| same(o, instance)) {
                    out.push(err(format!("{instance} is not one of {arg}")));
                }
            }
            "const" => {
                if !same(arg, instance) {
                    out.push(err(format!("{instance} is not {arg}")));
                }
            }
            "allOf" => {
                for s in arg.as_array().map(Vec::as_slice).unwrap_or_default() {
                    self.check(s, instance, at, depth + 1, out);
                }
            }
            "anyOf" | "oneOf" => {
                let branches = arg.as_array().map(Vec::as_slice).unwrap_or_default();
                let results: Vec<Vec<String>> = branches
                    .iter()
                    .map(|s| {
                        let mut e = Vec::new();
                        self.check(s, instance, at, depth + 1, &mut e);
                        e
                    })
                    .collect();
                let matched = results.iter().filter(|e| e.is_empty()).count();
                if matched == 0 {
                    let why: Vec<String> = results
                        .iter()
                        .enumerate()
                        .map(|(i, e)| format!("[{i}] {}", e.join("; ")))
                        .collect();
                    out.push(err(format!(
                        "{instance} matches none of {key}: {}",
                        why.join(" | ")
                    )));
                } else if key == "oneOf" && matched > 1 {
                    out.push(err(format!(
                        "{instance} matches {matched} branches of oneOf"
                    )));
                }
            }
            "not" => {
                let mut e = Vec::new();
                self.check(arg, instance, at, depth + 1, &mut e);
                if e.is_empty() {
                    out.push(err(format!("{instance} matches a schema it must not")));
                }
            }
            "required" => {
                if let Some(o) = instance.as_object() {
                    for name in arg.as_array().map(Vec::as_slice).unwrap_or_default() {
                        let name = name.as_str().unwrap_or_default();
                        if !o.contains_key(name) {
                            out.push(err(format!("the member {name:?} is missing")));
                        }
                    }
                }
            }
            "properties" => {
                if let (Some(o), Some(props)) = (instance.as_object(), arg.as_object()) {
                    for (name, s) in props {
                        if let Some(v) = o.get(name) {
                            self.check(s, v, &format!("{at}/{name}"), depth + 1, out);
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(o) = instance.as_object() {
                    let declared = schema.get("properties").and_then(Value::as_object);
                    for (name, v) in o {
                        if !declared.is_some_and(|d| d.contains_key(name)) {
                            let mut e = Vec::new();
                            self.check(arg, v, &format!("{at}/{name}"), depth + 1, &mut e);
                            if !e.is_empty() {
                                out.push(err(format!(
                                    "the member {name:?} is not allowed: {}",
                                    e.join("; ")
                                )));
                            }
                        }
                    }
                }
            }
            "propertyNames" => {
                if let Some(o) = instance.as_object() {
                    for name in o.keys() {
                        let key = Value::String(name.clone());
                        self.check(arg, &key, &format!("{at}/{name}"), depth + 1, out);
                    }
                }
            }
            "items" => {
                if let Some(items) = instance.as_array() {
                    for (i, v) in items.iter().enumerate() {
                        self.check(arg, v, &format!("{at}/{i}"), depth + 1, out);
                    }
                }
            }
            "minItems" | "maxItems" => {
                if let (Some(items), Some(n)) = (instance.as_array(), arg.as_u64()) {
                    let len = items.len() as u64;
                    if (key == "minItems" && len < n) || (key == "maxItems" && len > n) {
                        out.push(err(format!("{len} items break {key} {n}")));
                    }
                }
            }
            "minLength" | "maxLength" => {
                if let (Some(s), Some(n)) = (instance.as_str(), arg.as_u64()) {
                    let len = s.chars().count() as u64;
                    if (key == "minLength" && len < n) || (key == "maxLength" && len > n) {
                        out.push(err(format!(
                            "{instance} ({len} characters) breaks {key} {n}"
                        )));
                    }
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if let (Some(x), Some(bound)) = (instance.as_f64(), arg.as_f64()) {
                    let ok = match key {
                        "minimum" => x >= bound,
                        "maximum" => x <= bound,
                        "exclusiveMinimum" => x > bound,
                        _ => x < bound,
                    };
                    if !ok {
                        out.push(err(format!("{instance} breaks {key} {arg}")));
                    }
                }
            }
            "format" => match (arg.as_str(), instance) {
                (Some("date-time"), Value::String(s)) => {
                    if !is_rfc3339(s) {
                        out.push(err(format!("{instance} is not an RFC 3339 date-time")));
                    }
                }
                (Some("int64"), Value::Number(n)) => {
                    if n.as_i64().is_none() && has_type(instance, "integer") {
                        out.push(err(format!("{instance} does not fit in int64")));
                    }
                }
                (Some(f), _) if FORMATS.contains(&f) => {}
                _ => out.push(err(format!("format {arg} is not checked"))),
            },
            "pattern" => match (arg.as_str().map(Pattern::parse), instance) {
                (Some(Ok(p)), Value::String(s)) => {
                    if !p.matches(s) {
                        out.push(err(format!("{instance} does not match the pattern {arg}")));
                    }
                }
                (Some(Ok(_)), _) => {}
                (Some(Err(e)), _) => out.push(err(e)),
                (None, _) => out.push(err(format!("pattern {arg} is not a string"))),
            },
            "contentMediaType" => match (arg.as_str(), instance) {
                (Some("application/toml"), Value::String(s)) => {
                    if let Err(e) = s.parse::<toml::Table>() {
                        out.push(err(format!("{instance} is not TOML: {}", e.message())));
                    }
                }
                (Some(m), _) if MEDIA_TYPES.contains(&m) => {}
                _ => out.push(err(format!("content media type {arg} is not checked"))),
            },
            // An annotation (OpenAPI); `lint` checks its place in the document.
            "discriminator" => {}
            k if ANNOTATIONS.contains(&k) => {}
            k => out.push(err(format!("keyword {k:?} is not supported"))),
        }
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        // JSON Schema: a number with a zero fractional part (1.0 is an integer).
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => false,
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, with a real date and time.
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let shape = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't')
        && b[13] == b':'
        && b[16] == b':';
    shape && s.parse::<jiff::Timestamp>().is_ok()
}

#[cfg(test)]
mod tests;
