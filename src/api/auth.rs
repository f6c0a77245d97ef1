//! Who is calling and what they may do: bearer tokens, scopes, the [`Caller`]
//! extractor and the per-route scope layers.
//!
//! Protected routes sit behind [`require_read`], [`require_steer`] or [`require_admin`] (installed with
//! `route_layer`), which answer 401/403 before any handler runs and leave a
//! [`Caller`] in the request extensions. This file must not know about endpoints
//! and never logs or stores a token's plaintext.

use std::sync::{Arc, RwLock};
use tokio::time::Instant;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::limit::{retry_after_secs, RateLimiter};
use super::steering::Transport;
use super::token::{hash_token, hashes_equal};
use crate::config::{AuthMode, HttpConfig, Scope};

/// The identity of a request: a token's name (or `anonymous` with `auth = "none"`)
/// and its scopes. Steering records `name()` in its audit log.
///
/// Handlers take it as an extractor. It is present on every route behind a scope
/// layer. In-process callers (the MQTT RPC bridge) may insert a `Caller` into the
/// request extensions before handing the request to the router; the scope layers
/// then trust it instead of reading the `Authorization` header. Clients over HTTP
/// cannot set extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    name: Arc<str>,
    scopes: ScopeSet,
}

impl Caller {
    /// A caller with every scope, as `auth = "none"` grants (only on
    /// loopback listeners).
    pub fn anonymous() -> Self {
        Self::new("anonymous", &[Scope::Read, Scope::Steer, Scope::Admin])
    }

    pub fn new(name: &str, scopes: &[Scope]) -> Self {
        Self {
            name: name.into(),
            scopes: ScopeSet::of(scopes),
        }
    }

    /// The token name, or `anonymous`.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.has(scope)
    }

    /// 403 `forbidden` unless the caller has `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.has(scope) {
            return Ok(());
        }
        let held: Vec<&str> = [Scope::Read, Scope::Steer, Scope::Admin]
            .into_iter()
            .filter(|s| self.has(*s))
            .map(Scope::as_str)
            .collect();
        Err(ApiError::forbidden(format!(
            "token {:?} lacks the {:?} scope that this request needs (it has: {})",
            self.name(),
            scope.as_str(),
            held.join(", ")
        )))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            // A route that takes a Caller but was mounted without a scope layer.
            ApiError::internal("this route is missing its authorization layer")
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ScopeSet(u8);

impl ScopeSet {
    const fn bit(scope: Scope) -> u8 {
        match scope {
            Scope::Read => 1,
            Scope::Steer => 2,
            Scope::Admin => 4,
        }
    }
    fn of(scopes: &[Scope]) -> Self {
        Self(scopes.iter().fold(0, |acc, s| acc | Self::bit(*s)))
    }
    fn has(self, scope: Scope) -> bool {
        self.0 & Self::bit(scope) != 0
    }
}

struct Entry {
    caller: Caller,
    sha256: [u8; 32],
}

struct Table {
    mode: AuthMode,
    tokens: Vec<Entry>,
}

impl Table {
    fn from_config(http: &HttpConfig) -> Self {
        Self {
            mode: http.auth,
            tokens: http
                .tokens
                .iter()
                .map(|t| Entry {
                    caller: Caller::new(&t.name, &t.scopes),
                    sha256: t.sha256,
                })
                .collect(),
        }
    }
}

/// The token table and the per-caller rate limits, swappable at run time
/// (SIGHUP reload) without blocking requests for longer than an `Arc` clone.
pub struct Auth {
    table: RwLock<Arc<Table>>,
    limiter: RateLimiter,
}

impl Auth {
    pub fn new(http: &HttpConfig) -> Self {
        Self {
            table: RwLock::new(Arc::new(Table::from_config(http))),
            limiter: RateLimiter::new(http.rate_limit),
        }
    }

    /// Accepts no token at all (mode `tokens`, none configured): what
    /// [`routes`](super::routes) builds its throwaway scope layers with.
    pub fn deny_all() -> Self {
        Self {
            table: RwLock::new(Arc::new(Table {
                mode: AuthMode::Tokens,
                tokens: Vec::new(),
            })),
            limiter: RateLimiter::new(crate::config::RateLimitConfig::default()),
        }
    }

    /// Replaces the mode, tokens and rate limit; requests already past the
    /// check keep their caller.
    pub fn reload(&self, http: &HttpConfig) {
        let table = Arc::new(Table::from_config(http));
        // A poisoned lock only means a panic elsewhere while swapping an Arc;
        // the Arc itself is always whole.
        *self.table.write().unwrap_or_else(|e| e.into_inner()) = table;
        if self.limiter.limit() != http.rate_limit {
            self.limiter.set_limit(http.rate_limit);
        }
    }

    /// 429 `rate_limited` when `caller` has used up its requests for now.
    pub fn check_rate(&self, caller: &Caller) -> Result<(), ApiError> {
        self.limiter
            .check(caller.name(), Instant::now())
            .map_err(|wait| {
                let secs = retry_after_secs(wait);
                let l = self.limiter.limit();
                ApiError::rate_limited(
                    format!(
                        "token {:?} made more than {} requests in a burst or {} per second; retry in {secs} s",
                        caller.name(),
                        l.burst,
                        l.requests_per_s
                    ),
                    secs,
                )
            })
    }

    fn current(&self) -> Arc<Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads `Authorization: Bearer <token>`. 401 when missing, malformed or
    /// unknown; with `auth = "none"` every request is [`Caller::anonymous`].
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let table = self.current();
        if table.mode == AuthMode::None {
            return Ok(Caller::anonymous());
        }
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(ApiError::unauthorized(
                "send exactly one header Authorization: Bearer <token>",
                false,
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized(
                    "the Authorization header must read \"Bearer <token>\"",
                    false,
                )
            })?;
        Self::check(&table, token)
    }

    /// Checks a token given outside a header (the MQTT RPC payload).
    pub fn authenticate_token(&self, token: &str) -> Result<Caller, ApiError> {
        let table = self.current();
        if table.mode == AuthMode::None {
            return Ok(Caller::anonymous());
        }
        Self::check(&table, token)
    }

    fn check(table: &Table, token: &str) -> Result<Caller, ApiError> {
        let hash = hash_token(token);
        // Visit every entry so the time taken does not depend on which one matched.
        let mut found = None;
        for entry in &table.tokens {
            if hashes_equal(&entry.sha256, &hash) {
                found = Some(&entry.caller);
            }
        }
        found
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("the bearer token is not known", true))
    }
}

/// Route layer for routes that need the `read` scope:
/// `.route_layer(middleware::from_fn_with_state(auth, require_read))`.
pub async fn require_read(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    authorize(&auth, Scope::Read, req, next).await
}

/// Route layer for routes that need the `steer` scope (every steering change).
pub async fn require_steer(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    authorize(&auth, Scope::Steer, req, next).await
}

/// Route layer for the `/admin/...` routes (the operations channel).
pub async fn require_admin(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    authorize(&auth, Scope::Admin, req, next).await
}

async fn authorize(auth: &Auth, scope: Scope, mut req: Request, next: Next) -> Response {
    let caller = match req.extensions().get::<Caller>() {
        Some(caller) => caller.clone(),
        None => match auth.authenticate(req.headers()) {
            Ok(caller) => caller,
            Err(e) => return e.into_response(),
        },
    };
    if let Err(e) = caller.require(scope) {
        return e.into_response();
    }
    // Over HTTP only: the MQTT bridge marks its requests with a transport.
    if req.extensions().get::<Transport>().is_none() {
        if let Err(e) = auth.check_rate(&caller) {
            return e.into_response();
        }
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}
