//! Reading the Prometheus text of `GET /metrics` in tests: every sample as
//! `name{labels}` → value, with the checks a scraper would make.

use std::collections::BTreeMap;

/// Samples by their series name with labels as rendered (`a_total{x="y"}`).
#[derive(Debug, Default)]
pub struct Scrape {
    pub samples: BTreeMap<String, f64>,
    pub types: BTreeMap<String, String>,
}

impl Scrape {
    /// Parses the text; panics on a line a Prometheus scraper would refuse.
    pub fn parse(text: &str) -> Scrape {
        let mut s = Scrape::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE line has a kind");
                assert!(
                    s.types.insert(name.to_string(), kind.to_string()).is_none(),
                    "family {name} declared twice"
                );
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("sample line has a value");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            let name = series.split('{').next().unwrap_or(series);
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suf| name.strip_suffix(suf))
                .filter(|base| s.types.get(*base).is_some_and(|k| k == "histogram"))
                .unwrap_or(name);
            assert!(
                s.types.contains_key(family),
                "sample {series} before its # TYPE line"
            );
            assert!(
                s.samples.insert(series.to_string(), value).is_none(),
                "series {series} twice"
            );
        }
        s
    }

    /// The value of one series, e.g. `get("a_total{x=\"y\"}")`.
    pub fn get(&self, series: &str) -> Option<f64> {
        self.samples.get(series).copied()
    }

    /// The sum over every series of `name` whose labels include all of `labels`
    /// (`k="v"` pairs).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(series, _)| {
                let (n, l) = series.split_once('{').unwrap_or((series, ""));
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
            })
            .map(|(_, v)| v)
            .sum()
    }

    pub fn has_family(&self, name: &str) -> bool {
        self.types.contains_key(name)
    }
}

/// `GET {base}/metrics` without a token: 200 in the Prometheus text format,
/// parsed.
pub async fn scrape(http: &reqwest::Client, base: &str) -> Scrape {
    let resp = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    assert_eq!(
        resp.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    Scrape::parse(&resp.text().await.expect("body"))
}
