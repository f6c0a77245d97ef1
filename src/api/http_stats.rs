//! Requests served, by transport, method, route template and status, with
//! their duration per route: the middleware that counts them and their
//! `/metrics` collector. Routes are axum's matched templates
//! (`/devices/{device_reference}/measurement`), so the label set stays bounded;
//! requests that matched no route count under `unmatched`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use tokio::time::Instant;

use super::steering::Transport;
use crate::metrics::{Collect, Encoder, Histogram, Kind};

#[derive(Default)]
struct RouteStats {
    /// By (transport, method, status).
    counts: HashMap<(&'static str, &'static str, u16), u64>,
    /// By transport.
    durations: HashMap<&'static str, Histogram>,
}

/// Every route's counters. One short lock per request.
#[derive(Default)]
pub struct HttpStats {
    routes: Mutex<HashMap<String, RouteStats>>,
}

const UNMATCHED: &str = "unmatched";

/// Known methods by name; anything else is `other` (bounded labels).
fn method_label(m: &Method) -> &'static str {
    const KNOWN: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];
    KNOWN
        .into_iter()
        .find(|k| *k == m.as_str())
        .unwrap_or("other")
}

impl HttpStats {
    fn record(
        &self,
        transport: &'static str,
        method: &'static str,
        route: &str,
        status: u16,
        took: std::time::Duration,
    ) {
        // Plain counters; a panic elsewhere cannot leave them half-written.
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let r = match routes.get_mut(route) {
            Some(r) => r,
            None => routes.entry(route.to_string()).or_default(),
        };
        *r.counts.entry((transport, method, status)).or_default() += 1;
        r.durations
            .entry(transport)
            .or_default()
            .observe_duration(took);
    }
}

/// Outermost layer: counts every request with the status it finally got.
pub async fn count_requests(
    State(stats): State<Arc<HttpStats>>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let transport = req.extensions().get::<Transport>().map_or("http", |t| t.0);
    let method = method_label(req.method());
    let response = next.run(req).await;
    let route = route.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
    stats.record(
        transport,
        method,
        route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

impl Collect for HttpStats {
    fn collect(&self, out: &mut Encoder) {
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<&String> = routes.keys().collect();
        names.sort();
        let mut requests = out.family(
            "sitegate_http_requests_total",
            Kind::Counter,
            "API requests answered, by transport (http, mqtt), method, route and status.",
        );
        for name in &names {
            let mut counts: Vec<_> = routes[*name].counts.iter().collect();
            counts.sort();
            for ((transport, method, status), n) in counts {
                requests.sample(
                    &[
                        ("transport", transport),
                        ("method", method),
                        ("route", name.as_str()),
                        ("status", &status.to_string()),
                    ],
                    *n as f64,
                );
            }
        }
        let mut durations = out.family(
            "sitegate_http_request_duration_seconds",
            Kind::Histogram,
            "Time to answer an API request, by transport and route.",
        );
        for name in &names {
            let mut per: Vec<_> = routes[*name].durations.iter().collect();
            per.sort_by_key(|(t, _)| *t);
            for (transport, h) in per {
                durations.histogram(
                    &[("transport", transport), ("route", name.as_str())],
                    &h.snapshot(),
                );
            }
        }
    }
}
