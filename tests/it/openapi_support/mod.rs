//! Reading the OpenAPI document in tests: its operations, their responses, and
//! checking a real answer (status, content type, headers, body) against them.
#![allow(dead_code)]

pub mod answers;
pub mod client;
pub mod generate;
pub mod schema;

use serde_json::Value;
use sitegate::api::OPENAPI_DOCUMENT;

pub use schema::Validator;

/// The methods an OpenAPI path item may hold, lower-case as in the document.
pub const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The document the agent serves, parsed.
pub fn document() -> Value {
    serde_json::from_str(OPENAPI_DOCUMENT).expect("openapi.json is JSON")
}

/// One operation: upper-case method, path template, the operation object.
pub struct Operation<'a> {
    pub method: String,
    pub path: &'a str,
    pub op: &'a Value,
}

pub fn operations(doc: &Value) -> Vec<Operation<'_>> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            if METHODS.contains(&method.as_str()) {
                out.push(Operation {
                    method: method.to_uppercase(),
                    path,
                    op,
                });
            }
        }
    }
    out
}

/// `v`, or what its `$ref` points at (one level, as responses and parameters use).
pub fn deref<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => Validator::new(doc)
            .resolve(r)
            .unwrap_or_else(|e| panic!("{e}")),
        None => v,
    }
}

/// The operation for `method` (upper-case) and a path template.
pub fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> Option<&'a Value> {
    doc["paths"].get(path)?.get(method.to_lowercase())
}

/// The documented template a concrete path falls under: literal segments must
/// match, `{name}` takes any one segment; with several, the most literal wins
/// (as the router chooses).
pub fn template_of<'a>(doc: &'a Value, path: &str) -> Option<&'a str> {
    let segments: Vec<&str> = path.split('/').collect();
    doc["paths"]
        .as_object()?
        .keys()
        .filter_map(|t| {
            let parts: Vec<&str> = t.split('/').collect();
            if parts.len() != segments.len() {
                return None;
            }
            let mut literal = 0;
            for (p, s) in parts.iter().zip(&segments) {
                if p.starts_with('{') && p.ends_with('}') {
                    if s.is_empty() {
                        return None;
                    }
                } else if p == s {
                    literal += 1;
                } else {
                    return None;
                }
            }
            Some((literal, t.as_str()))
        })
        .max_by_key(|(literal, _)| *literal)
        .map(|(_, t)| t)
}

/// A real answer, as the client saw it.
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

/// Checks `answer` to `method path_template` against the document: the status
/// is documented for the operation, the content type is one the response lists
/// (none when it lists none), every header it marks required is there, and a
/// JSON body validates against the schema of its media type.
pub fn check_answer(
    doc: &Value,
    method: &str,
    template: &str,
    answer: &Answer,
) -> Result<(), String> {
    let what = format!("{method} {template} answered {}", answer.status);
    let op = operation(doc, method, template)
        .ok_or_else(|| format!("{what}: the operation is not documented"))?;
    let response = op["responses"]
        .get(answer.status.to_string())
        .map(|r| deref(doc, r))
        .ok_or_else(|| {
            format!(
                "{what}: the status is not documented; body: {}",
                answer.body
            )
        })?;
    if let Some(headers) = response.get("headers").and_then(Value::as_object) {
        for (name, h) in headers {
            let h = deref(doc, h);
            if h["required"] == true && !answer.headers.contains_key(name.as_str()) {
                return Err(format!("{what}: the required header {name} is missing"));
            }
        }
    }
    let Some(content) = response.get("content").and_then(Value::as_object) else {
        return if answer.body.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{what}: a body where none is documented: {}",
                answer.body
            ))
        };
    };
    let sent = answer.content_type.as_deref().unwrap_or("");
    let media = content
        .iter()
        .find(|(k, _)| same_media_type(k, sent))
        .map(|(_, m)| m)
        .ok_or_else(|| {
            let listed: Vec<&String> = content.keys().collect();
            format!("{what}: content type {sent:?} is not one of {listed:?}")
        })?;
    let schema = &media["schema"];
    let instance = if is_json(sent) {
        serde_json::from_str(&answer.body)
            .map_err(|e| format!("{what}: the body is not JSON ({e}): {}", answer.body))?
    } else {
        Value::String(answer.body.clone())
    };
    let errors = Validator::new(doc).errors(schema, &instance);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what}: the body breaks its schema:\n  {}\nbody: {}",
            errors.join("\n  "),
            answer.body
        ))
    }
}

/// Media types equal, ignoring case and spaces; parameters count only where the
/// document names them (`text/plain; version=0.0.4`).
fn same_media_type(documented: &str, sent: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(' ', "");
    let (d, s) = (norm(documented), norm(sent));
    if d.contains(';') {
        s == d || s.starts_with(&format!("{d};"))
    } else {
        s.split(';').next() == Some(d.as_str())
    }
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence == "application/json" || essence.ends_with("+json")
}

/// Every `(JSON pointer, reference)` of a `$ref` anywhere in `v`.
pub fn refs(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push((here, r.clone())),
                    _ => refs(x, &here, out),
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                refs(x, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Calls `f` with every object of the document that holds a `schema` (media
/// types, parameters, headers), and where it is.
pub fn each_with_schema<'a>(v: &'a Value, f: &mut dyn FnMut(&str, &'a Value)) {
    fn walk<'a>(v: &'a Value, at: &str, f: &mut dyn FnMut(&str, &'a Value)) {
        match v {
            Value::Object(o) => {
                if o.contains_key("schema") {
                    f(at, v);
                }
                for (k, x) in o {
                    let k = k.replace('~', "~0").replace('/', "~1");
                    walk(x, &format!("{at}/{k}"), f);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), f);
                }
            }
            _ => {}
        }
    }
    walk(v, "#", f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_match_by_essence_and_named_parameters() {
        assert!(same_media_type("application/json", "application/json"));
        assert!(same_media_type(
            "application/json",
            "application/json; charset=utf-8"
        ));
        assert!(!same_media_type(
            "application/json",
            "application/problem+json"
        ));
        assert!(same_media_type(
            "text/plain; version=0.0.4",
            "text/plain; version=0.0.4; charset=utf-8"
        ));
        assert!(!same_media_type("text/plain; version=0.0.4", "text/plain"));
    }

    #[test]
    fn concrete_paths_find_their_template() {
        let doc = serde_json::json!({"paths": {"/a/{x}": {}, "/a/b": {}, "/a/{x}/c": {}}});
        assert_eq!(template_of(&doc, "/a/b"), Some("/a/b"));
        assert_eq!(template_of(&doc, "/a/z"), Some("/a/{x}"));
        assert_eq!(template_of(&doc, "/a/z/c"), Some("/a/{x}/c"));
        assert_eq!(template_of(&doc, "/a/z/d"), None);
        assert_eq!(template_of(&doc, "/a/"), None);
    }
}
