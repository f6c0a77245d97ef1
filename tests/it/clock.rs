//! A controller whose wall clock starts wrong and steps: the real binary
//! under libfaketime (Debian's `faketime`), the wall clock moved by rewriting
//! libfaketime's timestamp file while the monotonic clock runs untouched.
//!
//! Where libfaketime is not installed the test says so and passes, unless
//! `SITEGATE_REQUIRE_FAKETIME=1` (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::process::{start_sim, AgentProcess};
use crate::common::site::{READ_TOKEN, STEER_TOKEN};
use crate::common::wait_for;
use crate::steering_support::TestSite;
use reqwest::Client;
use serde_json::{json, Value};
use sitegate::model::time::now_ms;

const DAY_MS: i64 = 86_400_000;

/// libfaketime's multi-threaded library, where Debian puts it.
fn libfaketime() -> Option<PathBuf> {
    let found = std::fs::read_dir("/usr/lib")
        .ok()?
        .flatten()
        .map(|e| e.path().join("faketime").join("libfaketimeMT.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1")])
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            !crate::common::required("FAKETIME"),
            "SITEGATE_REQUIRE_FAKETIME=1 but libfaketime is not installed (apt-get install faketime)"
        );
        #[allow(clippy::print_stderr)]
        {
            eprintln!("clock: skipped: libfaketime is not installed (Debian package faketime)");
        }
    }
    found
}

struct Faked {
    agent: AgentProcess,
    offset_file: PathBuf,
    synced_file: PathBuf,
    base: String,
    http: Client,
}

impl Faked {
    /// Moves the agent's wall clock to `offset` from the true time
    /// (libfaketime's syntax: `+30d`, `-40d`, `+0`).
    fn set_offset(&self, offset: &str) {
        std::fs::write(&self.offset_file, offset).expect("offset written");
    }

    /// What systemd-timesyncd's file says: synchronised or not.
    fn set_synchronised(&self, on: bool) {
        if on {
            std::fs::write(&self.synced_file, b"").expect("synchronised");
        } else {
            let _ = std::fs::remove_file(&self.synced_file);
        }
    }

    /// Status 0 while the agent does not listen yet.
    async fn get(&self, path: &str) -> (u16, Value) {
        let sent = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(READ_TOKEN)
            .send()
            .await;
        let Ok(r) = sent else {
            return (0, Value::Null);
        };
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    }

    /// The PV inverter's latest power and its timestamp (epoch ms).
    async fn latest_ts(&self) -> Option<i64> {
        let (s, v) = self
            .get("/devices/dvc_pv/measurement?property=activePower")
            .await;
        if s != 200 {
            return None;
        }
        v["timestamp"].as_i64()
    }

    /// How many 1 s buckets of PV power hold samples from `start` to `end`.
    async fn buckets(&self, start: i64, end: i64) -> usize {
        let fmt = sitegate::model::time::format_utc;
        let body = json!({
            "property": "activePower",
            "range": {"type": "absolute", "start": fmt(start), "end": fmt(end)},
            "resolution": {"value": 1, "unit": "s"},
        });
        let r = self
            .http
            .post(format!(
                "{}/devices/dvc_pv/measurements/time-series",
                self.base
            ))
            .bearer_auth(READ_TOKEN)
            .json(&body)
            .send()
            .await
            .expect("answer");
        assert_eq!(r.status().as_u16(), 200);
        let v: Value = r.json().await.expect("json");
        v["data"].as_array().map_or(0, Vec::len)
    }

    async fn post_discharge(&self, valid_until: i64) -> (u16, Value) {
        let body = json!({
            "setting": {"value": 2, "unit": "kW"},
            "validUntil": valid_until,
        });
        let r = self
            .http
            .post(format!("{}/sites/ste_test/steering/ess", self.base))
            .bearer_auth(STEER_TOKEN)
            .json(&body)
            .send()
            .await
            .expect("answer");
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in\n{text}"))
}

async fn start_faked(lib: &Path, offset: &str) -> (Faked, sitegate::sim::SimSite) {
    let port = crate::common::free_port().port();
    let dir = tempfile::tempdir().expect("dir");
    let synced_file = dir.path().join("synchronized");
    let site = || {
        TestSite::small()
            .http_key("listen", vec![format!("127.0.0.1:{port}")])
            .section_key(&["clock"], "sync_source", "timesyncd")
            .section_key(
                &["clock"],
                "timesync_file",
                synced_file.display().to_string(),
            )
    };
    let sim = start_sim(&site().text()).await;
    let config = site().write_for(&sim);
    let offset_file = config.dir.path().join("faketime");
    std::fs::write(&offset_file, offset).expect("offset");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sitegate"));
    cmd.arg("run")
        .arg("--config")
        .arg(&config.file)
        .env("LD_PRELOAD", lib)
        .env("FAKETIME_TIMESTAMP_FILE", &offset_file)
        // Read the file again at most every second.
        .env("FAKETIME_CACHE_DURATION", "1")
        // The monotonic clock runs true, as on a real controller.
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("DONT_FAKE_MONOTONIC", "1");
    let agent = AgentProcess::run(config, cmd);
    let faked = Faked {
        agent,
        offset_file,
        synced_file,
        base: format!("http://127.0.0.1:{port}"),
        http: crate::common::http_client().build().expect("http client"),
    };
    // Keep the temporary folder of the timesyncd file alive with the test.
    std::mem::forget(dir);
    (faked, sim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_that_starts_ahead_then_steps_both_ways_is_followed() {
    let Some(lib) = libfaketime() else { return };
    let true_start = now_ms();
    let (agent, sim) = start_faked(&lib, "+30d").await;
    let f = &agent;

    // 30 days ahead, not synchronised: samples carry the wrong time, /readyz
    // says why, steering times are compared with that clock and the answer
    // names it.
    let ahead = wait_for("a sample", Duration::from_secs(20), || async {
        f.latest_ts().await
    })
    .await;
    assert!(
        (ahead - now_ms() - 30 * DAY_MS).abs() < 60_000,
        "ahead {ahead}\n{}",
        f.agent.log()
    );
    // Ready once every device was polled: the first sample may be the
    // inverter's, before the battery's first poll.
    let v = wait_for("ready", Duration::from_secs(20), || async {
        let (s, v) = f.get("/readyz").await;
        (s == 200).then_some(v)
    })
    .await;
    assert!(
        v["degraded"].to_string().contains("not synchronised"),
        "{v}"
    );
    assert_eq!(
        metric(&f.metrics().await, "sitegate_clock_synchronised"),
        0.0
    );
    let (s, v) = f.post_discharge(now_ms() + 600_000).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["code"], "expired", "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("clock is not synchronised"),
        "{v}"
    );

    // NTP syncs and steps the clock back to the true time: one step counted
    // and logged, and the latest value is the next poll's, not the one
    // stamped 30 days ahead.
    f.set_synchronised(true);
    f.set_offset("+0");
    wait_for(
        "the latest value by the true time",
        Duration::from_secs(10),
        || async {
            f.latest_ts()
                .await
                .filter(|ts| (ts - now_ms()).abs() < 10_000)
        },
    )
    .await;
    let m = wait_for("the step counted", Duration::from_secs(5), || async {
        let m = f.metrics().await;
        (metric(&m, "sitegate_clock_steps_total{direction=\"backward\"}") == 1.0).then_some(m)
    })
    .await;
    let last = metric(&m, "sitegate_clock_last_step_seconds");
    assert!((last + 30.0 * 86_400.0).abs() < 60.0, "{last}");
    assert_eq!(metric(&m, "sitegate_clock_synchronised"), 1.0);
    assert!(
        f.agent.log().contains("the wall clock stepped backward by"),
        "{}",
        f.agent.log()
    );
    let (s, v) = f.get("/readyz").await;
    assert_eq!(s, 200, "{v}");
    assert!(!v.to_string().contains("synchronised"), "{v}");
    // The samples stamped 30 days ahead were moved to the times they were
    // taken: none is left ahead, and they are where they belong.
    wait_for("the samples moved", Duration::from_secs(10), || async {
        f.agent
            .log()
            .contains("samples stamped before the clock step moved")
            .then_some(())
    })
    .await;
    let ahead_from = true_start + 30 * DAY_MS - 60_000;
    assert_eq!(f.buckets(ahead_from, ahead_from + 3_600_000).await, 0);
    assert!(f.buckets(true_start - 60_000, now_ms()).await >= 2);

    // A signal valid for 10 minutes of true time is accepted now.
    let (s, v) = f.post_discharge(now_ms() + 600_000).await;
    assert_eq!(s, 200, "{v}");
    let active = |v: &Value| !v["energyStorageSetting"].is_null();
    let (_, st) = f.get("/sites/ste_test/steering").await;
    assert!(active(&st), "{st}");

    // A wrong step forward by a day: the signal's validUntil has passed by
    // that clock, so the site goes to its fallback at once, never later.
    f.set_offset("+1d");
    wait_for(
        "the fallback after the step",
        Duration::from_secs(10),
        || async {
            let (_, st) = f.get("/sites/ste_test/steering").await;
            (!active(&st)).then_some(())
        },
    )
    .await;
    wait_for(
        "the forward step counted",
        Duration::from_secs(5),
        || async {
            let m = f.metrics().await;
            (metric(&m, "sitegate_clock_steps_total{direction=\"forward\"}") == 1.0).then_some(())
        },
    )
    .await;
    wait_for(
        "the latest value by the new time",
        Duration::from_secs(10),
        || async {
            f.latest_ts()
                .await
                .filter(|ts| (ts - now_ms() - DAY_MS).abs() < 10_000)
        },
    )
    .await;
    drop(agent);
    sim.shutdown().await;
}
