//! The node's listener: it hands the hub only connections that open a TLS
//! handshake within [`FIRST_BYTE_WITHIN`]. The hub holds 16 connections,
//! handshakes in progress included; without this, a handful of sockets that
//! connect and say nothing (or send anything but TLS) keep the control box
//! out for as long as they stay open.
//!
//! Owns the listening socket and the screening tasks; knows nothing of SHIP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

/// How long a new connection has to send its first TLS record.
pub const FIRST_BYTE_WITHIN: Duration = Duration::from_secs(5);
/// Connections screened at once; more are closed at once.
pub const SCREENED_AT_ONCE: usize = 64;
/// A TLS record of type handshake (RFC 8446 §5.1).
const TLS_HANDSHAKE: u8 = 0x16;

/// Binds `addr`; returns where it listens and the connections that passed.
pub async fn listen(
    addr: SocketAddr,
    cancel: CancellationToken,
) -> std::io::Result<(SocketAddr, mpsc::Receiver<TcpStream>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let (tx, rx) = mpsc::channel(16);
    let slots = Arc::new(Semaphore::new(SCREENED_AT_ONCE));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = cancel.cancelled() => return,
                a = listener.accept() => a,
            };
            let (stream, from) = match accepted {
                Ok(a) => a,
                Err(_) => {
                    // Out of descriptors, most likely: let the load pass.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::debug!(%from, "EEBus connection closed: too many being screened");
                continue;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let mut first = [0u8; 1];
                match tokio::time::timeout(FIRST_BYTE_WITHIN, stream.peek(&mut first)).await {
                    Ok(Ok(1)) if first[0] == TLS_HANDSHAKE => {
                        let _ = tx.send(stream).await;
                    }
                    Ok(Ok(_)) => {
                        tracing::warn!(%from, "EEBus connection closed: it does not open TLS")
                    }
                    Ok(Err(e)) => tracing::debug!(%from, error = %e, "EEBus connection lost"),
                    Err(_) => tracing::warn!(%from, "EEBus connection closed: silent for 5 s"),
                }
            });
        }
    });
    Ok((bound, rx))
}
