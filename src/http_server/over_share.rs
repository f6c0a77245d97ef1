//! A connection from an address that already holds its share of slots, all
//! busy: it is given one of the reserve's slots long enough to read its
//! request line (within the head deadline). `/healthz`, `/readyz` and
//! `/metrics` are then served on it as on the reserve, one request, so that
//! a monitoring system behind the same NAT as a slow client still sees the
//! agent; anything else is answered 503 `busy` at once and closed.
//!
//! It reads no more than a request line ([`LINE_MAX`] bytes) before the
//! decision, and keeps nothing it read beyond handing it to the server.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use axum::http::header::RETRY_AFTER;
use axum::http::HeaderValue;

use super::bounds::MAX_PER_CLIENT;
use crate::api::{ApiError, ErrorCode};

/// The longest request line read before the decision; a longer one is
/// refused (no health path is that long).
pub const LINE_MAX: usize = 2048;

/// The paths served past an address's share.
pub const HEALTH_PATHS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// Whether `line` (a request line, without its CRLF) asks for one of
/// [`HEALTH_PATHS`] with GET or HEAD; a query string is allowed.
pub fn asks_health(line: &[u8]) -> bool {
    let Ok(line) = std::str::from_utf8(line) else {
        return false;
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return false;
    };
    let path = target.split('?').next().unwrap_or(target);
    matches!(method, "GET" | "HEAD") && HEALTH_PATHS.contains(&path)
}

/// Reads until the first line of the request is in; returns every byte read
/// (the line and whatever followed it in the same reads), or `None` when the
/// client closes first or the line grows past [`LINE_MAX`].
pub async fn read_request_line<S: AsyncRead + Unpin>(io: &mut S) -> io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(512);
    loop {
        if buf.windows(2).any(|w| w == b"\r\n") {
            return Ok(Some(buf));
        }
        if buf.len() >= LINE_MAX {
            return Ok(None);
        }
        let mut chunk = [0u8; 512];
        let want = chunk.len().min(LINE_MAX + 2 - buf.len());
        let n = io.read(&mut chunk[..want]).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The request line in `read` (bytes up to its CRLF).
pub fn first_line(read: &[u8]) -> &[u8] {
    let end = read
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(read.len());
    &read[..end]
}

/// Answers 503 `busy` naming the address's share, then closes.
pub async fn refuse_busy<S: AsyncWrite + Unpin>(io: &mut S) {
    let response = ApiError::new(
        ErrorCode::Busy,
        format!("too many connections from your address (at most {MAX_PER_CLIENT} at once); close one and try again"),
    )
    .with_header(RETRY_AFTER, HeaderValue::from_static("1"))
    .http1_bytes();
    let write = async {
        io.write_all(&response).await?;
        io.shutdown().await
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
}

/// A stream that first gives back the bytes already read from it.
pub struct Rewind<S> {
    read: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Rewind<S> {
    pub fn new(read: Vec<u8>, inner: S) -> Self {
        Self { read, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.read.len() {
            let n = buf.remaining().min(this.read.len() - this.at);
            buf.put_slice(&this.read[this.at..this.at + n]);
            this.at += n;
            if this.at == this.read.len() {
                this.read = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_health_readiness_and_metrics_are_served_past_the_share() {
        for yes in [
            "GET /healthz HTTP/1.1",
            "GET /readyz?verbose=1 HTTP/1.1",
            "HEAD /metrics HTTP/1.1",
        ] {
            assert!(asks_health(yes.as_bytes()), "{yes}");
        }
        for no in [
            "GET /devices HTTP/1.1",
            "POST /healthz HTTP/1.1",
            "GET /healthz/x HTTP/1.1",
            "GET",
            "",
        ] {
            assert!(!asks_health(no.as_bytes()), "{no}");
        }
        assert_eq!(
            first_line(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            b"GET / HTTP/1.1"
        );
    }

    #[tokio::test]
    async fn the_line_read_is_given_back_to_the_server() {
        let (mut client, mut server) = tokio::io::duplex(64);
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .expect("write");
        drop(client);
        let read = read_request_line(&mut server)
            .await
            .expect("read")
            .expect("a line");
        let mut all = Vec::new();
        Rewind::new(read, server)
            .read_to_end(&mut all)
            .await
            .expect("read");
        assert_eq!(all, b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    }
}
