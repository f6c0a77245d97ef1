//! OpenAPI's `discriminator`, an annotation that this validator checks in the
//! document only: it must describe the `oneOf` beside it truly.

use serde_json::{Map, Value};

use super::Validator;

impl Validator<'_> {
    /// A `discriminator` beside the `oneOf` of `schema`: each branch (one
    /// `$ref` resolved) is an object that requires the property and pins it
    /// with a `const` string, the `const`s are distinct, and a `mapping`
    /// names every branch by its `const` and nothing else.
    pub(super) fn discriminator(
        &self,
        schema: &Map<String, Value>,
        d: &Value,
    ) -> Result<(), String> {
        let name = d["propertyName"]
            .as_str()
            .ok_or("propertyName must be a string")?;
        let branches = schema
            .get("oneOf")
            .and_then(Value::as_array)
            .ok_or("a discriminator must sit beside a oneOf")?;
        let mut seen: Vec<(String, Option<&str>)> = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let reference = b.get("$ref").and_then(Value::as_str);
            let target = match reference {
                Some(r) => self.resolve(r)?,
                None => b,
            };
            let tag = target["properties"][name]["const"]
                .as_str()
                .ok_or_else(|| format!("branch {i}: {name} is not a const string"))?;
            let required = target["required"].as_array().map(Vec::as_slice);
            if !required.unwrap_or_default().iter().any(|r| r == name) {
                return Err(format!("branch {i} ({tag}): {name} is not required"));
            }
            if seen.iter().any(|(t, _)| t == tag) {
                return Err(format!("branch {i}: {name} {tag:?} is not distinct"));
            }
            seen.push((tag.to_string(), reference));
        }
        let keys: Vec<&str> = ["propertyName", "mapping"]
            .into_iter()
            .filter(|k| d.get(k).is_some())
            .collect();
        if d.as_object().map_or(0, Map::len) != keys.len() {
            return Err("only propertyName and mapping are read".into());
        }
        if let Some(mapping) = d.get("mapping") {
            let mapping = mapping.as_object().ok_or("mapping must be an object")?;
            if mapping.len() != seen.len() {
                return Err(format!(
                    "mapping names {} values for {} branches",
                    mapping.len(),
                    seen.len()
                ));
            }
            for (tag, reference) in &seen {
                if mapping.get(tag).and_then(Value::as_str) != *reference {
                    return Err(format!("mapping of {tag:?} is not its branch's $ref"));
                }
            }
        }
        Ok(())
    }
}
