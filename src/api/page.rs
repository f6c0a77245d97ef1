//! The technician page: `GET /` and its assets under `/page/`, embedded in the
//! binary so that a controller without any network beyond the site LAN serves it.
//!
//! The page holds no data of its own; it calls the same API as every partner,
//! with the token the technician enters (or none with `auth = "none"`). So these
//! routes need no token, like `/healthz`. Every answer carries an `ETag` (a hash
//! of the asset, so an upgrade of the agent changes it), `Cache-Control:
//! no-cache` (the browser revalidates, and gets a 304 while unchanged), and a
//! strict Content-Security-Policy: only this origin's scripts, styles, images and
//! API; no inline script or style, no frames, no forms posting anywhere.
//!
//! This file must not know about any other endpoint. The assets live in `web/`
//! (hand-written HTML, CSS and JavaScript modules; no build step).

use std::sync::LazyLock;

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::extract::ApiPath;
use super::route_table::Group;

/// The policy sent with every asset. `connect-src 'self'` is the API;
/// `style-src 'self'` without `'unsafe-inline'` means the page sets no style
/// attributes (SVG colours come from classes in `style.css`).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// `index.html`'s place in [`ASSETS`].
const INDEX: usize = 0;

/// Every file of `web/`. `index.html` (first) is also served at `/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: HTML,
        body: include_bytes!("../../web/index.html"),
    },
    Asset {
        name: "style.css",
        content_type: CSS,
        body: include_bytes!("../../web/style.css"),
    },
    Asset {
        name: "app.js",
        content_type: JS,
        body: include_bytes!("../../web/app.js"),
    },
    Asset {
        name: "api.js",
        content_type: JS,
        body: include_bytes!("../../web/api.js"),
    },
    Asset {
        name: "format.js",
        content_type: JS,
        body: include_bytes!("../../web/format.js"),
    },
    Asset {
        name: "live.js",
        content_type: JS,
        body: include_bytes!("../../web/live.js"),
    },
    Asset {
        name: "chart.js",
        content_type: JS,
        body: include_bytes!("../../web/chart.js"),
    },
    Asset {
        name: "energy.js",
        content_type: JS,
        body: include_bytes!("../../web/energy.js"),
    },
    Asset {
        name: "held.js",
        content_type: JS,
        body: include_bytes!("../../web/held.js"),
    },
    Asset {
        name: "sitechart.js",
        content_type: JS,
        body: include_bytes!("../../web/sitechart.js"),
    },
    Asset {
        name: "steering.js",
        content_type: JS,
        body: include_bytes!("../../web/steering.js"),
    },
    Asset {
        name: "icon.svg",
        content_type: SVG,
        body: include_bytes!("../../web/icon.svg"),
    },
];

/// One strong ETag per asset (same order as [`ASSETS`]): 16 bytes of SHA-256.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            let tag = format!("\"{}\"", hex::encode(&digest[..16]));
            // Quotes and hex digits are always a valid header value.
            HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"0\""))
        })
        .collect()
});

/// `GET /` and `GET /page/{file}` (HEAD too), registered into `group`.
pub fn routes<S: Clone + Send + Sync + 'static>(group: Group<'_, S>) -> Router<S> {
    group
        .get("/", index)
        .get("/page/{file}", asset)
        .into_router()
}

async fn index(headers: HeaderMap) -> Response {
    serve(INDEX, &headers)
}

async fn asset(ApiPath(file): ApiPath<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().position(|a| a.name == file) {
        Some(i) => serve(i, &headers),
        None => ApiError::not_found(&format!("/page/{file}")).into_response(),
    }
}

fn serve(i: usize, request: &HeaderMap) -> Response {
    let asset = &ASSETS[i];
    let etag = ETAGS[i].clone();
    let mut response = if matches(request, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, etag);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// `If-None-Match` lists `etag` (weak comparison, as RFC 9110 asks for it) or is `*`.
fn matches(request: &HeaderMap, etag: &HeaderValue) -> bool {
    let ours = etag.as_bytes();
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t).as_bytes() == ours)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::super::route_table::Access;
    use super::*;

    async fn get(path: &str, if_none_match: Option<&str>) -> Response {
        let mut req = Request::get(path);
        if let Some(tag) = if_none_match {
            req = req.header(header::IF_NONE_MATCH, tag);
        }
        let mut list = Vec::new();
        routes::<()>(Group::new(&mut list, Access::Page))
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    fn header(r: &Response, name: HeaderName) -> &str {
        r.headers().get(name).unwrap().to_str().unwrap()
    }

    #[tokio::test]
    async fn index_is_html_with_a_strict_policy() {
        let r = get("/", None).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, header::CONTENT_TYPE), HTML);
        assert_eq!(header(&r, header::CACHE_CONTROL), "no-cache");
        let csp = header(&r, header::CONTENT_SECURITY_POLICY);
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        let body = r.into_body().collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&body).unwrap();
        assert!(text.starts_with("<!doctype html>"), "{text}");
    }

    #[tokio::test]
    async fn every_asset_has_its_type_and_an_etag() {
        for a in ASSETS {
            let r = get(&format!("/page/{}", a.name), None).await;
            assert_eq!(r.status(), StatusCode::OK, "{}", a.name);
            assert_eq!(header(&r, header::CONTENT_TYPE), a.content_type);
            assert!(header(&r, header::ETAG).starts_with('"'), "{}", a.name);
        }
        let js = get("/page/app.js", None).await;
        assert_eq!(header(&js, header::CONTENT_TYPE), JS);
    }

    #[tokio::test]
    async fn a_known_etag_answers_not_modified() {
        let first = get("/page/style.css", None).await;
        let tag = header(&first, header::ETAG).to_string();
        let again = get("/page/style.css", Some(&format!("\"x\", W/{tag}"))).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header(&again, header::ETAG), tag);
        let body = again.into_body().collect().await.unwrap().to_bytes();
        assert!(body.is_empty());
        let other = get("/page/style.css", Some("\"other\"")).await;
        assert_eq!(other.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn an_unknown_asset_is_a_problem() {
        let r = get("/page/nope.js", None).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(header(&r, header::CONTENT_TYPE), super::super::PROBLEM_JSON);
    }

    #[test]
    fn scripts_and_styles_are_never_inline() {
        // The policy forbids inline code; the page must not rely on it.
        assert_eq!(ASSETS[INDEX].name, "index.html");
        let html = std::str::from_utf8(ASSETS[INDEX].body).unwrap();
        assert!(!html.contains("<script>"), "inline script in index.html");
        assert!(!html.contains("<style"), "inline style in index.html");
        assert!(!html.contains(" style="), "style attribute in index.html");
        for a in ASSETS.iter().filter(|a| a.content_type == JS) {
            let js = std::str::from_utf8(a.body).unwrap();
            assert!(
                !js.contains("innerHTML"),
                "{} builds HTML from strings",
                a.name
            );
            assert!(!js.contains("eval("), "{} uses eval", a.name);
        }
    }
}
