//! The validator's own tests: each keyword accepts what it should and refuses
//! what it should, and what it does not know is an error.

use serde_json::json;

use super::*;

fn check(schema: Value, good: &[Value], bad: &[Value]) {
    let root = json!({"components": {"schemas": {"S": schema, "Name": {"enum": ["a", "b"]}}}});
    let v = Validator::new(&root);
    let s = json!({"$ref": "#/components/schemas/S"});
    assert!(v.unsupported(&s).is_empty(), "{:?}", v.unsupported(&s));
    for g in good {
        assert_eq!(v.errors(&s, g), Vec::<String>::new(), "{g} should pass");
    }
    for b in bad {
        assert!(!v.errors(&s, b).is_empty(), "{b} should fail");
    }
}

#[test]
fn types_integers_and_nulls() {
    check(
        json!({"type": ["integer", "null"]}),
        &[json!(1), json!(-3), json!(2.0), json!(null)],
        &[json!(1.5), json!("1"), json!(true), json!([]), json!({})],
    );
    check(
        json!({"type": "number"}),
        &[json!(1), json!(0.5)],
        &[json!("0.5")],
    );
}

#[test]
fn objects_closed_and_required() {
    check(
        json!({"type": "object", "required": ["a"],
               "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}},
               "additionalProperties": false}),
        &[json!({"a": "x"}), json!({"a": "x", "b": true})],
        &[
            json!({"b": true}),
            json!({"a": 1}),
            json!({"a": "x", "c": 1}),
            json!([]),
        ],
    );
    check(
        json!({"type": "object", "propertyNames": {"$ref": "#/components/schemas/Name"},
               "additionalProperties": {"type": "integer"}}),
        &[json!({}), json!({"a": 1, "b": 2})],
        &[json!({"c": 1}), json!({"a": "1"})],
    );
}

#[test]
fn enums_consts_and_numbers_by_value() {
    check(
        json!({"enum": ["x", 1, null]}),
        &[json!("x"), json!(1.0), json!(null)],
        &[json!("y"), json!(2)],
    );
    check(
        json!({"const": 404}),
        &[json!(404)],
        &[json!(400), json!("404")],
    );
    check(
        json!({"type": "number", "minimum": 0, "maximum": 100}),
        &[json!(0), json!(100), json!(50.5)],
        &[json!(-0.1), json!(100.5)],
    );
    check(json!({"exclusiveMinimum": 0}), &[json!(1)], &[json!(0)]);
}

#[test]
fn combinators() {
    let power = json!({"type": "object", "required": ["value"], "properties": {"value": {}}, "additionalProperties": false});
    let idle = json!({"type": "object", "required": ["mode"], "properties": {"mode": {"const": "idle"}}, "additionalProperties": false});
    check(
        json!({"oneOf": [power, idle]}),
        &[json!({"value": 1}), json!({"mode": "idle"})],
        &[
            json!({"value": 1, "mode": "idle"}),
            json!({"mode": "busy"}),
            json!({}),
        ],
    );
    // Both branches match: oneOf fails, anyOf passes.
    check(
        json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]}),
        &[json!(-1)],
        &[json!(1)],
    );
    check(
        json!({"anyOf": [{"type": "integer"}, {"minimum": 0}]}),
        &[json!(1)],
        &[json!(-0.5)],
    );
    check(
        json!({"allOf": [{"type": "string"}, {"minLength": 2}], "maxLength": 3}),
        &[json!("ab"), json!("abc")],
        &[json!("a"), json!("abcd"), json!(12)],
    );
    check(
        json!({"not": {"type": "null"}}),
        &[json!(0)],
        &[json!(null)],
    );
}

#[test]
fn arrays_and_formats() {
    check(
        json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "format": "date-time"}}),
        &[
            json!(["2024-06-01T00:00:00Z"]),
            json!(["2024-06-01T00:00:00.5+02:00", "2024-06-01t00:00:00z"]),
        ],
        &[
            json!([]),
            json!([
                "2024-06-01T00:00:00Z",
                "2024-06-01T00:00:00Z",
                "2024-06-01T00:00:00Z"
            ]),
            json!(["2024-06-01"]),
            json!(["2024-13-01T00:00:00Z"]),
            json!(["2024-06-01 00:00:00Z"]),
            json!([1]),
        ],
    );
    check(
        json!({"type": "integer", "format": "int64"}),
        &[json!(1_719_489_600_000_i64)],
        &[json!(1e19), json!(1.5)],
    );
}

#[test]
fn unknown_keywords_formats_and_dangling_refs_are_errors() {
    let root = json!({"a": {"pattern": "^x$"}, "b": {"format": "email"}, "c": {"$ref": "#/nowhere"},
                      "d": {"multipleOf": 2}, "e": {"contentMediaType": "application/json"}});
    let v = Validator::new(&root);
    for (name, instance) in [
        ("a", json!("x")),
        ("b", json!("x")),
        ("c", json!(1)),
        ("d", json!(4)),
        ("e", json!("{}")),
    ] {
        let s = json!({"$ref": format!("#/{name}")});
        assert!(!v.unsupported(&s).is_empty(), "{name}");
        assert!(!v.errors(&s, &instance).is_empty(), "{name}");
    }
    // A $ref loop is reported, not followed for ever.
    let root = json!({"l": {"$ref": "#/l"}});
    let v = Validator::new(&root);
    assert!(v.unsupported(&json!({"$ref": "#/l"})).is_empty());
    assert!(!v.errors(&json!({"$ref": "#/l"}), &json!(1)).is_empty());
}

#[test]
fn patterns_of_the_supported_form() {
    check(
        json!({"type": "string", "pattern": "^[A-Za-z0-9._:~-]{1,128}$"}),
        &[json!("op-42"), json!("a:b~c.d_e"), json!("x".repeat(128))],
        &[
            json!(""),
            json!("a/b"),
            json!("a b"),
            json!("x".repeat(129)),
        ],
    );
}

#[test]
fn toml_content() {
    check(
        json!({"type": "string", "contentMediaType": "application/toml"}),
        &[json!(""), json!("a = 1\n[b]\nc = \"d\"\n")],
        &[json!("a"), json!("a = "), json!("[b")],
    );
}

#[test]
fn discriminators_need_distinct_required_consts() {
    let a = json!({"type": "object", "required": ["kind"], "properties": {"kind": {"const": "a"}}});
    let b = json!({"type": "object", "required": ["kind"], "properties": {"kind": {"const": "b"}}});
    let root = json!({"A": a, "B": b, "Loose": {"properties": {"kind": {"const": "a"}}}});
    let v = Validator::new(&root);
    let good = json!({"oneOf": [{"$ref": "#/A"}, {"$ref": "#/B"}],
                      "discriminator": {"propertyName": "kind", "mapping": {"a": "#/A", "b": "#/B"}}});
    assert_eq!(v.unsupported(&good), Vec::<String>::new());
    assert!(v.errors(&good, &json!({"kind": "b"})).is_empty());
    assert!(!v.errors(&good, &json!({"kind": "c"})).is_empty());
    for bad in [
        // Not beside a oneOf.
        json!({"anyOf": [{"$ref": "#/A"}], "discriminator": {"propertyName": "kind"}}),
        // A branch that does not require it, or pins no const.
        json!({"oneOf": [{"$ref": "#/A"}, {"$ref": "#/Loose"}], "discriminator": {"propertyName": "kind"}}),
        json!({"oneOf": [{"$ref": "#/A"}, {"type": "object"}], "discriminator": {"propertyName": "kind"}}),
        // Two branches with one value.
        json!({"oneOf": [{"$ref": "#/A"}, {"$ref": "#/A"}], "discriminator": {"propertyName": "kind"}}),
        // A mapping that names a branch wrong, or misses one.
        json!({"oneOf": [{"$ref": "#/A"}, {"$ref": "#/B"}],
               "discriminator": {"propertyName": "kind", "mapping": {"a": "#/B", "b": "#/A"}}}),
        json!({"oneOf": [{"$ref": "#/A"}, {"$ref": "#/B"}],
               "discriminator": {"propertyName": "kind", "mapping": {"a": "#/A"}}}),
        json!({"oneOf": [{"$ref": "#/A"}], "discriminator": {"propertyName": "kind", "extra": 1}}),
    ] {
        assert!(!v.unsupported(&bad).is_empty(), "{bad}");
    }
}
