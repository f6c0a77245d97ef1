//! A connection to one bus, wrapped so every call has a timeout and every
//! failure is classified (see [`ModbusError`]).
//!
//! `Port` connects lazily: Modbus TCP through tokio-modbus, Modbus RTU through
//! our own line (`rtu`). It drops a TCP connection after any failure that
//! breaks it (a late answer could be taken for the next request's); an RTU line
//! stays open after a timeout or a bad frame (the line drops stale bytes before
//! each request) and is reopened only after an I/O error. It never retries on
//! its own: the bus task decides when to try again.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};
use tokio_modbus::client::Context;
use tokio_modbus::prelude::SlaveContext;
use tokio_modbus::Slave;

use super::error::ModbusError;
use super::rtu::frame::{Answer, FrameError, Pdu};
use super::rtu::{LineError, RtuLine};
use super::stats::{Function, Outcome, RequestStats};
use crate::config::Transport;
use crate::register::plan::{Span, Table};

enum Conn {
    Tcp(Context),
    Rtu(RtuLine),
}

/// Owns one bus connection.
pub struct Port {
    transport: Transport,
    timeout: Duration,
    conn: Option<Conn>,
    stats: Option<Arc<RequestStats>>,
}

fn transport_error(e: tokio_modbus::Error) -> ModbusError {
    match e {
        tokio_modbus::Error::Transport(io) => ModbusError::io(&io),
        tokio_modbus::Error::Protocol(p) => ModbusError::Protocol(p.to_string()),
    }
}

/// What one call returns before classification.
enum Reply {
    Words(Vec<u16>),
    Written,
}

impl Port {
    pub fn new(transport: Transport, timeout: Duration) -> Self {
        Self {
            transport,
            timeout,
            conn: None,
            stats: None,
        }
    }

    /// Counts every request in `stats` (the bus task's port does).
    pub fn with_stats(mut self, stats: Arc<RequestStats>) -> Self {
        self.stats = Some(stats);
        self
    }

    fn record<T>(&self, function: Function, result: &Result<T, ModbusError>, started: Instant) {
        if let Some(s) = &self.stats {
            s.record(function, Outcome::of(result), started.elapsed());
        }
    }

    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    fn timeout_ms(&self) -> u64 {
        self.timeout.as_millis() as u64
    }

    async fn connect(&mut self) -> Result<&mut Conn, ModbusError> {
        if self.conn.is_none() {
            let conn = match &self.transport {
                Transport::Tcp { host, port } => {
                    let stream = timeout(self.timeout, TcpStream::connect((host.as_str(), *port)))
                        .await
                        .map_err(|_| ModbusError::Timeout(self.timeout_ms()))?
                        .map_err(|e| {
                            ModbusError::io_while(format_args!("connect to {host}:{port}"), &e)
                        })?;
                    // Requests are small and latency matters more than throughput.
                    let _ = stream.set_nodelay(true);
                    Conn::Tcp(tokio_modbus::client::tcp::attach(stream))
                }
                Transport::Rtu(rtu) => {
                    Conn::Rtu(RtuLine::open(rtu).map_err(|e| ModbusError::io(&e))?)
                }
            };
            self.conn = Some(conn);
        }
        // Set just above; a `None` here is impossible.
        self.conn.as_mut().ok_or_else(|| ModbusError::Io {
            kind: std::io::ErrorKind::NotConnected,
            message: "not connected".into(),
        })
    }

    /// Runs one request with the timeout; drops the connection when the failure
    /// requires it.
    async fn call(&mut self, unit: u8, pdu: Pdu) -> Result<Reply, ModbusError> {
        let limit = self.timeout;
        let ms = self.timeout_ms();
        let result = match self.connect().await? {
            Conn::Tcp(ctx) => {
                ctx.set_slave(Slave(unit));
                match timeout(limit, tcp_call(ctx, &pdu)).await {
                    Err(_) => Err(ModbusError::Timeout(ms)),
                    Ok(Err(e)) => Err(transport_error(e)),
                    Ok(Ok(Err(code))) => Err(ModbusError::Exception(code)),
                    Ok(Ok(Ok(r))) => Ok(r),
                }
            }
            Conn::Rtu(line) => match timeout(limit, line.call(unit, &pdu)).await {
                Err(_) => Err(ModbusError::Timeout(ms)),
                Ok(Err(LineError::Io(e))) => Err(ModbusError::io(&e)),
                Ok(Err(LineError::Frame(e))) => Err(frame_error(e)),
                Ok(Ok(Answer::Exception(code))) => Err(ModbusError::Exception(code)),
                Ok(Ok(Answer::Words(w))) => Ok(Reply::Words(w)),
                Ok(Ok(Answer::Written)) => Ok(Reply::Written),
            },
        };
        if let Err(e) = &result {
            let keep = matches!(self.conn, Some(Conn::Rtu(_)))
                && matches!(e, ModbusError::Timeout(_) | ModbusError::Protocol(_));
            if e.breaks_link() && !keep {
                self.conn = None;
            }
        }
        result
    }

    pub async fn read(&mut self, unit: u8, span: Span) -> Result<Vec<u16>, ModbusError> {
        let started = Instant::now();
        let result = self.read_unrecorded(unit, span).await;
        self.record(Function::Read, &result, started);
        result
    }

    async fn read_unrecorded(&mut self, unit: u8, span: Span) -> Result<Vec<u16>, ModbusError> {
        let pdu = match span.table {
            Table::Holding => Pdu::ReadHolding {
                addr: span.addr,
                count: span.len,
            },
            Table::Input => Pdu::ReadInput {
                addr: span.addr,
                count: span.len,
            },
            Table::DiscreteInput => Pdu::ReadDiscrete {
                addr: span.addr,
                count: span.len,
            },
        };
        let words = match self.call(unit, pdu).await? {
            Reply::Words(w) => w,
            Reply::Written => Vec::new(),
        };
        if words.len() != usize::from(span.len) {
            if matches!(self.conn, Some(Conn::Tcp(_))) {
                self.conn = None;
            }
            return Err(ModbusError::Protocol(format!(
                "asked for {} registers at {}, got {}",
                span.len,
                span.addr,
                words.len()
            )));
        }
        Ok(words)
    }

    /// Function 6 for one register, 16 for several.
    pub async fn write(&mut self, unit: u8, addr: u16, values: &[u16]) -> Result<(), ModbusError> {
        let pdu = match values {
            [] => return Ok(()),
            [one] => Pdu::WriteSingle { addr, value: *one },
            many => Pdu::WriteMultiple {
                addr,
                values: many.to_vec(),
            },
        };
        let started = Instant::now();
        let result = self.call(unit, pdu).await.map(|_| ());
        self.record(Function::Write, &result, started);
        result
    }

    /// Closes the connection (on shutdown).
    pub async fn close(&mut self) {
        if let Some(Conn::Tcp(mut ctx)) = self.conn.take() {
            let _ = timeout(
                self.timeout,
                tokio_modbus::client::Client::disconnect(&mut ctx),
            )
            .await;
        }
    }
}

fn frame_error(e: FrameError) -> ModbusError {
    ModbusError::Protocol(e.to_string())
}

/// Through `Client::call` rather than the typed helpers: those assert on the
/// answer's length (a panic in debug builds when a device answers short), and
/// the length is checked in [`Port::read`] anyway.
async fn tcp_call(ctx: &mut Context, pdu: &Pdu) -> tokio_modbus::Result<Reply> {
    let asked = match pdu {
        Pdu::ReadDiscrete { count, .. } => usize::from(*count),
        _ => 0,
    };
    use tokio_modbus::client::Client;
    use tokio_modbus::Response;
    let req = pdu.request();
    Ok(Client::call(ctx, req).await?.map(|r| match r {
        Response::ReadHoldingRegisters(w) | Response::ReadInputRegisters(w) => Reply::Words(w),
        // The answer carries whole bytes: the bits past `count` are padding.
        Response::ReadDiscreteInputs(bits) => {
            Reply::Words(bits.into_iter().take(asked).map(u16::from).collect())
        }
        _ => Reply::Written,
    }))
}

/// One unit id on a port, as a [`RegisterReader`](super::reader::RegisterReader)
/// (discovery, scans, tests).
pub struct UnitReader<'a> {
    pub port: &'a mut Port,
    pub unit: u8,
}

impl super::reader::RegisterReader for UnitReader<'_> {
    async fn read(&mut self, span: Span) -> Result<Vec<u16>, ModbusError> {
        self.port.read(self.unit, span).await
    }
}
