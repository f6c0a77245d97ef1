//! The HTTP server of the local API: binds its listeners, plain and HTTPS
//! with the certificate in service (`tls.rs`); bounds the connections
//! (`bounds.rs`, `connections.rs`, `over_share.rs`); serves a router on each
//! connection with a deadline for its request head (`serve.rs`), and answers
//! hyper's own refusals of a head as problem+json (`head_errors.rs`).
//!
//! It serves the router it is given: it must not build one, know what a
//! route does, or start anything but its accept loops, connection tasks and
//! the renewal of a self-signed certificate.

use std::net::SocketAddr;

mod bounds;
mod connections;
mod head_errors;
mod over_share;
mod serve;
mod tls;

pub use bounds::{MAX_CONNECTIONS, MAX_PER_CLIENT, RESERVE_CONNECTIONS};
pub use connections::Connections;
pub use serve::{serve_router, Listener, HEAD_TIMEOUT};
pub use tls::listeners;

/// Why the HTTP server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot serve HTTPS: {0}")]
    Https(#[from] crate::https::HttpsError),
}
