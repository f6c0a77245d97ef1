//! Tokens in clear: a plain-HTTP request from beyond loopback that carries an
//! `Authorization` header is answered 401 before any route (or the token
//! check, or a log line) sees it; the `detail` names the HTTPS address to use
//! instead. The HTTP server puts this layer on connections it accepts on a
//! plain listener from an address other than loopback
//! (`http_server/serve.rs`), unless `http.allow_plain_tokens` is set.
//!
//! It looks at whether the header is there, never at its value.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::header::{AUTHORIZATION, HOST};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::Router;

use super::ApiError;

/// `router` with tokens refused in clear; `https` are the HTTPS listeners'
/// addresses (empty when there are none).
pub fn refuse_tokens_in_clear(router: Router, https: &[SocketAddr]) -> Router {
    let https: Arc<[SocketAddr]> = https.into();
    router.layer(middleware::from_fn(
        move |req: axum::extract::Request, next: middleware::Next| {
            let https = https.clone();
            async move {
                if !req.headers().contains_key(AUTHORIZATION) {
                    return next.run(req).await;
                }
                let host = req
                    .headers()
                    .get(HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string);
                refusal(host.as_deref(), &https)
            }
        },
    ))
}

/// Where the client should send its token: the HTTPS URL on the host it
/// asked for (its `Host` without the port) and the HTTPS port, or the
/// listener's own address when it is bound to one.
pub fn https_url(host: Option<&str>, https: &[SocketAddr]) -> Option<String> {
    let a = https.first()?;
    let port = a.port();
    if !a.ip().is_unspecified() {
        return Some(match a {
            SocketAddr::V4(v4) => format!("https://{}:{port}", v4.ip()),
            SocketAddr::V6(v6) => format!("https://[{}]:{port}", v6.ip()),
        });
    }
    let host = host.unwrap_or("<controller>");
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        format!("[{}]", rest.split(']').next().unwrap_or(rest))
    } else {
        host.split(':').next().unwrap_or(host).to_string()
    };
    Some(format!("https://{name}:{port}"))
}

fn refusal(host: Option<&str>, https: &[SocketAddr]) -> Response {
    let detail = match https_url(host, https) {
        Some(url) => format!(
            "a token is not accepted over plain HTTP from the network, where it crosses in clear: send it over HTTPS, {url} (the token was not checked)"
        ),
        None => "a token is not accepted over plain HTTP from the network, where it crosses in clear, and this controller serves no HTTPS (http.https_listen) (the token was not checked)".to_string(),
    };
    ApiError::unauthorized(detail, false).into_response()
}

#[cfg(test)]
mod tests {
    use super::https_url;

    #[test]
    fn the_https_address_follows_the_host_asked_for() {
        let any: std::net::SocketAddr = "0.0.0.0:8443".parse().expect("addr");
        let one: std::net::SocketAddr = "192.0.2.9:9443".parse().expect("addr");
        assert_eq!(
            https_url(Some("192.0.2.2:8080"), &[any]).as_deref(),
            Some("https://192.0.2.2:8443")
        );
        assert_eq!(
            https_url(Some("[2001:db8::1]:8080"), &[any]).as_deref(),
            Some("https://[2001:db8::1]:8443")
        );
        assert_eq!(
            https_url(Some("ctrl.local"), &[one]).as_deref(),
            Some("https://192.0.2.9:9443")
        );
        assert_eq!(https_url(Some("x"), &[]), None);
    }
}
