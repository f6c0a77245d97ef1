//! One RS-485 line, owned by one bus task: opens the serial port with the
//! configured framing, keeps the silent interval before every request, drops
//! stale bytes (a late answer to a timed-out request) before sending, and reads
//! exactly one answer frame back.
//!
//! It never retries and has no timeout of its own: `link::Port` wraps each
//! call in the bus timeout, so a silent device costs the line one timeout.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tokio_serial::{DataBits, Parity as SerialParity, SerialPort, SerialPortBuilderExt, StopBits};

use super::frame::{self, Answer, FrameError, Pdu, MAX_FRAME};
use crate::config::{Parity, RtuConfig};

/// What went wrong on the line.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Frame(#[from] FrameError),
}

pub struct RtuLine {
    stream: tokio_serial::SerialStream,
    gap: Duration,
    /// When the line last carried a byte (sent or received).
    last: Instant,
}

impl RtuLine {
    pub fn open(cfg: &RtuConfig) -> Result<RtuLine, io::Error> {
        let (stream, gap) = open_port(cfg)?;
        Ok(RtuLine {
            stream,
            gap,
            last: Instant::now(),
        })
    }

    /// Sends `pdu` to `unit` after the silent interval and reads its answer.
    pub async fn call(&mut self, unit: u8, pdu: &Pdu) -> Result<Answer, LineError> {
        tokio::time::sleep_until(self.last + self.gap).await;
        self.discard_stale()?;
        let req = frame::request(unit, pdu);
        self.stream.write_all(&req).await?;
        self.stream.flush().await?;
        self.last = Instant::now();
        let mut buf = Vec::with_capacity(MAX_FRAME);
        let mut chunk = [0u8; MAX_FRAME];
        let answer = loop {
            if let Some(len) = frame::answer_len(&buf) {
                if buf.len() >= len {
                    break frame::decode_answer(unit, pdu, &buf[..len]);
                }
            }
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            self.last = Instant::now();
            buf.extend_from_slice(&chunk[..n]);
        };
        Ok(answer?)
    }

    /// Drops bytes already received: they belong to no request of ours.
    fn discard_stale(&mut self) -> io::Result<()> {
        self.stream
            .clear(tokio_serial::ClearBuffer::Input)
            .map_err(io::Error::other)?;
        let mut scratch = [0u8; MAX_FRAME];
        loop {
            match self.stream.try_read(&mut scratch) {
                Ok(0) => return Ok(()),
                Ok(n) => tracing::debug!(bytes = n, "dropped stale bytes on the line"),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Opens the serial port with the configured framing; returns it and the
/// line's silent interval (3.5 characters). The agent's RTU client and the
/// Modbus server's RTU slave both open their lines so.
pub fn open_port(cfg: &RtuConfig) -> Result<(tokio_serial::SerialStream, Duration), io::Error> {
    let data_bits = match cfg.data_bits {
        5 => DataBits::Five,
        6 => DataBits::Six,
        7 => DataBits::Seven,
        _ => DataBits::Eight,
    };
    let (parity, has_parity) = match cfg.parity {
        Parity::None => (SerialParity::None, false),
        Parity::Even => (SerialParity::Even, true),
        Parity::Odd => (SerialParity::Odd, true),
    };
    let stop_bits = if cfg.stop_bits == 2 {
        StopBits::Two
    } else {
        StopBits::One
    };
    let path = cfg.path.to_string_lossy().into_owned();
    let stream = tokio_serial::new(&path, cfg.baud)
        .data_bits(data_bits)
        .parity(parity)
        .stop_bits(stop_bits)
        .open_native_async()
        .map_err(|e| io::Error::other(format!("open {path}: {e}")))?;
    let bits = frame::bits_per_char(cfg.data_bits, has_parity, cfg.stop_bits);
    Ok((stream, frame::silent_interval(cfg.baud, bits)))
}
