//! One simulated Modbus TCP server: its listening socket, the task that accepts
//! connections, and the connections themselves, so that stopping it is like the
//! device losing power: the listener closes and every open connection drops.
//!
//! Requests are answered by `service`; this file only owns sockets and tasks.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Mutex;
use tokio_modbus::server::tcp::Server;
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tokio_util::task::TaskTracker;

use super::service::{ServerShared, Session};

/// A simulated server, running or stopped, always on the same address.
pub struct SimServer {
    pub shared: Arc<ServerShared>,
    /// The bound address (the ephemeral port, once chosen, is kept).
    pub addr: SocketAddr,
    running: Mutex<Option<Running>>,
}

struct Running {
    cancel: CancellationToken,
    accept: tokio::task::JoinHandle<()>,
    /// Counts open connections (each holds a token until its socket is closed).
    connections: TaskTracker,
}

impl SimServer {
    /// Binds `listen` and starts serving.
    pub async fn start(
        shared: Arc<ServerShared>,
        listen: SocketAddr,
        parent: &CancellationToken,
        tasks: &TaskTracker,
    ) -> io::Result<SimServer> {
        let listener = bind(listen)?;
        let addr = listener.local_addr()?;
        let server = SimServer {
            shared,
            addr,
            running: Mutex::new(None),
        };
        *server.running.lock().await = Some(server.spawn(listener, parent, tasks));
        Ok(server)
    }

    /// Starts serving again on the same address; no-op when running.
    pub async fn resume(&self, parent: &CancellationToken, tasks: &TaskTracker) -> io::Result<()> {
        let mut running = self.running.lock().await;
        if running.is_none() {
            let listener = bind(self.addr)?;
            *running = Some(self.spawn(listener, parent, tasks));
        }
        Ok(())
    }

    /// Closes the listener and every open connection, and waits until they are
    /// gone. No-op when stopped.
    pub async fn stop(&self) {
        let Some(r) = self.running.lock().await.take() else {
            return;
        };
        r.cancel.cancel();
        // The accept task only ends by cancellation; a join error means it
        // panicked, which has already been reported by the runtime.
        let _ = r.accept.await;
        r.connections.close();
        r.connections.wait().await;
        tracing::debug!(server = %self.shared.name, addr = %self.addr, "simulated server stopped");
    }

    fn spawn(
        &self,
        listener: TcpListener,
        parent: &CancellationToken,
        tasks: &TaskTracker,
    ) -> Running {
        let cancel = parent.child_token();
        let connections = TaskTracker::new();
        let accept = tasks.spawn(accept_loop(
            listener,
            Arc::clone(&self.shared),
            cancel.clone(),
            connections.clone(),
        ));
        tracing::debug!(server = %self.shared.name, addr = %self.addr, "simulated server listening");
        Running {
            cancel,
            accept,
            connections,
        }
    }
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // Restarting on the same port must not fail on connections in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(128)
}

/// Accepts until cancelled. tokio-modbus runs each connection on its own task
/// and cancels them all when `serve` is dropped; the tracker token inside each
/// transport tells us when their sockets are really closed.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<ServerShared>,
    cancel: CancellationToken,
    connections: TaskTracker,
) {
    let server = Server::new(listener);
    let on_connected = |stream: TcpStream, peer: SocketAddr| {
        tracing::debug!(server = %shared.name, %peer, "connection accepted");
        // Answers go out at once, as from a device; failure only costs latency.
        let _ = stream.set_nodelay(true);
        let session = Session {
            shared: Arc::clone(&shared),
        };
        let transport = Tracked {
            stream,
            _open: connections.token(),
        };
        async move { io::Result::Ok(Some((session, transport))) }
    };
    let on_error = |e: io::Error| tracing::debug!(error = %e, "connection ended");
    tokio::select! {
        () = cancel.cancelled() => {}
        r = server.serve(&on_connected, on_error) => {
            if let Err(e) = r {
                tracing::warn!(server = %shared.name, error = %e, "simulated server stopped accepting");
            }
        }
    }
}

/// A connection's socket with a tracker token, dropped after the socket.
struct Tracked {
    stream: TcpStream,
    // Declared after `stream`: fields drop in order, so the socket is closed
    // before the tracker learns the connection is gone.
    _open: TaskTrackerToken,
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
