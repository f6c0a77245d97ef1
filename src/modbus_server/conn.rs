//! One client connection: frames in, answers out, in order. Bounded in time
//! (a connection silent, or trickling a frame, for `idle_timeout_s` is
//! closed) and in rate (past its token bucket a request is answered 06,
//! server busy). A header that is not Modbus TCP closes the connection: the
//! stream cannot be trusted past it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::dispatch::{self, Context};
use super::frame::{self, Exception, HEADER};
use super::peer::Peer;
use super::stats::Closed;
use crate::util::TokenBucket;

/// Serves `stream` until the client leaves, falls silent, sends a bad
/// header, or `cancel`; says why it ended.
pub async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Context>,
    cancel: CancellationToken,
) -> Closed {
    let _ = stream.set_nodelay(true);
    let idle = Duration::from_secs(ctx.config.idle_timeout_s);
    let mut bucket = TokenBucket::full(
        ctx.config.requests_per_s,
        f64::from(ctx.config.burst),
        Instant::now(),
    );
    loop {
        let mut head = [0u8; HEADER];
        tokio::select! {
            () = cancel.cancelled() => return Closed::Stopped,
            read = tokio::time::timeout(idle, stream.read_exact(&mut head)) => match read {
                Err(_) => return Closed::Idle,
                Ok(Err(_)) => return Closed::Client,
                Ok(Ok(_)) => {}
            },
        }
        let header = match frame::header(&head) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(client = %peer, error = %e, "Modbus server: not a Modbus TCP header; closing");
                return Closed::Malformed;
            }
        };
        let mut pdu = vec![0u8; header.pdu_len];
        match tokio::time::timeout(idle, stream.read_exact(&mut pdu)).await {
            Err(_) => return Closed::Idle,
            Ok(Err(_)) => return Closed::Client,
            Ok(Ok(_)) => {}
        }
        let answer = if bucket.take_one(Instant::now()).is_err() {
            ctx.stats.answered(Err(Exception::ServerBusy));
            frame::exception(pdu[0], Exception::ServerBusy)
        } else {
            dispatch::answer(&ctx, header.unit, &pdu, &Peer::Tcp(peer)).await
        };
        let out = frame::frame(header.transaction, header.unit, &answer);
        match tokio::time::timeout(idle, stream.write_all(&out)).await {
            Err(_) => return Closed::Idle,
            Ok(Err(_)) => return Closed::Client,
            Ok(Ok(())) => {}
        }
    }
}
