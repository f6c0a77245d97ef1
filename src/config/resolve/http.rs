//! `[http]`: listen addresses, authentication and tokens, limits. Collects
//! problems; never stops early.

use std::collections::HashSet;
use std::net::SocketAddr;

use super::super::problem::Problem;
use super::super::raw::{RateLimitConfig, RawHttp, RawToken};
use super::super::values::AuthMode;
use super::super::{HttpConfig, TokenConfig};

/// `survived`: problems `check-config` and `config.put` refuse and `run`
/// survives (`Config::file_problems`).
pub(super) fn resolve_http(
    raw: RawHttp,
    problems: &mut Vec<Problem>,
    survived: &mut Vec<Problem>,
) -> HttpConfig {
    let mut listen = Vec::new();
    for (i, addr) in raw.listen.iter().enumerate() {
        match addr.parse::<SocketAddr>() {
            Ok(a) => listen.push(a),
            Err(_) => problems.push(Problem::new(
                format!("http.listen[{i}]"),
                format!("{addr:?} is not an IP address with a port, e.g. \"0.0.0.0:8080\""),
            )),
        }
    }
    if raw.listen.is_empty() && raw.https_listen.is_empty() {
        problems.push(Problem::new(
            "http.listen",
            "at least one address is needed (here or in https_listen)",
        ));
    }
    let https_listen = addresses("http.https_listen", &raw.https_listen, problems);
    let tls = super::http_tls::resolve_tls(raw.tls.as_ref(), &raw.tls_names, problems);
    match (&tls, raw.https_listen.is_empty()) {
        (Some(_), true) => problems.push(Problem::new(
            "http.https_listen",
            "tls is set but no HTTPS address is: add https_listen = [\"0.0.0.0:8443\"]",
        )),
        (None, false) => problems.push(Problem::new(
            "http.tls",
            "https_listen is set but no certificate: tls = \"self-signed\", or tls = { cert_file = \"...\", key_file = \"...\" }",
        )),
        _ => {}
    }
    if raw.auth == AuthMode::None {
        loopback_only(&listen, &https_listen, problems);
    }
    if raw.auth == AuthMode::Tokens && !raw.allow_plain_tokens {
        plain_tokens_beyond_loopback(&listen, survived);
    }
    let tokens = tokens(raw.tokens, problems);
    check_limits(&raw.rate_limit, raw.request_timeout_ms, problems);
    HttpConfig {
        listen,
        auth: raw.auth,
        tokens,
        metrics: raw.metrics,
        request_timeout_ms: raw.request_timeout_ms,
        rate_limit: raw.rate_limit,
        https_listen,
        tls,
        allow_plain_tokens: raw.allow_plain_tokens,
    }
}

/// With `auth = "none"`: a problem for every listener (plain or HTTPS)
/// beyond loopback.
fn loopback_only(listen: &[SocketAddr], https_listen: &[SocketAddr], problems: &mut Vec<Problem>) {
    let every = listen
        .iter()
        .map(|a| ("listen", a))
        .chain(https_listen.iter().map(|a| ("https_listen", a)));
    let mut at = (0usize, 0usize);
    for (key, a) in every {
        let i = if key == "listen" {
            &mut at.0
        } else {
            &mut at.1
        };
        if !a.ip().is_loopback() {
            problems.push(Problem::new(
                format!("http.{key}[{i}]"),
                format!(
                    "auth = \"none\" is only allowed when every listener is on loopback, but {a} is reachable from the network; use auth = \"tokens\""
                ),
            ));
        }
        *i += 1;
    }
}

/// With tokens over plain HTTP: a problem for every plain listener beyond
/// loopback. Survived by `run`: a site upgraded onto such a config keeps
/// running (tokens sent to that listener from the network are answered 401).
fn plain_tokens_beyond_loopback(listen: &[SocketAddr], survived: &mut Vec<Problem>) {
    for (i, a) in listen.iter().enumerate() {
        if !a.ip().is_loopback() {
            survived.push(Problem::new(
                format!("http.listen[{i}]"),
                format!(
                    "{a} serves plain HTTP beyond loopback, where tokens would cross the network in clear: serve the LAN over HTTPS (https_listen and tls) and keep listen on loopback, or set allow_plain_tokens = true"
                ),
            ));
        }
    }
}

/// `http.tokens`: each named once, with a scope at least and its SHA-256;
/// the tokens whose hash reads.
fn tokens(raw: Vec<RawToken>, problems: &mut Vec<Problem>) -> Vec<TokenConfig> {
    let mut names = HashSet::new();
    let mut tokens = Vec::new();
    for (i, t) in raw.into_iter().enumerate() {
        let path = format!("http.tokens[{i}]");
        if t.name.trim().is_empty() {
            problems.push(Problem::new(format!("{path}.name"), "must not be empty"));
        } else if !names.insert(t.name.clone()) {
            problems.push(Problem::new(
                format!("{path}.name"),
                format!("duplicate token name {:?}", t.name),
            ));
        }
        if t.scopes.is_empty() {
            problems.push(Problem::new(
                format!("{path}.scopes"),
                "must name at least one scope (read, steer, admin)",
            ));
        }
        let mut hash = [0u8; 32];
        match hex::decode_to_slice(t.sha256.trim(), &mut hash) {
            Ok(()) => tokens.push(TokenConfig {
                name: t.name,
                sha256: hash,
                scopes: t.scopes,
            }),
            Err(_) => problems.push(Problem::new(
                format!("{path}.sha256"),
                format!(
                    "{:?} is not 64 hex characters (the SHA-256 of the token; `sitegate token new` prints it)",
                    t.sha256
                ),
            )),
        }
    }
    tokens
}

/// `http.rate_limit` and `http.request_timeout_ms` within their bounds.
fn check_limits(
    rate_limit: &RateLimitConfig,
    request_timeout_ms: u64,
    problems: &mut Vec<Problem>,
) {
    if !(rate_limit.requests_per_s.is_finite() && rate_limit.requests_per_s >= 0.0) {
        problems.push(Problem::new(
            "http.rate_limit.requests_per_s",
            format!(
                "must be a number >= 0 (0 turns the limit off), found {}",
                rate_limit.requests_per_s
            ),
        ));
    }
    if rate_limit.requests_per_s > 0.0 && rate_limit.burst == 0 {
        problems.push(Problem::new(
            "http.rate_limit.burst",
            "must be at least 1 while requests_per_s is above 0, found 0",
        ));
    }
    if !(100..=600_000).contains(&request_timeout_ms) {
        problems.push(Problem::new(
            "http.request_timeout_ms",
            format!("must be 100 to 600000, found {request_timeout_ms}"),
        ));
    }
}

fn addresses(key: &str, raw: &[String], problems: &mut Vec<Problem>) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for (i, addr) in raw.iter().enumerate() {
        match addr.parse::<SocketAddr>() {
            Ok(a) => out.push(a),
            Err(_) => problems.push(Problem::new(
                format!("{key}[{i}]"),
                format!("{addr:?} is not an IP address with a port, e.g. \"0.0.0.0:8443\""),
            )),
        }
    }
    out
}
