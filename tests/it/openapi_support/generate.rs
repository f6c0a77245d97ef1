//! Requests made from the document alone, at random (seeded): what a generic
//! client that reads only `/openapi.json` would send. Each instance is drawn
//! from its schema and kept only when the [`Validator`] finds it valid, so
//! every generated request is one the document allows.
//!
//! Where a schema cannot state a rule that depends on the time of the request,
//! the generator follows what the description says: a property named
//! `valid...` is an epoch-ms time from an hour ago to 32 days ahead, and a
//! `date-time` string lies within the last 40 days or the next hour. Both
//! ranges also reach past what the API takes, so its documented refusals
//! (`expired`, `range_too_long`) are drawn too.
//!
//! Numbers are drawn at their bounds, at zero and between; strings now and
//! then of blanks only; strings of a `pattern` from its class and count (its
//! longest now and then);
//! `application/toml` content as a few TOML lines; objects whose
//! `additionalProperties` is a schema get a few members of their own.

use serde_json::{json, Map, Number, Value};

use super::schema::Pattern;
use super::Validator;

/// Tries per instance before giving up on a schema.
const TRIES: usize = 64;
/// Items per generated array, at most.
const MAX_ITEMS: u64 = 3;

/// A seeded source of instances of the document's schemas.
pub struct Gen<'a> {
    validator: Validator<'a>,
    state: u64,
    now_ms: i64,
}

impl<'a> Gen<'a> {
    pub fn new(root: &'a Value, seed: u64, now_ms: i64) -> Self {
        Self {
            validator: Validator::new(root),
            state: seed,
            now_ms,
        }
    }

    /// splitmix64.
    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 for n = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'v, T>(&mut self, items: &'v [T]) -> Option<&'v T> {
        let i = self.below(items.len() as u64) as usize;
        items.get(i)
    }

    /// An instance valid against `schema`; `None` when none was found in
    /// [`TRIES`] draws (a schema the generator cannot satisfy).
    pub fn instance(&mut self, schema: &Value, name: &str) -> Option<Value> {
        for _ in 0..TRIES {
            let v = self.draw(schema, name, 0);
            if self.validator.errors(schema, &v).is_empty() {
                return Some(v);
            }
        }
        None
    }

    /// `schema`, or what its `$ref` chain points at.
    fn resolve<'s>(&self, schema: &'s Value) -> &'s Value
    where
        'a: 's,
    {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => match self.validator.resolve(r) {
                Ok(target) => self.resolve(target),
                Err(_) => &Value::Null,
            },
            None => schema,
        }
    }

    fn draw(&mut self, schema: &Value, name: &str, depth: usize) -> Value {
        let schema = self.resolve(schema);
        if depth > 16 {
            return Value::Null;
        }
        if let Some(c) = schema.get("const") {
            return c.clone();
        }
        if let Some(Value::Array(options)) = schema.get("enum") {
            return self.pick(options).cloned().unwrap_or(Value::Null);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = schema.get(key) {
                // anyOf of bare `required` lists (at least one of): an object
                // with the named properties forced.
                if schema.get("properties").is_some() {
                    let forced: Vec<String> = self
                        .pick(branches)
                        .and_then(|b| b.get("required"))
                        .and_then(Value::as_array)
                        .map(|r| {
                            r.iter()
                                .filter_map(|x| x.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default();
                    return self.object(schema, &forced, depth);
                }
                let branch = self.pick(branches).cloned().unwrap_or(Value::Null);
                return self.draw(&branch, name, depth + 1);
            }
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            if let Some(first) = all.first() {
                return self.draw(first, name, depth + 1);
            }
        }
        let ty = match schema.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => self
                .pick(ts)
                .and_then(Value::as_str)
                .unwrap_or("null")
                .to_string(),
            _ if schema.get("properties").is_some() => "object".into(),
            _ => "string".into(),
        };
        match ty.as_str() {
            "object" => self.object(schema, &[], depth),
            "array" => {
                let min = schema["minItems"].as_u64().unwrap_or(0);
                let max = schema["maxItems"]
                    .as_u64()
                    .unwrap_or(MAX_ITEMS)
                    .min(MAX_ITEMS)
                    .max(min);
                let n = min + self.below(max - min + 1);
                let items = schema.get("items").cloned().unwrap_or(json!({}));
                Value::Array((0..n).map(|_| self.draw(&items, name, depth + 1)).collect())
            }
            "integer" => Value::Number(Number::from(self.integer(schema, name))),
            "number" => self.number(schema),
            "boolean" => Value::Bool(self.chance(50)),
            "null" => Value::Null,
            _ => Value::String(self.string(schema)),
        }
    }

    fn object(&mut self, schema: &Value, forced: &[String], depth: usize) -> Value {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (key, sub) in props {
                let wanted = required.contains(&key.as_str())
                    || forced.iter().any(|f| f == key)
                    || self.chance(40);
                if wanted {
                    let v = self.draw(sub, key, depth + 1);
                    out.insert(key.clone(), v);
                }
            }
        }
        // Members beyond the declared ones, where a schema allows them.
        if let Some(extra @ Value::Object(_)) = schema.get("additionalProperties") {
            for _ in 0..self.below(3) {
                let key = match schema.get("propertyNames") {
                    Some(names) => match self.draw(names, "", depth + 1) {
                        Value::String(k) => k,
                        _ => continue,
                    },
                    None => self.string(&json!({"minLength": 1, "maxLength": 8})),
                };
                let v = self.draw(extra, &key, depth + 1);
                out.entry(key).or_insert(v);
            }
        }
        Value::Object(out)
    }

    fn integer(&mut self, schema: &Value, name: &str) -> i64 {
        if name.starts_with("valid") {
            let span = 33 * 86_400_000_i64 + 3_600_000;
            return self.now_ms - 3_600_000 + (self.below(span as u64) as i64);
        }
        let lo = schema["minimum"].as_i64().unwrap_or(-1_000_000);
        let hi = schema["maximum"].as_i64().unwrap_or(1_000_000).max(lo);
        // The bounds and zero now and then: edges are where rules hide.
        match self.below(8) {
            0 | 1 => lo,
            2 | 3 => hi,
            4 if lo <= 0 && 0 <= hi => 0,
            _ => lo + (self.below((hi - lo) as u64 + 1) as i64),
        }
    }

    fn number(&mut self, schema: &Value) -> Value {
        let lo = schema["minimum"].as_f64().unwrap_or(-1_000_000.0);
        let hi = schema["maximum"].as_f64().unwrap_or(1_000_000.0).max(lo);
        let x = match self.below(8) {
            0 | 1 => lo,
            2 | 3 => hi,
            4 if lo <= 0.0 && 0.0 <= hi => 0.0,
            _ => lo + (hi - lo) * (self.below(1_000_001) as f64 / 1_000_000.0),
        };
        // Whole numbers and fractions both.
        let x = if self.chance(50) {
            x.round().clamp(lo, hi)
        } else {
            x
        };
        Number::from_f64(x).map_or(Value::Null, Value::Number)
    }

    fn string(&mut self, schema: &Value) -> String {
        if schema["format"] == "date-time" {
            let span = 40 * 86_400_000_i64 + 3_600_000;
            let at = self.now_ms - 40 * 86_400_000 + (self.below(span as u64) as i64);
            return sitegate::model::time::format_utc(at);
        }
        if schema["contentMediaType"] == "application/toml" {
            return self.toml_text();
        }
        if let Some(Ok(p)) = schema["pattern"].as_str().map(Pattern::parse) {
            return self.matching(&p);
        }
        let min = schema["minLength"].as_u64().unwrap_or(0);
        let max = schema["maxLength"].as_u64().unwrap_or(12).min(24).max(min);
        let n = min + self.below(max - min + 1);
        // Blanks only, now and then: a string the schema allows that holds
        // nothing once trimmed.
        if n > 0 && self.chance(10) {
            return " ".repeat(n as usize);
        }
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789_-";
        (0..n)
            .map(|_| char::from(alphabet[self.below(alphabet.len() as u64) as usize]))
            .collect()
    }

    /// A string of `p`'s class: of its shortest or longest length now and
    /// then, else of a length up to 24.
    fn matching(&mut self, p: &Pattern) -> String {
        let alphabet = p.alphabet();
        let short = p.max.min(24).max(p.min);
        let n = match self.below(4) {
            0 => p.min,
            1 => p.max,
            _ => p.min + self.below((short - p.min) as u64 + 1) as usize,
        };
        (0..n)
            .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
            .collect()
    }

    /// A small TOML document: up to three `key = value` lines, some under a
    /// table of their own, every key distinct.
    fn toml_text(&mut self) -> String {
        let mut out = String::new();
        for i in 0..self.below(4) {
            let key = format!(
                "{}{i}",
                self.string(&json!({"minLength": 1, "maxLength": 6}))
            );
            if self.chance(30) {
                out.push_str(&format!("[t{key}]\n"));
            }
            let value = match self.below(4) {
                0 => self.below(1000).to_string(),
                1 => format!("{:?}", self.string(&json!({"maxLength": 6}))),
                2 => "true".to_string(),
                _ => format!("[{}, {}]", self.below(10), self.below(10)),
            };
            out.push_str(&format!("{key} = {value}\n"));
        }
        out
    }
}
