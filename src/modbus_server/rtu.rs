//! The RTU slave on a serial line (`[modbus_server] serial`): the master's
//! frames, told apart by the 3.5-character silence, answered by the same
//! dispatch as TCP's requests (`dispatch.rs`), in RTU framing with the CRC
//! of the client side's codec (`modbus::rtu::frame`).
//!
//! A request may arrive in pieces: USB serial adapters hand on what they
//! have every few milliseconds (FTDI's latency timer: 16 ms), so a silence
//! longer than 3.5 characters can fall inside a frame. A buffer shorter
//! than the request its function code announces waits [`PIECES_WAIT`] for
//! its rest; bytes that arrive after noise or another slave's answer are
//! searched for a whole request at their end, so the line falls back in
//! step with the master at its next request.
//!
//! As a slave on a shared line: a frame whose CRC does not check is dropped
//! silently (and counted), a frame for a unit id the server does not answer
//! is left to that slave, and a broadcast (unit 0) is neither done nor
//! answered. One frame is answered at a time, in the order heard; it never
//! holds a lock across an await (dispatch's bounds hold here too).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_serial::SerialStream;
use tokio_util::sync::CancellationToken;

use super::dispatch::{self, Context};
use super::peer::Peer;
use super::stats::RtuFrame;
use crate::config::RtuConfig;
use crate::modbus::rtu::frame::{check_crc, request_len, seal, MAX_FRAME};

/// How long a frame cut short waits for its rest after a silence.
pub const PIECES_WAIT: Duration = Duration::from_millis(40);

/// An opened line.
pub struct Line {
    port: SerialStream,
    /// 3.5 characters at the line's speed: the end of a frame.
    gap: Duration,
    path: Arc<str>,
}

/// Opens the line with the configured framing; a port that cannot be opened
/// fails the start with its path.
pub fn open(cfg: &RtuConfig) -> std::io::Result<Line> {
    let (port, gap) = crate::modbus::rtu::open_port(cfg)?;
    Ok(Line {
        port,
        gap,
        path: cfg.path.to_string_lossy().into(),
    })
}

/// A frame heard on the line, as a slave takes it.
#[derive(Debug, PartialEq, Eq)]
pub enum Heard<'a> {
    /// For a unit the server answers: its PDU.
    Request {
        unit: u8,
        pdu: &'a [u8],
    },
    Dropped(RtuFrame),
}

/// What a slave serving the units `serves` makes of `frame` (one whole frame,
/// address to CRC).
pub fn heard(frame: &[u8], serves: impl Fn(u8) -> bool) -> Heard<'_> {
    let Ok(body) = check_crc(frame) else {
        return Heard::Dropped(RtuFrame::BadCrc);
    };
    match body[0] {
        0 => Heard::Dropped(RtuFrame::Broadcast),
        unit if !serves(unit) => Heard::Dropped(RtuFrame::OtherUnit),
        unit => Heard::Request {
            unit,
            pdu: &body[1..],
        },
    }
}

/// Whether `buf` is already one whole request frame (its length known from
/// its function code, its CRC checking): it is taken without waiting for the
/// silence that ends it. Anything else waits for the silence.
pub fn whole(buf: &[u8]) -> bool {
    request_len(buf).is_some_and(|n| n == buf.len() && check_crc(buf).is_ok())
}

/// Where in `buf` a whole request ends it: the offset of the first byte
/// from which the rest is [`whole`] (0 when all of it is), `None` when no
/// tail is. Searched only once `buf` has passed the length its head
/// announces: inside a long frame on its way, a tail could check by chance.
pub fn whole_tail(buf: &[u8]) -> Option<usize> {
    (0..buf.len().saturating_sub(3)).find(|&at| whole(&buf[at..]))
}

/// Whether `buf` is shorter than the request its head announces (or too
/// short to tell): a silence after it may fall inside the frame.
pub fn cut_short(buf: &[u8]) -> bool {
    request_len(buf).is_none_or(|n| n > buf.len())
}

/// What the line brings next.
#[derive(Debug)]
enum Next {
    Read(std::io::Result<usize>),
    /// `silence` passed with nothing read: the frame in the buffer ends.
    Silence,
    Cancelled,
}

/// Waits for bytes on `port`, for `silence` (none: the buffer is empty, so
/// there is no frame to end), or for `cancel`. Bytes already there when
/// the task runs come before the silence, even if its timer has run out
/// meanwhile: a task woken late on a loaded controller must not cut a frame
/// its master sent whole.
async fn next<R: AsyncRead + Unpin>(
    port: &mut R,
    chunk: &mut [u8],
    silence: Option<Duration>,
    cancel: &CancellationToken,
) -> Next {
    let silence = async {
        match silence {
            Some(gap) => tokio::time::sleep(gap).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = cancel.cancelled() => Next::Cancelled,
        r = port.read(chunk) => Next::Read(r),
        () = silence => Next::Silence,
    }
}

/// Answers on `line` until `cancel`.
pub async fn serve(mut line: Line, ctx: Arc<Context>, cancel: CancellationToken) {
    let peer = Peer::Serial(line.path.clone());
    let mut buf: Vec<u8> = Vec::with_capacity(MAX_FRAME);
    let mut chunk = [0u8; MAX_FRAME];
    loop {
        // Bytes in the buffer: the frame ends at the next silence, or, cut
        // short, once its rest has not come for a while.
        let silence = (!buf.is_empty()).then(|| {
            if cut_short(&buf) {
                PIECES_WAIT
            } else {
                line.gap
            }
        });
        let read = match next(&mut line.port, &mut chunk, silence, &cancel).await {
            Next::Cancelled => return,
            Next::Silence => None,
            Next::Read(r) => Some(r),
        };
        match read {
            Some(Ok(n)) if n > 0 => {
                // A frame longer than any Modbus frame is noise: what fits
                // is kept to fail its CRC at the silence.
                let room = (MAX_FRAME + 1).saturating_sub(buf.len());
                buf.extend_from_slice(&chunk[..n.min(room)]);
                if !whole(&buf) {
                    // A frame on its way waits for its rest; past its length,
                    // a request may have come after what was not one.
                    match (cut_short(&buf), whole_tail(&buf)) {
                        (false, Some(at)) => {
                            ctx.stats.rtu_frame(RtuFrame::BadCrc);
                            buf.drain(..at);
                        }
                        _ => continue,
                    }
                }
            }
            Some(Ok(_)) | Some(Err(_)) => {
                // No master on the other end (EIO on a pty), or end of
                // stream: wait, as a line with nothing on it.
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
                continue;
            }
            None => {}
        }
        let frame = std::mem::take(&mut buf);
        let (unit, pdu) = match heard(&frame, |u| ctx.config.unit(u).is_some()) {
            Heard::Dropped(why) => {
                ctx.stats.rtu_frame(why);
                if why == RtuFrame::BadCrc {
                    tracing::debug!(line = %line.path, bytes = frame.len(), "Modbus server: RTU frame with a bad CRC dropped");
                }
                continue;
            }
            Heard::Request { unit, pdu } => (unit, pdu),
        };
        let answer = dispatch::answer(&ctx, unit, pdu, &peer).await;
        ctx.stats.rtu_frame(RtuFrame::Answered);
        let mut out = Vec::with_capacity(answer.len() + 3);
        out.push(unit);
        out.extend_from_slice(&answer);
        let out = seal(out);
        let sent = async {
            line.port.write_all(&out).await?;
            line.port.flush().await
        };
        if let Err(e) = sent.await {
            tracing::warn!(line = %line.path, error = %e, "Modbus server: an RTU answer could not be sent");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    /// Polls `f` once: its answer, or `None` while it waits.
    async fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *f).poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }

    /// A frame's rest that arrived while the server's task was not running,
    /// past the silence: the bytes win, on every try (an unbiased select
    /// would pick the silence about half the time).
    #[tokio::test(start_paused = true)]
    async fn bytes_that_came_while_the_task_slept_beat_the_silence() {
        let cancel = CancellationToken::new();
        for _ in 0..32 {
            let (mut master, mut slave) = tokio::io::duplex(64);
            let mut chunk = [0u8; 16];
            let waiting = next(&mut slave, &mut chunk, Some(PIECES_WAIT), &cancel);
            let mut waiting = std::pin::pin!(waiting);
            assert!(poll_once(&mut waiting).await.is_none(), "nothing yet");
            master.write_all(&[3, 0x9C]).await.unwrap();
            tokio::time::advance(2 * PIECES_WAIT).await;
            match waiting.await {
                Next::Read(Ok(2)) => {}
                other => panic!("the rest came first: {other:?}"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_silence_ends_a_frame_and_an_empty_buffer_has_none() {
        let cancel = CancellationToken::new();
        let (_master, mut slave) = tokio::io::duplex(64);
        let mut chunk = [0u8; 16];
        let ends = next(&mut slave, &mut chunk, Some(PIECES_WAIT), &cancel).await;
        assert!(matches!(ends, Next::Silence), "{ends:?}");
        let waiting = next(&mut slave, &mut chunk, None, &cancel);
        let mut waiting = std::pin::pin!(waiting);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(poll_once(&mut waiting).await.is_none(), "no frame to end");
        cancel.cancel();
        assert!(matches!(waiting.await, Next::Cancelled));
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        seal(body.to_vec())
    }

    #[test]
    fn a_slave_answers_its_units_only_and_drops_bad_frames() {
        let serves = |u: u8| u == 1 || u == 200;
        let read = frame(&[1, 3, 0x9C, 0x40, 0, 2]);
        assert_eq!(
            heard(&read, serves),
            Heard::Request {
                unit: 1,
                pdu: &[3, 0x9C, 0x40, 0, 2]
            }
        );
        let mut bad = read.clone();
        bad[5] ^= 0xFF;
        assert_eq!(heard(&bad, serves), Heard::Dropped(RtuFrame::BadCrc));
        assert_eq!(heard(&[1, 3], serves), Heard::Dropped(RtuFrame::BadCrc));
        assert_eq!(
            heard(&frame(&[7, 3, 0, 0, 0, 1]), serves),
            Heard::Dropped(RtuFrame::OtherUnit)
        );
        assert_eq!(
            heard(&frame(&[0, 6, 0, 1, 0, 5]), serves),
            Heard::Dropped(RtuFrame::Broadcast)
        );
    }

    #[test]
    fn a_whole_request_is_taken_before_the_silence() {
        let read = frame(&[1, 3, 0x9C, 0x40, 0, 2]);
        assert!(whole(&read));
        assert!(!whole(&read[..7]), "a byte short");
        let mut bad = read.clone();
        bad[7] ^= 1;
        assert!(!whole(&bad), "a bad CRC waits for the silence");
        let write = frame(&[1, 16, 0, 10, 0, 2, 4, 0, 1, 0, 2]);
        assert!(whole(&write));
        assert!(!whole(&write[..9]));
    }

    #[test]
    fn a_request_cut_short_waits_and_one_after_noise_is_found() {
        let read = frame(&[1, 3, 0x9C, 0x40, 0, 2]);
        assert!(cut_short(&read[..1]), "too short to tell");
        assert!(cut_short(&read[..5]));
        assert!(!cut_short(&read));
        let write = frame(&[1, 16, 0, 10, 0, 2, 4, 0, 1, 0, 2]);
        assert!(cut_short(&write[..6]), "its byte count not heard yet");
        assert!(cut_short(&write[..9]));
        assert!(!cut_short(&write));
        // Another slave's answer (7 bytes), then the master's request.
        let mut line = frame(&[77, 3, 2, 0, 5]);
        line.extend_from_slice(&read);
        assert_eq!(whole_tail(&line), Some(7));
        assert_eq!(whole_tail(&read), Some(0));
        assert_eq!(whole_tail(&read[..7]), None);
        assert_eq!(whole_tail(&[]), None);
    }
}
