use serde_json::json;

use super::*;

#[tokio::test]
async fn single_measurement_has_the_contract_shape() {
    let state = state_with("tokens");
    let a = get(&state, "/devices/dvc_bat1/measurement?property=soc").await;
    assert_eq!(
        a.ok(),
        &json!({"timestamp": T0, "property": "soc", "value": 65, "unit": "%", "reference": "dvc_bat1"})
    );
    // Integral values have no fraction; others keep theirs; both are numbers.
    assert!(a.raw.contains("\"value\":65,"), "{}", a.raw);
    let a = get(&state, "/devices/dvc_bat1/measurement?property=activePower").await;
    assert_eq!(a.ok()["value"], json!(-1250.5));
}

#[tokio::test]
async fn an_offline_device_keeps_answering_its_last_value() {
    let state = state_with("tokens");
    let id = state.live.find("dvc_pv1").unwrap();
    state.live.mark_failed(id, "timeout".into());
    let a = get(&state, "/devices/dvc_pv1/measurement?property=activePower").await;
    assert_eq!(a.ok()["value"], 3200);
    assert_eq!(a.body["timestamp"], T0);
}

#[tokio::test]
async fn single_measurement_errors() {
    let state = state_with("tokens");
    let b = get(&state, "/devices/dvc_nope/measurement?property=soc").await;
    assert!(b.problem(404, "device_not_found")["detail"]
        .as_str()
        .unwrap()
        .contains("dvc_nope"));

    let b = get(&state, "/devices/dvc_bat1/measurement").await;
    assert_eq!(b.problem(400, "missing_field")["field"], "property");

    get(&state, "/devices/dvc_bat1/measurement?property=")
        .await
        .problem(400, "invalid_value");

    // Not offered by this device, and not in the vocabulary at all: both list
    // what the device offers.
    for name in ["frequency", "bogus"] {
        let a = get(
            &state,
            &format!("/devices/dvc_bat1/measurement?property={name}"),
        )
        .await;
        let b = a.problem(400, "unknown_property");
        assert_eq!(b["field"], "property");
        let detail = b["detail"].as_str().unwrap();
        assert!(detail.contains(name), "{detail}");
        assert!(
            detail.contains("activePower, soc, stateOfHealth, totalEnergyConsumed"),
            "{detail}"
        );
    }

    // Offered, never sampled.
    let a = get(
        &state,
        "/devices/dvc_bat1/measurement?property=stateOfHealth",
    )
    .await;
    a.problem(404, "no_measurement");

    let a = get(
        &state,
        "/devices/dvc_bat1/measurement?property=soc&unit=%25",
    )
    .await;
    assert_eq!(a.problem(400, "unknown_field")["field"], "unit");
    let a = get(
        &state,
        "/devices/dvc_bat1/measurement?property=soc&property=soc",
    )
    .await;
    assert_eq!(a.problem(400, "invalid_value")["field"], "property");
}

#[tokio::test]
async fn list_is_in_requested_order_without_duplicates_or_missing_samples() {
    let state = state_with("tokens");
    let uri = "/devices/dvc_bat1/measurements?properties=%20soc%20,activePower,soc,stateOfHealth";
    let a = get(&state, uri).await;
    assert_eq!(
        a.ok(),
        &json!({"reference": "dvc_bat1", "measurements": [
            {"timestamp": T0, "property": "soc", "value": 65, "unit": "%"},
            {"timestamp": T0, "property": "activePower", "value": -1250.5, "unit": "W"},
        ]})
    );
}

#[tokio::test]
async fn list_without_properties_gives_every_sampled_offered_one() {
    let state = state_with("tokens");
    let a = get(&state, "/devices/dvc_bat1/measurements").await;
    let props: Vec<&str> = a.ok()["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["property"].as_str().unwrap())
        .collect();
    assert_eq!(props, ["activePower", "soc", "totalEnergyConsumed"]);
    // A device that never answered: an empty list, not an error.
    let a = get(&state, "/devices/dvc_home_grid_meter/measurements").await;
    assert_eq!(a.ok()["measurements"], json!([]));
}

#[tokio::test]
async fn map_is_keyed_by_property_in_requested_order_without_timestamps() {
    let state = state_with("tokens");
    let a = get(
        &state,
        "/devices/dvc_bat1/measurements/map?properties=totalEnergyConsumed,soc,stateOfHealth",
    )
    .await;
    assert_eq!(
        a.ok(),
        &json!({"reference": "dvc_bat1", "measurements": {
            "totalEnergyConsumed": {"value": 42, "unit": "Wh"},
            "soc": {"value": 65, "unit": "%"},
        }})
    );
    // Keys in requested order on the wire.
    assert!(
        a.raw.find("totalEnergyConsumed") < a.raw.find("\"soc\""),
        "{}",
        a.raw
    );
    let all = get(&state, "/devices/dvc_pv1/measurements/map").await;
    assert_eq!(
        all.ok()["measurements"],
        json!({"activePower": {"value": 3200, "unit": "W"},
               "totalEnergyProduced": {"value": 1_500_000, "unit": "Wh"}})
    );
}

#[tokio::test]
async fn list_and_map_errors() {
    let state = state_with("tokens");
    for path in ["measurements", "measurements/map"] {
        let a = get(&state, &format!("/devices/dvc_x/{path}?properties=soc")).await;
        a.problem(404, "device_not_found");
        let a = get(
            &state,
            &format!("/devices/dvc_bat1/{path}?properties=soc,bogus"),
        )
        .await;
        let b = a.problem(400, "unknown_property");
        assert_eq!(b["field"], "properties");
        assert!(b["detail"].as_str().unwrap().contains("bogus"));
        let a = get(&state, &format!("/devices/dvc_pv1/{path}?properties=soc")).await;
        a.problem(400, "unknown_property");
        for empty in ["", "%20", ",", "%20,%20"] {
            let a = get(
                &state,
                &format!("/devices/dvc_bat1/{path}?properties={empty}"),
            )
            .await;
            assert_eq!(a.problem(400, "invalid_value")["field"], "properties");
        }
        let a = get(&state, &format!("/devices/dvc_bat1/{path}?property=soc")).await;
        assert_eq!(a.problem(400, "unknown_field")["field"], "property");
        let a = get(
            &state,
            &format!("/devices/dvc_bat1/{path}?properties=soc&properties=soc"),
        )
        .await;
        a.problem(400, "invalid_value");
    }
}
