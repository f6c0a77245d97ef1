//! A JSON merge patch (RFC 7396) into the config layer's [`Patch`] over the
//! TOML structure: objects merge, `null` removes, anything else replaces.
//! TOML has no null, so a `null` inside an array is refused, naming its path.
//!
//! It must not apply the patch or check the config (the operations layer
//! does, with the config loader's checks).

use serde_json::{Map, Value};

use crate::config::patch::Patch;

/// The entries of a top-level patch object; `Err` names the path (under
/// `args.patch`) and what is wrong.
pub fn entries(patch: &Map<String, Value>) -> Result<Vec<(String, Patch)>, (String, String)> {
    patch
        .iter()
        .map(|(k, v)| Ok((k.clone(), node(v, &format!("args.patch.{k}"))?)))
        .collect()
}

fn node(v: &Value, path: &str) -> Result<Patch, (String, String)> {
    match v {
        Value::Null => Ok(Patch::Remove),
        Value::Object(m) => Ok(Patch::Merge(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), node(v, &format!("{path}.{k}"))?)))
                .collect::<Result<_, (String, String)>>()?,
        )),
        other => value(other, path).map(Patch::Set),
    }
}

fn value(v: &Value, path: &str) -> Result<toml::Value, (String, String)> {
    Ok(match v {
        Value::Null => {
            return Err((
                path.to_string(),
                format!("{path}: null removes a key; inside an array it has no TOML meaning"),
            ))
        }
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => toml::Value::Integer(i),
            (None, Some(f)) => toml::Value::Float(f),
            _ => {
                return Err((
                    path.to_string(),
                    format!("{path}: {n} does not fit a TOML number"),
                ))
            }
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| value(item, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => toml::Value::Table(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), value(v, &format!("{path}.{k}"))?)))
                .collect::<Result<_, (String, String)>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(patch: Value) -> Result<Vec<(String, Patch)>, (String, String)> {
        entries(patch.as_object().expect("object"))
    }

    #[test]
    fn objects_merge_nulls_remove_arrays_replace() {
        let e = check(json!({"sites": null, "ops": {"rollback_after_s": 30}, "devices": [{"unit_id": 2, "rated": 1.5}]}))
            .expect("ok");
        let mut table = toml::Table::new();
        table.insert("sites".into(), toml::Value::Array(vec![]));
        crate::config::patch::apply(&mut table, &e);
        let text = toml::to_string(&table).expect("render");
        assert!(!text.contains("sites"), "{text}");
        assert!(text.contains("rollback_after_s = 30"), "{text}");
        assert!(text.contains("[[devices]]"), "{text}");
        assert!(text.contains("rated = 1.5"), "{text}");
    }

    #[test]
    fn a_null_in_an_array_is_named() {
        let (path, detail) = check(json!({"devices": [{"x": 1}, null]})).expect_err("null");
        assert_eq!(path, "args.patch.devices[1]");
        assert!(detail.contains("no TOML meaning"), "{detail}");
    }
}
