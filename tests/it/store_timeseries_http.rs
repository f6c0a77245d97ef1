//! The time-series endpoint against a naive computation, end to end: random
//! samples enter a running agent the way polls do (`Telemetry::publish`, then
//! the store's writer), random questions go to
//! `POST /devices/{ref}/measurements/time-series` as JSON with ISO dates in
//! several offsets, and every answer must equal a computation written here from
//! scratch: its own calendar, its own bucket alignment, its own mean, min, max,
//! first and last. Nothing of the store's query code is reused.
//!
//! One agent (polling the simulated site) serves every case; each case writes
//! into a fresh four-hour window far in the past, so the polls of today never
//! meet the random samples, while long questions (up to 30 days) also see the
//! windows of earlier cases. The naive side therefore folds over everything
//! written so far, in the order it was sent.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::{json, Value};
use sitegate::model::{DeviceId, Property, Sample};

use crate::common::site::{self, SmallSite, READ_TOKEN, SUMMER_MORNING_MS};
use crate::steering_support::TestSite;

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
/// The longest range the endpoint answers.
const THIRTY_DAYS: i64 = 30 * DAY;
/// 2010-01-01T00:00:00Z: windows start here, one day apart.
const FIRST_WINDOW: i64 = 1_262_304_000_000;
/// A case's samples fall in four hours starting 30 minutes before an hour.
const SPAN: i64 = 4 * HOUR;
const WINDOW_OFFSET: i64 = 30 * MINUTE;

/// Resolutions as sent: raw-only widths (s, 90 s), minute-rollup widths
/// (1, 2, 15, 90 min) and hour-rollup widths (1 h, 2 h, 1 d).
const RESOLUTIONS: [(i64, &str, i64); 10] = [
    (1, "s", SECOND),
    (7, "s", SECOND),
    (90, "s", SECOND),
    (1, "min", MINUTE),
    (2, "min", MINUTE),
    (15, "min", MINUTE),
    (90, "min", MINUTE),
    (1, "h", HOUR),
    (2, "h", HOUR),
    (1, "d", DAY),
];
const AGGREGATIONS: [&str; 5] = ["mean", "min", "max", "first", "last"];
/// UTC offsets the ISO dates are written in, minutes (`None`: `Z`).
const OFFSETS: [Option<i64>; 5] = [None, Some(0), Some(120), Some(-330), Some(345)];

/// What is asked about: (device, property, is it a counter).
const SERIES: [(&str, &str, bool); 3] = [
    ("dvc_pv", "activePower", false),
    ("dvc_pv", "totalEnergyProduced", true),
    ("dvc_bat", "activePower", false),
];

// ---- a calendar of its own ------------------------------------------------

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `ms` as RFC 3339 in the offset `offset_min` (`None`: `Z`), with
/// milliseconds when it has any.
fn iso(ms: i64, offset_min: Option<i64>) -> String {
    let local = ms + offset_min.unwrap_or(0) * MINUTE;
    let (y, mo, d) = civil(local.div_euclid(DAY));
    let in_day = local.rem_euclid(DAY);
    let (h, mi, s, milli) = (
        in_day / HOUR,
        in_day % HOUR / MINUTE,
        in_day % MINUTE / SECOND,
        in_day % SECOND,
    );
    let fraction = if milli == 0 {
        String::new()
    } else {
        format!(".{milli:03}")
    };
    let zone = match offset_min {
        None => "Z".to_string(),
        Some(o) => format!(
            "{}{:02}:{:02}",
            if o < 0 { '-' } else { '+' },
            o.abs() / 60,
            o.abs() % 60
        ),
    };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{fraction}{zone}")
}

#[test]
fn the_calendar_of_this_test_is_right() {
    assert_eq!(iso(FIRST_WINDOW, None), "2010-01-01T00:00:00Z");
    assert_eq!(iso(1_719_475_200_000, None), "2024-06-27T08:00:00Z");
    assert_eq!(
        iso(1_719_475_200_123, Some(120)),
        "2024-06-27T10:00:00.123+02:00"
    );
    assert_eq!(
        iso(1_709_164_800_000, Some(-330)),
        "2024-02-28T18:30:00-05:30"
    );
    assert_eq!(iso(951_782_400_000, None), "2000-02-29T00:00:00Z");
    assert_eq!(iso(-1, None), "1969-12-31T23:59:59.999Z");
}

// ---- the naive computation ------------------------------------------------

/// One sample as sent: which series, when, what.
#[derive(Clone, Copy, Debug)]
struct Sent {
    series: usize,
    ts: i64,
    value: f64,
}

/// Every sample of `series` with `start <= ts < end` (the first one sent for a
/// timestamp; later ones are ignored), in buckets of `width` counted from the
/// epoch, each folded by `aggregation`; empty buckets left out.
fn naive(
    sent: &[Sent],
    series: usize,
    start: i64,
    end: i64,
    width: i64,
    aggregation: &str,
) -> Vec<(i64, f64)> {
    let mut seen = HashSet::new();
    let mut buckets: BTreeMap<i64, Vec<(i64, f64)>> = BTreeMap::new();
    for s in sent.iter().filter(|s| s.series == series) {
        if !seen.insert(s.ts) || s.ts < start || s.ts >= end {
            continue;
        }
        let bucket = s.ts.div_euclid(width) * width;
        buckets.entry(bucket).or_default().push((s.ts, s.value));
    }
    buckets
        .into_iter()
        .map(|(bucket, mut samples)| {
            samples.sort_by_key(|(ts, _)| *ts);
            let values = samples.iter().map(|(_, v)| *v);
            let value = match aggregation {
                "mean" => values.clone().sum::<f64>() / samples.len() as f64,
                "min" => values.fold(f64::INFINITY, f64::min),
                "max" => values.fold(f64::NEG_INFINITY, f64::max),
                "first" => samples[0].1,
                "last" => samples[samples.len() - 1].1,
                other => unreachable!("no aggregation {other}"),
            };
            (bucket, value)
        })
        .collect()
}

// ---- random cases -----------------------------------------------------------

#[derive(Clone, Debug)]
struct Ask {
    series: usize,
    /// Within the case's window, or a long range ending in it.
    long: bool,
    at: i64,
    len: i64,
    resolution: usize,
    /// `None`: leave `aggregation` out (mean for gauges, last for counters).
    aggregation: Option<usize>,
    start_offset: usize,
    end_offset: usize,
}

#[derive(Clone, Debug)]
struct Case {
    /// (offset in the window, value, series).
    samples: Vec<(i64, f64, usize)>,
    /// Indexes of samples sent again later with another value (ignored).
    resend: Vec<usize>,
    /// Batch boundaries (each batch is published, then committed).
    cuts: Vec<usize>,
    compact_after: Vec<bool>,
    asks: Vec<Ask>,
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-5000i32..5000).prop_map(f64::from),
        -1000.0f64..1000.0,
        Just(0.0),
        Just(42.5),
    ]
}

fn ask() -> impl Strategy<Value = Ask> {
    (
        0..SERIES.len(),
        prop::bool::weighted(0.25),
        -HOUR..SPAN + HOUR,
        prop_oneof![1i64..SPAN + 2 * HOUR, 1i64..THIRTY_DAYS, Just(THIRTY_DAYS)],
        0..RESOLUTIONS.len(),
        prop::option::weighted(0.6, 0..AGGREGATIONS.len()),
        0..OFFSETS.len(),
        0..OFFSETS.len(),
    )
        .prop_map(
            |(series, long, at, len, resolution, aggregation, start_offset, end_offset)| Ask {
                series,
                long,
                at,
                len,
                resolution,
                aggregation,
                start_offset,
                end_offset,
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (
        // Dense clusters and sparse points; most on the PV's power.
        prop::collection::vec(
            (
                prop_oneof![
                    0..SPAN,
                    0..2 * MINUTE,
                    (HOUR - 90 * SECOND)..(HOUR + 90 * SECOND)
                ],
                value(),
                prop_oneof![4 => Just(0usize), 1 => Just(1usize), 1 => Just(2usize)],
            ),
            0..500,
        ),
        prop::collection::vec(0usize..500, 0..8),
        prop::collection::vec(0usize..500, 0..6),
        prop::collection::vec(any::<bool>(), 7),
        prop::collection::vec(ask(), 1..10),
    )
        .prop_map(|(samples, resend, cuts, compact_after, asks)| Case {
            samples,
            resend,
            cuts,
            compact_after,
            asks,
        })
}

// ---- the agent ----------------------------------------------------------------

struct Rig {
    rt: tokio::runtime::Runtime,
    site: SmallSite,
    /// The device ids behind `SERIES`, and its properties.
    targets: [(DeviceId, Property); 3],
    /// Everything sent so far, in order.
    sent: Mutex<Vec<Sent>>,
    /// The next case's window.
    next_window: Mutex<i64>,
}

impl Rig {
    fn start() -> Rig {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        // Retention measures age on the real clock: keep 2010 from expiring.
        let config = TestSite::small()
            .section_key(&["storage"], "retention_days", 36_500)
            .section_key(&["storage"], "rollup_retention_days", 36_500)
            .section_key(&["storage"], "minute_rollup_retention_days", 36_500)
            .text();
        let (site, targets) = rt.block_on(async {
            let site = site::start(&config, 1.0, SUMMER_MORNING_MS).await;
            site.ready().await;
            let mut targets = Vec::new();
            for (device, property) in [
                ("dvc_pv", Property::ActivePower),
                ("dvc_pv", Property::TotalEnergyProduced),
                ("dvc_bat", Property::ActivePower),
            ] {
                let live = site.agent.live();
                let id = live.find(device).expect("configured device");
                crate::common::wait_for(
                    &format!("{device} offering {property:?}"),
                    std::time::Duration::from_secs(30),
                    || async { live.snapshot(id).offers(property).then_some(()) },
                )
                .await;
                targets.push((id, property));
            }
            (site, targets)
        });
        let targets = [targets[0], targets[1], targets[2]];
        Rig {
            rt,
            site,
            targets,
            sent: Mutex::new(Vec::new()),
            next_window: Mutex::new(FIRST_WINDOW),
        }
    }

    /// Publishes `batch` device by device (in its order within each device),
    /// recording what was sent.
    async fn publish(&self, batch: &[Sent]) {
        for device in [self.targets[0].0, self.targets[2].0] {
            let samples: Vec<Sample> = batch
                .iter()
                .filter(|s| self.targets[s.series].0 == device)
                .map(|s| Sample {
                    device,
                    property: self.targets[s.series].1,
                    ts_ms: s.ts,
                    value: s.value,
                })
                .collect();
            let mine: Vec<Sent> = batch
                .iter()
                .filter(|s| self.targets[s.series].0 == device)
                .copied()
                .collect();
            self.sent.lock().expect("history").extend(mine);
            self.site.agent.telemetry().publish(device, samples).await;
        }
    }

    async fn ask(&self, body: &Value, device: &str) -> Value {
        let (status, answer) = self
            .site
            .call(
                Method::POST,
                &format!("/devices/{device}/measurements/time-series"),
                Some(READ_TOKEN),
                Some(body),
            )
            .await;
        assert_eq!(status, 200, "{body}: {answer}");
        answer
    }

    fn run_case(&self, case: Case) -> Result<(), TestCaseError> {
        let window = {
            let mut next = self.next_window.lock().expect("window");
            let w = *next;
            *next += DAY;
            w
        };
        let base = window + WINDOW_OFFSET;
        let mut all: Vec<Sent> = case
            .samples
            .iter()
            .map(|&(off, value, series)| Sent {
                series,
                ts: base + off,
                value,
            })
            .collect();
        // Resent timestamps with other values, at the end: the first one counts.
        let resent: Vec<Sent> = case
            .resend
            .iter()
            .filter_map(|&i| all.get(i))
            .map(|s| Sent {
                value: s.value + 1.0,
                ..*s
            })
            .collect();
        all.extend(resent);
        let mut cuts: Vec<usize> = case.cuts.into_iter().filter(|c| *c < all.len()).collect();
        cuts.push(all.len());
        cuts.sort_unstable();
        let store = self.site.agent.store();
        self.rt.block_on(async {
            let mut from = 0;
            for (i, cut) in cuts.into_iter().enumerate() {
                self.publish(&all[from..cut]).await;
                from = cut;
                // Each batch its own commit: small ones are staged, large ones
                // would go straight to the chunks (none here is large enough);
                // random compactions move the staged ones.
                store.flush().await.expect("flush");
                if case.compact_after[i] {
                    store.compact().await.expect("compact");
                }
            }
        });
        let sent = self.sent.lock().expect("history").clone();
        for ask in case.asks {
            let (value, unit, _) = RESOLUTIONS[ask.resolution];
            let width = value
                * match unit {
                    "s" => SECOND,
                    "min" => MINUTE,
                    "h" => HOUR,
                    _ => DAY,
                };
            // At most 100,000 buckets, at most 30 days.
            let len = ask.len.min(99_999 * width).min(THIRTY_DAYS);
            let (start, end) = if ask.long {
                let end = base + ask.at.max(0);
                (end - len, end)
            } else {
                (base + ask.at, base + ask.at + len)
            };
            let (device, property, counter) = SERIES[ask.series];
            let mut body = json!({
                "property": property,
                "range": {"type": "absolute",
                          "start": iso(start, OFFSETS[ask.start_offset]),
                          "end": iso(end, OFFSETS[ask.end_offset])},
                "resolution": {"value": value, "unit": unit},
            });
            let aggregation = match ask.aggregation {
                Some(a) => {
                    body["aggregation"] = json!(AGGREGATIONS[a]);
                    AGGREGATIONS[a]
                }
                None if counter => "last",
                None => "mean",
            };
            let answer = self.rt.block_on(self.ask(&body, device));
            let expected = naive(&sent, ask.series, start, end, width, aggregation);
            compare(&answer, &expected, aggregation)
                .map_err(|e| TestCaseError::fail(format!("{body}: {e}")))?;
        }
        Ok(())
    }
}

/// The API writes a value with at most 3 decimals (`docs/api-decisions.md`, "Numbers").
fn written(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Equal means: the same bucket times (as this test writes them), exact min,
/// max, first and last as the API writes them (3 decimals), and the mean
/// within that rounding plus 1e-9 relative (the store adds partial sums of
/// rollups in another order than a sum over samples in time order).
fn compare(answer: &Value, expected: &[(i64, f64)], aggregation: &str) -> Result<(), String> {
    let (Some(time), Some(data)) = (answer["time"].as_array(), answer["data"].as_array()) else {
        return Err(format!("not a series: {answer}"));
    };
    let want: Vec<String> = expected.iter().map(|(t, _)| iso(*t, None)).collect();
    let got: Vec<&str> = time.iter().filter_map(Value::as_str).collect();
    if got != want {
        return Err(format!(
            "bucket times differ: got {got:?}, expected {want:?}"
        ));
    }
    if data.len() != expected.len() {
        return Err(format!(
            "{} values for {} times",
            data.len(),
            expected.len()
        ));
    }
    for (v, (t, e)) in data.iter().zip(expected) {
        let v = v.as_f64().ok_or_else(|| format!("not a number: {v}"))?;
        let equal = match aggregation {
            "mean" => (v - e).abs() <= 0.0005 + 1e-9 * e.abs().max(1.0),
            _ => v == written(*e),
        };
        if !equal {
            return Err(format!(
                "bucket {}: got {v}, expected {e} ({aggregation})",
                iso(*t, None)
            ));
        }
    }
    Ok(())
}

#[test]
fn answers_over_http_equal_a_naive_computation() {
    let rig = Rig::start();
    let mut runner = TestRunner::new(RunnerConfig {
        cases: 32,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let result = runner.run(&case(), |case| rig.run_case(case));
    let Rig { rt, site, .. } = rig;
    rt.block_on(site.stop());
    if let Err(e) = result {
        panic!("{e}");
    }
}
