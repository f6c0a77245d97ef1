//! The limits the code sets on request values (`sitegate::api::bounds`) are
//! the ones `openapi.json` states, and every kind of operation has its
//! branch in the operation request.

use serde_json::json;

use crate::openapi_support::{document, Validator};

/// The bounds the code sets on request values are the ones the document
/// states (`api::bounds`), and every kind of operation has its branch.
#[test]
fn the_documented_maxima_are_the_codes() {
    use sitegate::api::bounds::{BUNDLE_CHUNK_MAX, POWER_VALUE_MAX, RESOLUTION_VALUE_MAX};
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let params = &doc["components"]["parameters"];
    assert_eq!(
        params["BundleChunk"]["schema"]["maximum"],
        json!(BUNDLE_CHUNK_MAX)
    );
    assert_eq!(
        schemas["TimeSeriesRequest"]["properties"]["resolution"]["properties"]["value"]["maximum"],
        json!(RESOLUTION_VALUE_MAX)
    );
    let power = POWER_VALUE_MAX as u64;
    for (schema, value) in [
        ("PowerValue", &schemas["PowerValue"]["properties"]["value"]),
        (
            "PowerUntilSoc",
            &schemas["PowerUntilSoc"]["properties"]["value"],
        ),
        ("LimitValue", &schemas["LimitValue"]["properties"]["value"]),
        (
            "CurtailmentValue",
            &schemas["CurtailmentValue"]["oneOf"][0]["properties"]["value"],
        ),
    ] {
        assert_eq!(value["maximum"], json!(power), "{schema}");
        let least = value["minimum"].as_i64();
        assert!(
            least == Some(0) || least == Some(-(power as i64)),
            "{schema}"
        );
    }
    assert_eq!(
        params["OperationId"]["schema"],
        json!({"$ref": "#/components/schemas/OperationId"})
    );
    let v = Validator::new(&doc);
    let request = json!({"$ref": "#/components/schemas/OperationRequest"});
    for kind in sitegate::ops::OpKind::ALL {
        let mut body = json!({"id": "k", "kind": kind.as_str()});
        match kind.as_str() {
            "scan" => body["args"] = json!({"bus": "pv"}),
            "config.put" => body["args"] = json!({"patchToml": "[ops]\nrollback_after_s = 30\n"}),
            _ => {}
        }
        assert_eq!(v.errors(&request, &body), Vec::<String>::new(), "{body}");
    }
}
