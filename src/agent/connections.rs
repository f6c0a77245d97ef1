//! The HTTP connection cap: an axum `Listener` over the agent's TCP listeners
//! that accepts a connection only while fewer than [`MAX_CONNECTIONS`] are open
//! (across every listener). At the cap it stops accepting, so further
//! connections wait in the kernel's listen backlog (and are refused by the
//! kernel once that is full) until an open one closes. With HTTP/1 only, one
//! connection runs at most one request at a time, so the cap also bounds the
//! requests in flight.
//!
//! A slot is not held forever by a client that says nothing: a connection on
//! which no byte moves either way for the idle time (twice the request time
//! limit, so a request still running is never cut) is closed.
//!
//! It counts for `/metrics`; it must not look into what a connection carries.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::{Collect, Encoder, Kind};

/// HTTP connections open at once, over every listener.
pub const MAX_CONNECTIONS: usize = 64;

/// The slots shared by every listener, and their counts.
#[derive(Debug)]
pub struct Connections {
    slots: Arc<Semaphore>,
    /// Accepted and not closed yet (a listener waiting in `accept` holds a
    /// slot, not a connection).
    open: AtomicUsize,
    accepted: AtomicU64,
    /// Times a listener found every slot taken.
    at_cap: AtomicU64,
    /// Connections closed because nothing moved on them for `idle`.
    idle_closed: AtomicU64,
    idle: Duration,
}

impl Connections {
    /// Slots for connections that are closed after twice `request_timeout`
    /// without a byte either way.
    pub fn new(request_timeout: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            open: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            at_cap: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
            idle: request_timeout * 2,
        }
    }
}

impl Collect for Connections {
    fn collect(&self, out: &mut Encoder) {
        out.family(
            "sitegate_http_connections",
            Kind::Gauge,
            "HTTP connections open (at most 64; past it new ones wait in the kernel's listen backlog).",
        )
        .sample(&[], self.open.load(Ordering::Relaxed) as f64);
        out.family(
            "sitegate_http_connections_accepted_total",
            Kind::Counter,
            "HTTP connections accepted.",
        )
        .sample(&[], self.accepted.load(Ordering::Relaxed) as f64);
        out.family(
            "sitegate_http_connection_cap_reached_total",
            Kind::Counter,
            "Times every HTTP connection slot was taken when a listener wanted to accept.",
        )
        .sample(&[], self.at_cap.load(Ordering::Relaxed) as f64);
        out.family(
            "sitegate_http_idle_closed_total",
            Kind::Counter,
            "HTTP connections closed because no byte moved on them for twice the request time limit.",
        )
        .sample(&[], self.idle_closed.load(Ordering::Relaxed) as f64);
    }
}

/// One listener under the shared cap.
pub struct Capped {
    listener: TcpListener,
    connections: Arc<Connections>,
}

impl Capped {
    pub fn new(listener: TcpListener, connections: Arc<Connections>) -> Self {
        Self {
            listener,
            connections,
        }
    }
}

impl axum::serve::Listener for Capped {
    type Io = Held;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Held, std::net::SocketAddr) {
        let slots = self.connections.slots.clone();
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                self.connections.at_cap.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    max = MAX_CONNECTIONS,
                    "every HTTP connection slot taken: new connections wait in the listen backlog"
                );
                // The semaphore is never closed.
                match slots.acquire_owned().await {
                    Ok(slot) => slot,
                    Err(_) => unreachable!("the connection semaphore is never closed"),
                }
            }
        };
        loop {
            match self.listener.accept().await {
                Ok((stream, addr)) => {
                    self.connections.accepted.fetch_add(1, Ordering::Relaxed);
                    self.connections.open.fetch_add(1, Ordering::Relaxed);
                    let idle = self.connections.idle;
                    return (
                        Held {
                            stream,
                            _slot: slot,
                            connections: self.connections.clone(),
                            silent_until: Box::pin(tokio::time::sleep(idle)),
                        },
                        addr,
                    );
                }
                Err(e) => accept_failed(e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }
}

/// As axum's own listener: a failed connection is skipped, while running out
/// of file descriptors (or memory) pauses accepting for a moment.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "HTTP accept failed; pausing accepts for a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// An accepted connection holding its slot until it is dropped, closed when
/// nothing moves on it for the idle time.
pub struct Held {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    connections: Arc<Connections>,
    silent_until: Pin<Box<tokio::time::Sleep>>,
}

impl Held {
    /// Bytes moved: the idle time starts again.
    fn moved(&mut self) {
        let at = tokio::time::Instant::now() + self.connections.idle;
        self.silent_until.as_mut().reset(at);
    }

    /// Turns a pending read or write into an error once the connection has been
    /// silent for the idle time (hyper then closes it).
    fn poll_silence<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.silent_until.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.connections.idle_closed.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "HTTP connection idle: closed to free its slot",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Passes `result` on, noting progress; a pending one waits for the silence.
    fn settle<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<T>>,
        progressed: impl Fn(&T) -> bool,
    ) -> Poll<io::Result<T>> {
        match result {
            Poll::Ready(Ok(v)) => {
                if progressed(&v) {
                    self.moved();
                }
                Poll::Ready(Ok(v))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.poll_silence(cx),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.connections.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AsyncRead for Held {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let result = Pin::new(&mut this.stream).poll_read(cx, buf);
        let after = buf.filled().len();
        this.settle(cx, result, |_| after > before)
    }
}

impl AsyncWrite for Held {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.settle(cx, result, |n| *n > 0)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.stream).poll_flush(cx);
        this.settle(cx, result, |_| false)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.settle(cx, result, |n| *n > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
