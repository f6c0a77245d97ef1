//! Request validation: every rule with its code, field and detail.

use serde_json::json;

use super::*;
use crate::steering::{CurtailmentValue, EssSetting};

const NOW: i64 = 1_719_475_200_000;
const T: i64 = NOW + 3_600_000;

fn ctx() -> Context {
    Context {
        now_ms: NOW,
        site_soc: Some(50.0),
        limits: ConfiguredLimits {
            max_import_w: Some(60_000.0),
            max_export_w: Some(40_000.0),
        },
        clock_unsynchronised: false,
    }
}

fn refused(endpoint: Endpoint, body: Value, code: ErrorCode, field: Option<&str>) {
    let e = parse(endpoint, &body, &ctx()).expect_err(&body.to_string());
    assert_eq!(e.code, code, "{body}: {}", e.detail);
    assert_eq!(e.field.as_deref(), field, "{body}: {}", e.detail);
    assert!(!e.detail.is_empty());
}

#[test]
fn worked_scenario_step_one_sets_mgi_false() {
    let body = json!({"energyStorageSetting": {"value": 100000, "unit": "W"},
                      "productionCurtailment": {"value": 300000, "unit": "W"}, "validUntil": T});
    let r = parse(Endpoint::Site, &body, &ctx()).unwrap();
    assert_eq!(r.ess.as_ref().map(EssSetting::watts), Some(100_000.0));
    assert_eq!(
        r.curtailment.as_ref().map(|c| c.watts(0.0)),
        Some(300_000.0)
    );
    assert_eq!(r.maximize_grid_import, Some(false));
    assert_eq!(r.effective_from(NOW), NOW);
}

#[test]
fn endpoints_take_their_own_shapes() {
    let r = parse(
        Endpoint::Ess,
        &json!({"setting": {"mode": "idle"}, "validFrom": NOW + 10, "validUntil": T}),
        &ctx(),
    )
    .unwrap();
    assert_eq!(r.ess, Some(EssSetting::Idle));
    assert_eq!(r.maximize_grid_import, None);
    assert_eq!(r.effective_from(NOW), NOW + 10);
    let r = parse(
        Endpoint::Curtailment,
        &json!({"setting": {"value": 40, "unit": "%"}, "validUntil": T as f64}),
        &ctx(),
    )
    .unwrap();
    assert_eq!(r.curtailment, Some(CurtailmentValue::Percent(40.0)));
    let r = parse(
        Endpoint::Ess,
        &json!({"setting": {"value": -5, "unit": "kW", "untilSoc": 80}, "validUntil": T}),
        &ctx(),
    )
    .unwrap();
    assert!(matches!(r.ess, Some(EssSetting::UntilSoc { until_soc, .. }) if until_soc == 80.0));
    // A past validFrom applies now.
    let r = parse(
        Endpoint::Site,
        &json!({"maximizeGridImport": true, "validFrom": NOW - 5000, "validUntil": T}),
        &ctx(),
    )
    .unwrap();
    assert_eq!(r.effective_from(NOW), NOW);
}

#[test]
fn validity_rules() {
    use ErrorCode::*;
    let e = json!({"value": 1, "unit": "W"});
    refused(
        Endpoint::Ess,
        json!({"setting": e}),
        MissingField,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validUntil": NOW}),
        Expired,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validUntil": NOW - 1}),
        Expired,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validFrom": T, "validUntil": T}),
        InvalidValue,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validFrom": T + 5, "validUntil": T}),
        InvalidValue,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validUntil": NOW + MAX_AHEAD_MS + 1}),
        InvalidValue,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validUntil": "tomorrow"}),
        InvalidValue,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validUntil": 1.5e12 + 0.5}),
        InvalidValue,
        Some("validUntil"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": e, "validFrom": "now", "validUntil": T}),
        InvalidValue,
        Some("validFrom"),
    );
    assert!(parse(
        Endpoint::Ess,
        &json!({"setting": e, "validUntil": NOW + MAX_AHEAD_MS}),
        &ctx()
    )
    .is_ok());
}

/// The times are checked by the controller's clock either way; where it is
/// known not to be synchronised, the answer says so.
#[test]
fn an_unsynchronised_clock_is_named_where_times_are_refused() {
    use ErrorCode::*;
    let e = json!({"value": 1, "unit": "kW"});
    let unsynced = Context {
        clock_unsynchronised: true,
        ..ctx()
    };
    for (until, code) in [(NOW - 1, Expired), (NOW + MAX_AHEAD_MS + 1, InvalidValue)] {
        let body = json!({"setting": e, "validUntil": until});
        let r = parse(Endpoint::Ess, &body, &unsynced).expect_err("refused");
        assert_eq!(r.code, code);
        assert!(
            r.detail.contains("clock is not synchronised"),
            "{}",
            r.detail
        );
        let r = parse(Endpoint::Ess, &body, &ctx()).expect_err("refused");
        assert!(!r.detail.contains("clock"), "{}", r.detail);
    }
    assert!(parse(
        Endpoint::Ess,
        &json!({"setting": e, "validUntil": T}),
        &unsynced
    )
    .is_ok());
}

#[test]
fn value_rules() {
    use ErrorCode::*;
    let until = json!(T);
    refused(
        Endpoint::Site,
        json!({"validUntil": until}),
        MissingField,
        None,
    );
    refused(
        Endpoint::Ess,
        json!({"validUntil": until}),
        MissingField,
        Some("setting"),
    );
    refused(
        Endpoint::Curtailment,
        json!({"validUntil": until}),
        MissingField,
        Some("setting"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": 1, "unit": "kw"}, "validUntil": until}),
        UnknownUnit,
        Some("setting.unit"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": 1, "unit": "%"}, "validUntil": until}),
        UnknownUnit,
        Some("setting.unit"),
    );
    refused(
        Endpoint::Curtailment,
        json!({"setting": {"value": 1, "unit": "GW"}, "validUntil": until}),
        UnknownUnit,
        Some("setting.unit"),
    );
    refused(
        Endpoint::Curtailment,
        json!({"setting": {"value": -1, "unit": "W"}, "validUntil": until}),
        InvalidValue,
        Some("setting.value"),
    );
    refused(
        Endpoint::Curtailment,
        json!({"setting": {"value": 100.5, "unit": "%"}, "validUntil": until}),
        InvalidValue,
        Some("setting.value"),
    );
    refused(
        Endpoint::Site,
        json!({"productionCurtailment": {"value": -0.1, "unit": "%"}, "validUntil": until}),
        InvalidValue,
        Some("productionCurtailment.value"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": 1e308, "unit": "MW"}, "validUntil": until}),
        InvalidValue,
        Some("setting.value"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": "5", "unit": "W"}, "validUntil": until}),
        InvalidValue,
        Some("setting.value"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"unit": "W"}, "validUntil": until}),
        MissingField,
        Some("setting.value"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": 5}, "validUntil": until}),
        MissingField,
        Some("setting.unit"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"mode": "auto"}, "validUntil": until}),
        InvalidValue,
        Some("setting.mode"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": 5, "validUntil": until}),
        InvalidValue,
        Some("setting"),
    );
    refused(
        Endpoint::Site,
        json!({"maximizeGridImport": "yes", "validUntil": until}),
        InvalidValue,
        Some("maximizeGridImport"),
    );
    refused(Endpoint::Site, json!([1, 2]), InvalidValue, None);
}

#[test]
fn unknown_fields_anywhere() {
    use ErrorCode::*;
    let until = json!(T);
    refused(
        Endpoint::Site,
        json!({"maximizeGridImport": true, "validUntil": until, "gridLimits": 1}),
        UnknownField,
        Some("gridLimits"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": 1, "unit": "W", "x": 1}, "validUntil": until}),
        UnknownField,
        Some("setting.x"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"mode": "idle", "value": 1}, "validUntil": until}),
        UnknownField,
        Some("setting.value"),
    );
    refused(
        Endpoint::Ess,
        json!({"energyStorageSetting": {"value": 1, "unit": "W"}, "validUntil": until}),
        UnknownField,
        Some("energyStorageSetting"),
    );
    refused(
        Endpoint::Curtailment,
        json!({"setting": {"value": 1, "unit": "W", "untilSoc": 5}, "validUntil": until}),
        UnknownField,
        Some("setting.untilSoc"),
    );
}

#[test]
fn until_soc_must_move_towards_the_target() {
    use ErrorCode::*;
    let until = json!(T);
    // Site SoC is 50 %: discharging towards 60 moves away, charging towards 40 too.
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": 10, "unit": "kW", "untilSoc": 60}, "validUntil": until}),
        InvalidValue,
        Some("setting.untilSoc"),
    );
    refused(
        Endpoint::Site,
        json!({"energyStorageSetting": {"value": -10, "unit": "kW", "untilSoc": 40}, "validUntil": until}),
        InvalidValue,
        Some("energyStorageSetting.untilSoc"),
    );
    refused(
        Endpoint::Ess,
        json!({"setting": {"value": 10, "unit": "kW", "untilSoc": 101}, "validUntil": until}),
        InvalidValue,
        Some("setting.untilSoc"),
    );
    assert!(parse(
        Endpoint::Ess,
        &json!({"setting": {"value": 10, "unit": "kW", "untilSoc": 40}, "validUntil": until}),
        &ctx()
    )
    .is_ok());
    // Unknown SoC: the sign cannot be judged, so it is accepted.
    let unknown = Context {
        now_ms: NOW,
        site_soc: None,
        ..ctx()
    };
    assert!(parse(
        Endpoint::Ess,
        &json!({"setting": {"value": 10, "unit": "kW", "untilSoc": 60}, "validUntil": until}),
        &unknown
    )
    .is_ok());
}

/// A zero power moves towards no target, whichever side of the site's SoC
/// it is: it is taken, and holds 0 W until the validity ends.
#[test]
fn until_soc_with_a_zero_power_is_taken() {
    for target in [0.0, 40.0, 50.0, 60.0, 100.0] {
        for unit in ["W", "kW", "MW"] {
            let body =
                json!({"setting": {"value": 0, "unit": unit, "untilSoc": target}, "validUntil": T});
            let r = parse(Endpoint::Ess, &body, &ctx()).unwrap_or_else(|e| panic!("{body}: {e}"));
            assert_eq!(r.ess.as_ref().map(EssSetting::watts), Some(0.0), "{body}");
            assert!(
                matches!(r.ess, Some(EssSetting::UntilSoc { until_soc, .. }) if until_soc == target),
                "{body}"
            );
        }
    }
}

/// Powers up to 10^12 in their own unit are taken, beyond are refused naming
/// the field and the bound, in every place a power goes.
#[test]
fn powers_are_bounded_in_their_unit() {
    use ErrorCode::*;
    let big = crate::api::bounds::POWER_VALUE_MAX;
    for (value, unit) in [(big, "MW"), (-big, "MW"), (big, "W"), (-big, "kW")] {
        let body = json!({"setting": {"value": value, "unit": unit}, "validUntil": T});
        let r = parse(Endpoint::Ess, &body, &ctx()).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert!(r.ess.as_ref().is_some_and(|e| e.watts().is_finite()));
    }
    let over = big * (1.0 + 1e-9);
    for body in [
        json!({"setting": {"value": over, "unit": "W"}, "validUntil": T}),
        json!({"setting": {"value": -over, "unit": "MW"}, "validUntil": T}),
        json!({"setting": {"value": f64::MAX, "unit": "MW"}, "validUntil": T}),
        json!({"setting": {"value": -over, "unit": "kW", "untilSoc": 60}, "validUntil": T}),
    ] {
        let e = parse(Endpoint::Ess, &body, &ctx()).expect_err(&body.to_string());
        assert_eq!(
            (e.code, e.field.as_deref()),
            (InvalidValue, Some("setting.value")),
            "{body}"
        );
        assert!(e.detail.contains("1e12"), "{}", e.detail);
    }
    refused(
        Endpoint::Curtailment,
        json!({"setting": {"value": over, "unit": "kW"}, "validUntil": T}),
        InvalidValue,
        Some("setting.value"),
    );
    let unlimited = Context {
        limits: ConfiguredLimits {
            max_import_w: None,
            max_export_w: None,
        },
        ..ctx()
    };
    let body = json!({"setting": {"maxExport": {"value": over, "unit": "W"}}, "validUntil": T});
    let e = parse(Endpoint::GridLimit, &body, &unlimited).expect_err("beyond");
    assert_eq!(e.field.as_deref(), Some("setting.maxExport.value"));
    let body = json!({"setting": {"maxExport": {"value": big, "unit": "MW"}}, "validUntil": T});
    assert!(parse(Endpoint::GridLimit, &body, &unlimited).is_ok());
}

#[test]
fn null_counts_as_absent() {
    let r = parse(
        Endpoint::Site,
        &json!({"energyStorageSetting": null, "productionCurtailment": {"value": 1, "unit": "MW"}, "validFrom": null, "validUntil": T}),
        &ctx(),
    )
    .unwrap();
    assert_eq!(r.ess, None);
    assert_eq!(r.valid_from, None);
}

#[test]
fn grid_limit_endpoint_and_site_member() {
    let r = parse(
        Endpoint::GridLimit,
        &json!({"setting": {"maxExport": {"value": 0, "unit": "W"}}, "validUntil": T}),
        &ctx(),
    )
    .unwrap();
    let g = r.grid_limit.unwrap();
    assert_eq!(g.max_export.map(|p| p.as_watts()), Some(0.0));
    assert_eq!(g.max_import, None);
    assert_eq!(
        (r.ess, r.curtailment, r.maximize_grid_import),
        (None, None, None)
    );

    let site = parse(
        Endpoint::Site,
        &json!({"gridLimit": {"maxImport": {"value": 20, "unit": "kW"}}, "validUntil": T}),
        &ctx(),
    )
    .unwrap();
    assert_eq!(
        site.grid_limit
            .and_then(|g| g.max_import)
            .map(|p| p.as_watts()),
        Some(20_000.0)
    );
    // Without the storage setting and the curtailment, rule 3 does not
    // apply: maximize grid import stays as it is (rule 2). A site request
    // without gridLimit leaves that alone.
    assert_eq!(site.maximize_grid_import, None);
    let without = parse(
        Endpoint::Site,
        &json!({"maximizeGridImport": true, "validUntil": T}),
        &ctx(),
    )
    .unwrap();
    assert_eq!(without.grid_limit, None);
}

#[test]
fn grid_limit_refusals_name_the_field() {
    let body = |setting: Value| json!({"setting": setting, "validUntil": T});
    refused(
        Endpoint::GridLimit,
        body(json!({"maxExport": {"value": 41, "unit": "kW"}})),
        ErrorCode::InvalidValue,
        Some("setting.maxExport"),
    );
    let e = parse(
        Endpoint::GridLimit,
        &body(json!({"maxImport": {"value": 61000, "unit": "W"}})),
        &ctx(),
    )
    .unwrap_err();
    assert!(e.detail.contains("60000 W"), "{}", e.detail);
    refused(
        Endpoint::GridLimit,
        body(json!({})),
        ErrorCode::MissingField,
        Some("setting"),
    );
    refused(
        Endpoint::GridLimit,
        body(json!({"maxExport": {"value": -1, "unit": "W"}})),
        ErrorCode::InvalidValue,
        Some("setting.maxExport.value"),
    );
    refused(
        Endpoint::GridLimit,
        body(json!({"maxExport": {"value": 1, "unit": "%"}})),
        ErrorCode::UnknownUnit,
        Some("setting.maxExport.unit"),
    );
    refused(
        Endpoint::GridLimit,
        body(json!({"maxExport": {"value": 1, "unit": "W"}, "other": 1})),
        ErrorCode::UnknownField,
        Some("setting.other"),
    );
    refused(
        Endpoint::GridLimit,
        json!({"validUntil": T}),
        ErrorCode::MissingField,
        Some("setting"),
    );
    refused(
        Endpoint::Site,
        json!({"gridLimit": {"maxExport": {"value": 50, "unit": "kW"}}, "validUntil": T}),
        ErrorCode::InvalidValue,
        Some("gridLimit.maxExport"),
    );
    // Without a configured limit any value tightens.
    let open = Context {
        limits: ConfiguredLimits::default(),
        ..ctx()
    };
    assert!(parse(
        Endpoint::GridLimit,
        &body(json!({"maxImport": {"value": 1, "unit": "MW"}})),
        &open
    )
    .is_ok());
}

/// Rule 3 sets maximize grid import to false only when the request carries
/// both the storage setting and the curtailment; otherwise an absent value
/// keeps its setting (rule 2).
#[test]
fn rule_3_applies_only_with_both_storage_and_curtailment() {
    let ess = json!({"value": 5, "unit": "kW"});
    let curtailment = json!({"value": 50, "unit": "%"});
    let cases = [
        (
            json!({"energyStorageSetting": ess, "productionCurtailment": curtailment}),
            Some(false),
        ),
        (json!({"energyStorageSetting": ess}), None),
        (json!({"productionCurtailment": curtailment}), None),
        (
            json!({"energyStorageSetting": ess, "productionCurtailment": curtailment, "maximizeGridImport": true}),
            Some(true),
        ),
    ];
    for (mut body, want) in cases {
        body["validUntil"] = json!(T);
        let req = parse(Endpoint::Site, &body, &ctx()).unwrap();
        assert_eq!(req.maximize_grid_import, want, "{body}");
    }
}
