//! problem+json for the request heads hyper refuses itself.
//!
//! A request head that hyper cannot parse never reaches the router: hyper
//! answers it (400 for a malformed line or a byte HTTP does not allow, 414 for
//! a target over 64 KiB, 431 for more than 100 headers or a head over about
//! 400 KiB) with an empty body and closes the connection. This adapter sits on
//! the connection's byte stream and turns such an answer, recognised by its
//! status and the absence of a content type (every answer of the router has
//! one), into a problem+json answer with a `code` and a `detail`.
//!
//! After such an answer the connection lingers before it closes: what the
//! client still sends (the rest of a 1 MB header) is read and dropped for up
//! to [`LINGER`], so the close does not reset the connection and lose the
//! answer on its way (a socket closed with unread bytes sends a reset).
//!
//! It rewrites nothing else and keeps nothing the client sent: it only looks
//! at the first bytes of what hyper writes.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::api::{ApiError, ErrorCode};

/// How long a refused connection reads and drops what its client still sends.
pub const LINGER: Duration = Duration::from_secs(2);
/// The most it reads so.
const LINGER_BYTES: usize = 4 << 20;

/// Counts of refused heads by status, for `/metrics`.
#[derive(Debug, Default)]
pub struct HeadRefusals {
    pub bad_request: AtomicU64,
    pub uri_too_long: AtomicU64,
    pub too_large: AtomicU64,
}

/// A connection's stream with hyper's bodiless refusals rewritten.
pub struct ProblemHeads<T> {
    inner: T,
    /// A rewritten answer still being written, and how far.
    pending: Option<(Vec<u8>, usize)>,
    /// Set once an answer was rewritten: the lingering close's deadline and
    /// the bytes it may still drop.
    linger: Option<(Pin<Box<Sleep>>, usize)>,
    counts: Arc<HeadRefusals>,
}

impl<T> ProblemHeads<T> {
    pub fn new(inner: T, counts: Arc<HeadRefusals>) -> Self {
        Self {
            inner,
            pending: None,
            linger: None,
            counts,
        }
    }
}

/// The longest head hyper writes for a refusal (a status line, its length
/// and its date, under 120 bytes), with room to spare.
const REFUSAL_HEAD_MAX: usize = 512;

/// The refusal hyper wrote at the start of `written`, as a problem+json
/// answer; `None` when it is not one of hyper's own. Looks at no more than
/// the first [`REFUSAL_HEAD_MAX`] bytes: it sees every write, bodies
/// included (megabytes without a line break, such as `/metrics`).
pub fn rewrite(written: &[u8]) -> Option<(u16, Vec<u8>)> {
    if !written.starts_with(b"HTTP/1.") {
        return None;
    }
    let start = &written[..written.len().min(REFUSAL_HEAD_MAX)];
    let line_end = start.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&start[..line_end]).ok()?;
    let (_, rest) = line.split_once(' ')?;
    let status: u16 = rest.get(..3)?.parse().ok()?;
    let head_end = start.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&start[..head_end]).to_ascii_lowercase();
    if head.contains("\r\ncontent-type:") || !head.contains("\r\ncontent-length: 0") {
        return None;
    }
    let (code, detail) = match status {
        400 => (
            ErrorCode::BadRequest,
            "the request head cannot be read: the request line or a header is malformed, or holds a byte HTTP does not allow there (bytes outside printable ASCII in the target must be percent-encoded)",
        ),
        414 => (
            ErrorCode::UriTooLong,
            "the request target is longer than 65534 bytes",
        ),
        431 => (
            ErrorCode::HeadersTooLarge,
            "the request head is too large: more than 100 headers, or more than about 400 KiB",
        ),
        _ => return None,
    };
    Some((status, ApiError::new(code, detail).http1_bytes()))
}

impl<T: AsyncWrite + Unpin> ProblemHeads<T> {
    /// When `written` is hyper's answer to a refused head: counts it, puts
    /// the problem+json answer in its place and starts the linger; returns
    /// the bytes taken (all of `written`).
    fn refuse(&mut self, cx: &mut Context<'_>, written: &[u8]) -> io::Result<Option<usize>> {
        let Some((status, answer)) = rewrite(written) else {
            return Ok(None);
        };
        let count = match status {
            400 => &self.counts.bad_request,
            414 => &self.counts.uri_too_long,
            _ => &self.counts.too_large,
        };
        count.fetch_add(1, Ordering::Relaxed);
        self.pending = Some((answer, 0));
        self.linger = Some((Box::pin(tokio::time::sleep(LINGER)), LINGER_BYTES));
        // What is not written now is written by the flush hyper sends next.
        let _ = self.drain(cx)?;
        Ok(Some(written.len()))
    }

    /// Writes what is left of a rewritten answer.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, at)) = &mut self.pending {
            if *at >= bytes.len() {
                self.pending = None;
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*at..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *at += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> ProblemHeads<T> {
    /// After a rewritten answer: reads and drops what the client still sends
    /// until it closes, [`LINGER`] passes or [`LINGER_BYTES`] are read.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((deadline, left)) = &mut self.linger else {
            return Poll::Ready(Ok(()));
        };
        let mut chunk = [0u8; 8192];
        loop {
            if deadline.as_mut().poll(cx).is_ready() || *left == 0 {
                break;
            }
            let mut buf = ReadBuf::new(&mut chunk);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    *left = left.saturating_sub(buf.filled().len());
                }
                // Closed by the client, or failed: nothing left to wait for.
                Poll::Ready(_) => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        self.linger = None;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ProblemHeads<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ProblemHeads<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        if let Some(taken) = this.refuse(cx, buf)? {
            return Poll::Ready(Ok(taken));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    /// Vectored, as the connection below is: hyper then queues a body as it
    /// is instead of copying it into its write buffer (a 2 MB `/metrics`
    /// answer was held twice while it was sent). hyper's own answers to a
    /// refused head have no body: their head is the first slice.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()) {
            if let Some(taken) = this.refuse(cx, first)? {
                return Poll::Ready(Ok(taken));
            }
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        if Pin::new(&mut this.inner).poll_shutdown(cx)?.is_pending() {
            return Poll::Pending;
        }
        this.poll_linger(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hyper_s_bodiless_refusals_are_rewritten() {
        let hyper_400 = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Thu, 26 Nov 2026 12:00:00 GMT\r\n\r\n";
        let (status, answer) = rewrite(hyper_400).expect("rewritten");
        assert_eq!(status, 400);
        let text = String::from_utf8(answer).expect("text");
        let (head, body) = text.split_once("\r\n\r\n").expect("head");
        assert!(head.contains("content-type: application/problem+json"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(body.contains(r#""code":"bad_request""#), "{body}");
        assert!(body.contains(r#""status":400"#), "{body}");

        let hyper_431 =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(rewrite(hyper_431).map(|r| r.0), Some(431));
        // The router's own answers carry a content type; others pass.
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(rewrite(ours), None);
        assert_eq!(
            rewrite(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
            None
        );
        assert_eq!(rewrite(b"{\"partial\": \"body\"}"), None);
        // A body is not a refusal; a head longer than a refusal's is the
        // router's, whatever its status.
        assert_eq!(rewrite(&vec![b'a'; 4 << 20]), None);
        let long = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nx-pad: {}\r\n\r\n",
            "p".repeat(REFUSAL_HEAD_MAX)
        );
        assert_eq!(rewrite(long.as_bytes()), None);
    }

    /// Over a real socket: the adapter is vectored like the socket (so hyper
    /// queues bodies instead of copying them), passes a head and its body in
    /// one vectored write, and still rewrites a refusal that comes so.
    #[tokio::test]
    async fn vectored_writes_pass_bodies_and_rewrite_refusals() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = tokio::spawn(async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let mut got = Vec::new();
            c.read_to_end(&mut got).await.expect("read");
            got
        });
        let (server, _) = listener.accept().await.expect("accept");
        let counts = Arc::new(HeadRefusals::default());
        let mut io = ProblemHeads::new(server, counts.clone());
        assert!(io.is_write_vectored());

        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\n";
        let slices = [io::IoSlice::new(head), io::IoSlice::new(b"hello")];
        let n = io.write_vectored(&slices).await.expect("write");
        assert!(n > 0);
        // A socket may take part of it: the rest goes plainly.
        let all = [&head[..], b"hello"].concat();
        io.write_all(&all[n..]).await.expect("rest");
        let refused = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let n = io
            .write_vectored(&[io::IoSlice::new(&[]), io::IoSlice::new(refused)])
            .await
            .expect("write");
        assert_eq!(n, refused.len());
        io.flush().await.expect("flush");
        drop(io);
        let got = String::from_utf8(client.await.expect("client")).expect("text");
        let (first, second) = got.split_at(all.len());
        assert_eq!(first.as_bytes(), all);
        assert!(second.starts_with("HTTP/1.1 431 "), "{second}");
        assert!(second.contains("application/problem+json"), "{second}");
        assert_eq!(counts.too_large.load(Ordering::Relaxed), 1);
    }
}
