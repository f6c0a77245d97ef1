//! Real requests to a running agent, each answer checked against the document
//! and recorded, so a test can tell which documented answers it saw.

use std::collections::BTreeSet;

use reqwest::header::CONTENT_TYPE;
use reqwest::Method;
use serde_json::Value;

use super::{check_answer, template_of, Answer};

/// A request body.
pub enum Body {
    None,
    Json(Value),
    /// Raw bytes with this content type (415 and 413 cases, broken JSON).
    Raw(&'static str, String),
}

/// Sends requests to `base` and checks each answer against `doc`.
pub struct Checker<'a> {
    pub doc: &'a Value,
    pub base: String,
    pub http: reqwest::Client,
    /// `(method, template, status)` of every checked answer.
    pub seen: BTreeSet<(String, String, u16)>,
}

impl<'a> Checker<'a> {
    pub fn new(doc: &'a Value, base: &str) -> Self {
        Self {
            doc,
            base: base.to_string(),
            // A connection per request: the server closes a connection whose
            // body it did not read (413, 401 before the body), and a pooled
            // connection it closed would fail the next request.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("an HTTP client"),
            seen: BTreeSet::new(),
        }
    }

    /// Sends the request, asserts the status is `expect`, checks the answer
    /// against the document, and returns the body (parsed when JSON).
    pub async fn expect(
        &mut self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Body,
        expect: u16,
    ) -> Value {
        let (status, answer) = self.send(method.clone(), path, token, headers, body).await;
        assert_eq!(
            status, expect,
            "{method} {path}: expected {expect}, answered {status}: {answer}"
        );
        answer
    }

    /// Sends the request, checks the answer against the document (whatever
    /// its status), and returns the status and the body (parsed when JSON).
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Body,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        req = match body {
            Body::None => req,
            Body::Json(v) => req.json(&v),
            Body::Raw(content_type, text) => req.header(CONTENT_TYPE, content_type).body(text),
        };
        let resp = req.send().await.expect("the agent answers");
        let answer = Answer {
            status: resp.status().as_u16(),
            content_type: resp
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            headers: resp.headers().clone(),
            body: resp.text().await.expect("a body"),
        };
        let route = path.split('?').next().unwrap_or(path);
        let template = template_of(self.doc, route)
            .unwrap_or_else(|| panic!("{method} {path}: no documented path matches"));
        if let Err(e) = check_answer(self.doc, method.as_str(), template, &answer) {
            panic!("{path}: {e}");
        }
        self.seen
            .insert((method.to_string(), template.to_string(), answer.status));
        let status = answer.status;
        let body = serde_json::from_str(&answer.body).unwrap_or(Value::String(answer.body));
        (status, body)
    }

    /// GET with `token`, expecting `status`.
    pub async fn get(&mut self, path: &str, token: Option<&str>, status: u16) -> Value {
        self.expect(Method::GET, path, token, &[], Body::None, status)
            .await
    }

    /// POST a JSON body with `token`, expecting `status`.
    pub async fn post(
        &mut self,
        path: &str,
        token: Option<&str>,
        body: Value,
        status: u16,
    ) -> Value {
        self.expect(Method::POST, path, token, &[], Body::Json(body), status)
            .await
    }

    /// Documented operations (other than those in `skip`) for which no success
    /// or no error answer was checked, e.g. `"GET /devices: no error answer"`.
    pub fn uncovered(&self, skip: &[(&str, &str, &str)]) -> Vec<String> {
        let mut out = Vec::new();
        for op in super::operations(self.doc) {
            let statuses: Vec<u16> = self
                .seen
                .iter()
                .filter(|(m, t, _)| *m == op.method && t == op.path)
                .map(|(_, _, s)| *s)
                .collect();
            for (kind, wanted) in [("success", true), ("error", false)] {
                let skipped = skip
                    .iter()
                    .any(|(m, p, k)| *m == op.method && *p == op.path && *k == kind);
                if !skipped && !statuses.iter().any(|s| (*s < 400) == wanted) {
                    out.push(format!(
                        "{} {}: no {kind} answer checked",
                        op.method, op.path
                    ));
                }
            }
        }
        out
    }
}
