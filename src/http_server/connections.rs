//! The HTTP connection bounds: an accept loop's `Listener` over the agent's TCP
//! listeners that accepts a connection only while a slot is free.
//!
//! - [`MAX_CONNECTIONS`] slots for every request, across every listener. With
//!   HTTP/1 only, one connection runs at most one request at a time, so this
//!   also bounds the requests in flight.
//! - [`RESERVE_CONNECTIONS`] more, taken only when those are all in use: a
//!   connection there is served `/healthz`, `/readyz` and `/metrics` only
//!   (anything else answers 503 `busy`), one request and closed, so that
//!   monitoring sees the agent even while slow clients hold every slot.
//! - At most [`MAX_PER_CLIENT`] connections from one address. A new one past
//!   it takes the place of that address's longest-idle connection, if one is
//!   between requests (a browser keeps a few open for reuse): that one is shut
//!   down gracefully. When all of them are busy (a request in flight, or a
//!   head still arriving, as a slowloris client holds them), the new one gets
//!   a reserve slot while one is free ([`Class::OverShare`]): its request line
//!   is read within the head deadline, and health, readiness and metrics are
//!   served on it; anything else (or no free reserve slot) is answered 503
//!   `busy` at once and closed.
//! - When every slot and the reserve are taken, further connections wait in
//!   the kernel's listen backlog (refused by the kernel once that is full).
//!
//! A slot is not held forever by a slow client: the request head must arrive
//! within a deadline (`http.rs`), and a connection on which no byte moves
//! either way for the idle time (twice the request time limit, so a request
//! still running is never cut) is closed.
//!
//! It counts for `/metrics`; it must not look into what a connection carries.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::bounds::{MAX_CONNECTIONS, MAX_PER_CLIENT, RESERVE_CONNECTIONS};
use crate::metrics::{Collect, Encoder, Kind};

/// Which slots a connection holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A full slot: every route.
    Full,
    /// The reserve: health, readiness and metrics, one request.
    Reserve,
    /// A reserve slot for an address past its share, all busy: its request
    /// line decides between the reserve's routes and 503 `busy`
    /// (`over_share.rs`).
    OverShare,
}

/// What a connection last did, as far as taking its place is concerned.
const FRESH: u8 = 0;
/// Request bytes arrived and no answer has gone out since: busy.
const READ: u8 = 1;
/// An answer went out and nothing arrived since: between requests.
const WROTE: u8 = 2;
/// An answer is waiting for the client to read it: busy.
const WRITING: u8 = 3;

/// One open connection, as its address's list of them sees it.
#[derive(Debug)]
pub struct Activity {
    phase: AtomicU8,
    /// When a byte last moved, in ms since the connections' epoch.
    moved_ms: AtomicU64,
    /// Cancelled when a newer connection from the same address takes this
    /// one's place: the server shuts it down gracefully.
    pub reclaimed: CancellationToken,
}

impl Activity {
    fn between_requests(&self) -> bool {
        matches!(self.phase.load(Ordering::Relaxed), FRESH | WROTE)
    }
}

/// The slots shared by every listener, and their counts.
#[derive(Debug)]
pub struct Connections {
    slots: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    /// Open connections by client address.
    clients: Mutex<HashMap<IpAddr, Vec<Arc<Activity>>>>,
    epoch: tokio::time::Instant,
    /// Accepted and not closed yet (a listener waiting in `accept` holds a
    /// slot, not a connection).
    open: AtomicUsize,
    accepted: AtomicU64,
    /// Times a listener found every slot taken.
    at_cap: AtomicU64,
    /// Connections served from the reserve.
    reserved: AtomicU64,
    /// Connections refused because their address held too many, all busy.
    refused_per_client: AtomicU64,
    /// Idle connections shut down to make room for a new one from their
    /// address.
    reclaimed: AtomicU64,
    /// Connections closed because nothing moved on them for `idle`.
    idle_closed: AtomicU64,
    /// TLS handshakes that failed or did not end within the head deadline.
    tls_failed: AtomicU64,
    /// Connections closed because their request head did not arrive in time
    /// (counted by the server, `http.rs`).
    pub head_timeouts: AtomicU64,
    /// Request heads hyper refused, answered as problem+json (`head_errors.rs`).
    pub refused_heads: Arc<super::head_errors::HeadRefusals>,
    idle: Duration,
}

impl Connections {
    /// Slots for connections that are closed after twice `request_timeout`
    /// without a byte either way.
    pub fn new(request_timeout: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            reserve: Arc::new(Semaphore::new(RESERVE_CONNECTIONS)),
            clients: Mutex::new(HashMap::new()),
            epoch: tokio::time::Instant::now(),
            open: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            at_cap: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            refused_per_client: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
            tls_failed: AtomicU64::new(0),
            head_timeouts: AtomicU64::new(0),
            refused_heads: Arc::default(),
            idle: request_timeout * 2,
        }
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Vec<Arc<Activity>>>> {
        // Plain counts; keep counting after a panic elsewhere.
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Counts a connection from `ip`. When the address already holds the
    /// most, its longest-idle connection between requests gives up its place
    /// (told through `reclaimed`); None when every one of them is busy.
    fn admit(&self, ip: IpAddr) -> Option<Arc<Activity>> {
        let activity = Arc::new(Activity {
            phase: AtomicU8::new(FRESH),
            moved_ms: AtomicU64::new(self.now_ms()),
            reclaimed: CancellationToken::new(),
        });
        let mut clients = self.clients();
        let held = clients.entry(ip).or_default();
        if held.len() >= MAX_PER_CLIENT {
            let idlest = held
                .iter()
                .enumerate()
                .filter(|(_, a)| a.between_requests())
                .min_by_key(|(_, a)| a.moved_ms.load(Ordering::Relaxed))
                .map(|(i, _)| i)?;
            let gone = held.swap_remove(idlest);
            gone.reclaimed.cancel();
            self.reclaimed.fetch_add(1, Ordering::Relaxed);
        }
        held.push(activity.clone());
        Some(activity)
    }

    /// The activity of a connection past its address's share: in no list,
    /// so no newer connection takes its place.
    fn unlisted(&self) -> Arc<Activity> {
        Arc::new(Activity {
            phase: AtomicU8::new(READ),
            moved_ms: AtomicU64::new(self.now_ms()),
            reclaimed: CancellationToken::new(),
        })
    }

    /// Counts a connection answered 503 `busy` because its address holds
    /// the most connections, all busy.
    pub fn refused_busy(&self) {
        self.refused_per_client.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a TLS handshake that failed or did not end in time.
    pub fn tls_failed(&self) {
        self.tls_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection served from the reserve.
    pub fn served_reserve(&self) {
        self.reserved.fetch_add(1, Ordering::Relaxed);
    }

    fn leave(&self, ip: IpAddr, activity: &Arc<Activity>) {
        let mut clients = self.clients();
        if let Some(held) = clients.get_mut(&ip) {
            // A reclaimed connection has left the list already.
            held.retain(|a| !Arc::ptr_eq(a, activity));
            if held.is_empty() {
                clients.remove(&ip);
            }
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
        out.family(
            "sitegate_http_reserve_served_total",
            Kind::Counter,
            "HTTP connections served from the reserve (every slot taken): health, readiness and metrics only.",
        )
        .sample(&[], self.reserved.load(Ordering::Relaxed) as f64);
        out.family(
            "sitegate_http_refused_total",
            Kind::Counter,
            "HTTP connections refused with 503 busy, by reason.",
        )
        .sample(
            &[("reason", "per_client")],
            self.refused_per_client.load(Ordering::Relaxed) as f64,
        );
        out.family(
            "sitegate_http_reclaimed_total",
            Kind::Counter,
            "Idle HTTP connections (between requests) shut down to make room for a new one from the same address.",
        )
        .sample(&[], self.reclaimed.load(Ordering::Relaxed) as f64);
        out.family(
            "sitegate_http_head_timeouts_total",
            Kind::Counter,
            "HTTP connections closed because a request head did not arrive within its deadline.",
        )
        .sample(&[], self.head_timeouts.load(Ordering::Relaxed) as f64);
        out.family(
            "sitegate_http_tls_handshakes_failed_total",
            Kind::Counter,
            "HTTPS connections closed because the TLS handshake failed or did not end within the head deadline.",
        )
        .sample(&[], self.tls_failed.load(Ordering::Relaxed) as f64);
        let heads = &self.refused_heads;
        let mut family = out.family(
            "sitegate_http_bad_heads_total",
            Kind::Counter,
            "Request heads refused before routing (malformed, target or headers too large), by status.",
        );
        for (status, n) in [
            ("400", &heads.bad_request),
            ("414", &heads.uri_too_long),
            ("431", &heads.too_large),
        ] {
            family.sample(&[("status", status)], n.load(Ordering::Relaxed) as f64);
        }
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

impl Capped {
    /// The next connection with a slot of its own, and which kind.
    pub async fn accept(&mut self) -> (Held, std::net::SocketAddr, Class) {
        loop {
            let (slot, class) = self.slot().await;
            let (stream, addr) = loop {
                match self.listener.accept().await {
                    Ok(accepted) => break accepted,
                    Err(e) => accept_failed(e).await,
                }
            };
            self.connections.accepted.fetch_add(1, Ordering::Relaxed);
            // Answers go out as written: a TLS handshake's last records (the
            // session tickets) and the answer that follows them would
            // otherwise wait for the client's delayed ACK (40 ms).
            let _ = stream.set_nodelay(true);
            let (slot, class, activity) = match self.connections.admit(addr.ip()) {
                Some(activity) => (slot, class, activity),
                None => {
                    // Past its share: a reserve slot, if one is free, to
                    // read what it asks for; else 503 at once.
                    let reserve = match class {
                        Class::Full => self.connections.reserve.clone().try_acquire_owned().ok(),
                        Class::Reserve | Class::OverShare => Some(slot),
                    };
                    let Some(reserve) = reserve else {
                        self.connections.refused_busy();
                        tracing::debug!(client = %addr.ip(), max = MAX_PER_CLIENT, "HTTP connection refused: its address holds the most");
                        tokio::spawn(refuse(stream));
                        continue;
                    };
                    (reserve, Class::OverShare, self.connections.unlisted())
                }
            };
            if class == Class::Reserve {
                self.connections.reserved.fetch_add(1, Ordering::Relaxed);
            }
            self.connections.open.fetch_add(1, Ordering::Relaxed);
            let idle = self.connections.idle;
            let held = Held {
                stream,
                _slot: slot,
                client: addr.ip(),
                activity,
                connections: self.connections.clone(),
                silent_until: Box::pin(tokio::time::sleep(idle)),
            };
            return (held, addr, class);
        }
    }

    /// A free slot, else one of the reserve, else waits for a slot.
    async fn slot(&self) -> (OwnedSemaphorePermit, Class) {
        let c = &self.connections;
        if let Ok(slot) = c.slots.clone().try_acquire_owned() {
            return (slot, Class::Full);
        }
        c.at_cap.fetch_add(1, Ordering::Relaxed);
        if let Ok(slot) = c.reserve.clone().try_acquire_owned() {
            return (slot, Class::Reserve);
        }
        tracing::debug!(
            max = MAX_CONNECTIONS,
            reserve = RESERVE_CONNECTIONS,
            "every HTTP connection slot taken: new connections wait in the listen backlog"
        );
        tokio::select! {
            slot = c.slots.clone().acquire_owned() => match slot {
                Ok(slot) => (slot, Class::Full),
                Err(_) => unreachable!("the connection semaphores are never closed"),
            },
            slot = c.reserve.clone().acquire_owned() => match slot {
                Ok(slot) => (slot, Class::Reserve),
                Err(_) => unreachable!("the connection semaphores are never closed"),
            },
        }
    }
}

/// A 503 `busy` problem for a client holding too many connections, then close
/// (within a second: a client that does not read loses the answer).
async fn refuse(mut stream: TcpStream) {
    super::over_share::refuse_busy(&mut stream).await;
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
    client: IpAddr,
    activity: Arc<Activity>,
    connections: Arc<Connections>,
    silent_until: Pin<Box<tokio::time::Sleep>>,
}

impl Held {
    /// Cancelled when a newer connection from the same address takes this
    /// one's place.
    pub fn reclaimed(&self) -> CancellationToken {
        self.activity.reclaimed.clone()
    }

    /// Bytes moved: the idle time starts again.
    fn moved(&mut self) {
        let at = tokio::time::Instant::now() + self.connections.idle;
        self.silent_until.as_mut().reset(at);
        let now = self.connections.now_ms();
        self.activity.moved_ms.store(now, Ordering::Relaxed);
    }

    fn phase(&self, phase: u8) {
        self.activity.phase.store(phase, Ordering::Relaxed);
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

    /// An answer went out (between requests, unless it waits for the client).
    fn wrote(&self, result: &Poll<io::Result<usize>>) {
        match result {
            Poll::Ready(Ok(n)) if *n > 0 => self.phase(WROTE),
            Poll::Pending => self.phase(WRITING),
            _ => {}
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
        self.connections.leave(self.client, &self.activity);
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
        if after > before {
            this.phase(READ);
        }
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
        this.wrote(&result);
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
        this.wrote(&result);
        this.settle(cx, result, |n| *n > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
