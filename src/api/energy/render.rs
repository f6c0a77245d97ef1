//! The energy answer as JSON: kWh with at most three decimals ([`Num`]),
//! times in RFC 3339 UTC, each flow's source by name.
//!
//! Rendering only; it must not compute any energy or ratio itself.

use serde_json::{json, Map, Value};

use crate::api::number::Num;
use crate::energy::{Bucket, Flow, SiteEnergy};
use crate::model::time;

/// The whole answer for `site`.
pub fn site_energy(site: &str, e: &SiteEnergy) -> Value {
    let devices: Vec<Value> = e
        .devices
        .iter()
        .map(|d| {
            let flows: Map<String, Value> = d
                .flows
                .iter()
                .map(|(f, s)| (f.name().to_string(), json!(s.name())))
                .collect();
            json!({
                "deviceReference": d.reference,
                "type": d.device_type.as_str(),
                "flows": flows,
            })
        })
        .collect();
    json!({
        "siteReference": site,
        "interval": e.query.interval.name(),
        "from": time::format_utc(e.query.from_ms),
        "to": time::format_utc(e.query.to_ms),
        "unit": "kWh",
        "devices": devices,
        "buckets": e.buckets.iter().map(bucket).collect::<Vec<_>>(),
        "total": e.total.as_ref().map(bucket),
    })
}

fn kwh(wh: f64) -> Value {
    json!(Num(wh / 1000.0))
}

fn bucket(b: &Bucket) -> Value {
    let mut v = Map::new();
    v.insert("start".into(), json!(time::format_utc(b.start_ms)));
    v.insert("end".into(), json!(time::format_utc(b.end_ms)));
    for f in Flow::ALL {
        v.insert(f.name().into(), kwh(b.flow(f)));
    }
    v.insert("consumption".into(), kwh(b.consumption()));
    v.insert(
        "selfConsumption".into(),
        json!(b.self_consumption().map(Num)),
    );
    v.insert("autarky".into(), json!(b.autarky().map(Num)));
    let sources: Map<String, Value> = Flow::ALL
        .iter()
        .map(|f| (f.name().to_string(), json!(b.sources[f.index()].name())))
        .collect();
    v.insert("sources".into(), Value::Object(sources));
    v.insert("counterResets".into(), json!(b.counter_resets));
    Value::Object(v)
}
