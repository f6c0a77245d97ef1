use serde_json::json;

use super::*;

#[tokio::test]
async fn lists_every_device_in_config_order_with_its_properties_and_status() {
    let state = state_with("tokens");
    let body = get(&state, "/devices").await.ok().clone();
    assert_eq!(
        body,
        json!([
            {"deviceReference": "dvc_pv1", "siteReference": "ste_home", "name": "Roof PV",
             "type": "inverter",
             "properties": [{"property": "activePower", "unit": "W"},
                            {"property": "totalEnergyProduced", "unit": "Wh"}],
             "status": {"online": true, "lastSeen": T0}},
            {"deviceReference": "dvc_bat1", "siteReference": "ste_home", "name": "Battery",
             "type": "battery",
             "properties": [{"property": "activePower", "unit": "W"},
                            {"property": "soc", "unit": "%"},
                            {"property": "stateOfHealth", "unit": "%"},
                            {"property": "totalEnergyConsumed", "unit": "Wh"}],
             "status": {"online": true, "lastSeen": T0}},
            {"deviceReference": "dvc_home_grid_meter", "siteReference": "ste_home",
             "name": "Grid Meter", "type": "meter",
             "properties": [{"property": "activePower", "unit": "W"}],
             "status": {"online": false, "lastSeen": null}},
            {"deviceReference": "dvc_barn_pv", "siteReference": "ste_barn", "name": "Barn PV",
             "type": "inverter",
             "properties": [{"property": "activePower", "unit": "W"}],
             "status": {"online": true, "lastSeen": T0}},
        ])
    );
}

#[tokio::test]
async fn devices_before_discovery_offer_nothing() {
    let state = empty_state("tokens");
    let body = get(&state, "/devices").await.ok().clone();
    assert_eq!(body.as_array().map(Vec::len), Some(4));
    assert_eq!(body[0]["properties"], json!([]));
    assert_eq!(
        body[0]["status"],
        json!({"online": false, "lastSeen": null})
    );
}

#[tokio::test]
async fn filters_by_site() {
    let state = state_with("tokens");
    let refs = |body: &Value| -> Vec<String> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|d| d["deviceReference"].as_str().unwrap().to_string())
            .collect()
    };
    let home = get(&state, "/devices?site=ste_home").await;
    assert_eq!(
        refs(home.ok()),
        ["dvc_pv1", "dvc_bat1", "dvc_home_grid_meter"]
    );
    let barn = get(&state, "/devices?site=ste_barn").await;
    assert_eq!(refs(barn.ok()), ["dvc_barn_pv"]);
}

#[tokio::test]
async fn unknown_site_is_404_site_not_found() {
    let state = state_with("tokens");
    let a = get(&state, "/devices?site=ste_nowhere").await;
    let b = a.problem(404, "site_not_found");
    assert!(b["detail"].as_str().unwrap().contains("ste_nowhere"), "{b}");
}

/// A site reference of blanks only is one no site has; the value is trimmed.
#[tokio::test]
async fn a_blank_site_is_not_found_and_a_padded_one_is_trimmed() {
    let state = state_with("tokens");
    for query in ["site=%20", "site=%20%20%09", "site=+"] {
        let a = get(&state, &format!("/devices?{query}")).await;
        a.problem(404, "site_not_found");
    }
    let padded = get(&state, "/devices?site=%20ste_barn%20").await;
    assert_eq!(padded.ok().as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn listing_query_is_strict() {
    let state = state_with("tokens");
    let b = get(&state, "/devices?sort=name").await;
    let b = b.problem(400, "unknown_field");
    assert_eq!(b["field"], "sort");
    assert!(b["detail"].as_str().unwrap().contains("site"), "{b}");
    get(&state, "/devices?site=ste_home&site=ste_barn")
        .await
        .problem(400, "invalid_value");
    get(&state, "/devices?site=")
        .await
        .problem(400, "invalid_value");
}
