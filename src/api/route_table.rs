//! The route list: every route is registered through a [`Group`], which adds it
//! to an axum `Router` and records its method, path and access in the same call.
//! The recorded list ([`super::routes`]) is what the OpenAPI document is checked
//! against, so a route cannot be served without being listed.
//!
//! This file must not know any endpoint or handler, and adds no layer: the scope
//! layers stay in `mod.rs`, next to the groups they guard.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use axum::Router;

use crate::config::Scope;

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// No token: `/healthz`, `/readyz`, `/openapi.json`.
    Open,
    /// No token, and not part of the partner API: the technician page and its
    /// assets. The OpenAPI document leaves these out.
    Page,
    /// A bearer token with this scope (any token with `auth = "none"`).
    Token(Scope),
}

/// One registered route. A `GET` route answers `HEAD` too (axum does that); the
/// list names only `GET`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RouteInfo {
    pub method: Method,
    /// The axum path, e.g. `/devices/{device_reference}/measurement` (the same
    /// template syntax as OpenAPI's).
    pub path: &'static str,
    pub access: Access,
}

/// Routes of one access, built into one router and recorded into a shared list.
pub struct Group<'a, S> {
    router: Router<S>,
    access: Access,
    list: &'a mut Vec<RouteInfo>,
}

impl<'a, S: Clone + Send + Sync + 'static> Group<'a, S> {
    pub fn new(list: &'a mut Vec<RouteInfo>, access: Access) -> Self {
        Self {
            router: Router::new(),
            access,
            list,
        }
    }

    pub fn get<H: Handler<T, S>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::GET, path, routing::get(handler))
    }

    pub fn post<H: Handler<T, S>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::POST, path, routing::post(handler))
    }

    pub fn delete<H: Handler<T, S>, T: 'static>(self, path: &'static str, handler: H) -> Self {
        self.add(Method::DELETE, path, routing::delete(handler))
    }

    /// The routes of this group, for `merge` and `route_layer`.
    pub fn into_router(self) -> Router<S> {
        self.router
    }

    fn add(mut self, method: Method, path: &'static str, route: MethodRouter<S>) -> Self {
        self.list.push(RouteInfo {
            method,
            path,
            access: self.access,
        });
        // axum merges a second method on the same path into one method router.
        self.router = self.router.route(path, route);
        self
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn records_each_route_as_it_serves_it() {
        let mut list = Vec::new();
        let router = Group::new(&mut list, Access::Token(Scope::Steer))
            .post("/a/{x}", || async { "post" })
            .delete("/a/{x}", || async { "delete" })
            .into_router();
        let page = Group::<()>::new(&mut list, Access::Page)
            .get("/", || async { "page" })
            .into_router();
        let app = router.merge(page);
        assert_eq!(
            list,
            [
                RouteInfo {
                    method: Method::POST,
                    path: "/a/{x}",
                    access: Access::Token(Scope::Steer)
                },
                RouteInfo {
                    method: Method::DELETE,
                    path: "/a/{x}",
                    access: Access::Token(Scope::Steer)
                },
                RouteInfo {
                    method: Method::GET,
                    path: "/",
                    access: Access::Page
                },
            ]
        );
        for (method, path, status) in [
            (Method::POST, "/a/1", StatusCode::OK),
            (Method::DELETE, "/a/1", StatusCode::OK),
            (Method::GET, "/a/1", StatusCode::METHOD_NOT_ALLOWED),
            (Method::GET, "/", StatusCode::OK),
        ] {
            let req = Request::builder()
                .method(method.clone())
                .uri(path)
                .body(Body::empty())
                .unwrap();
            let r = app.clone().oneshot(req).await.unwrap();
            assert_eq!(r.status(), status, "{method} {path}");
        }
    }
}
