//! A connection to one bus, wrapped so every call has a timeout and every
//! failure is classified (see [`ModbusError`]).
//!
//! `Port` connects lazily and drops the connection after any failure that
//! breaks it; the next call reconnects. It never retries on its own: the bus task
//! decides when to try again.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_modbus::client::{Context, Reader, Writer};
use tokio_modbus::prelude::SlaveContext;
use tokio_modbus::Slave;

use super::error::ModbusError;
use super::plan::{Span, Table};
use crate::config::Transport;

/// Owns one bus connection.
pub struct Port {
    transport: Transport,
    timeout: Duration,
    ctx: Option<Context>,
}

fn transport_error(e: tokio_modbus::Error) -> ModbusError {
    match e {
        tokio_modbus::Error::Transport(io) => ModbusError::Io(io.to_string()),
        tokio_modbus::Error::Protocol(p) => ModbusError::Protocol(p.to_string()),
    }
}

impl Port {
    pub fn new(transport: Transport, timeout: Duration) -> Self {
        Self {
            transport,
            timeout,
            ctx: None,
        }
    }

    pub fn is_connected(&self) -> bool {
        self.ctx.is_some()
    }

    fn timeout_ms(&self) -> u64 {
        self.timeout.as_millis() as u64
    }

    async fn connect(&mut self) -> Result<&mut Context, ModbusError> {
        if self.ctx.is_none() {
            let ctx = match &self.transport {
                Transport::Tcp { host, port } => {
                    let stream = timeout(self.timeout, TcpStream::connect((host.as_str(), *port)))
                        .await
                        .map_err(|_| ModbusError::Timeout(self.timeout_ms()))?
                        .map_err(|e| ModbusError::Io(format!("connect to {host}:{port}: {e}")))?;
                    // Requests are small and latency matters more than throughput.
                    let _ = stream.set_nodelay(true);
                    tokio_modbus::client::tcp::attach(stream)
                }
                Transport::Rtu(rtu) => {
                    return Err(ModbusError::Io(format!(
                        "serial line {}: Modbus RTU is not available yet",
                        rtu.path.display()
                    )))
                }
            };
            self.ctx = Some(ctx);
        }
        // Set just above; a `None` here is impossible.
        self.ctx
            .as_mut()
            .ok_or_else(|| ModbusError::Io("not connected".into()))
    }

    /// Runs one request with the timeout; drops the link when the failure breaks it.
    async fn call<T, F>(&mut self, unit: u8, f: F) -> Result<T, ModbusError>
    where
        F: for<'c> FnOnce(
            &'c mut Context,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = tokio_modbus::Result<T>> + Send + 'c>,
        >,
    {
        let limit = self.timeout;
        let ms = self.timeout_ms();
        let ctx = self.connect().await?;
        ctx.set_slave(Slave(unit));
        let result = match timeout(limit, f(ctx)).await {
            Err(_) => Err(ModbusError::Timeout(ms)),
            Ok(Err(e)) => Err(transport_error(e)),
            Ok(Ok(Err(code))) => Err(ModbusError::Exception(code)),
            Ok(Ok(Ok(v))) => Ok(v),
        };
        if let Err(e) = &result {
            if e.breaks_link() {
                self.ctx = None;
            }
        }
        result
    }

    pub async fn read(&mut self, unit: u8, span: Span) -> Result<Vec<u16>, ModbusError> {
        let words = match span.table {
            Table::Holding => {
                self.call(unit, |c| {
                    Box::pin(c.read_holding_registers(span.addr, span.len))
                })
                .await?
            }
            Table::Input => {
                self.call(unit, |c| {
                    Box::pin(c.read_input_registers(span.addr, span.len))
                })
                .await?
            }
        };
        if words.len() != usize::from(span.len) {
            self.ctx = None;
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
        match values {
            [] => Ok(()),
            [one] => {
                let one = *one;
                self.call(unit, move |c| Box::pin(c.write_single_register(addr, one)))
                    .await
            }
            many => {
                let many = many.to_vec();
                self.call(unit, move |c| {
                    Box::pin(async move { c.write_multiple_registers(addr, &many).await })
                })
                .await
            }
        }
    }

    /// Closes the connection (on shutdown).
    pub async fn close(&mut self) {
        if let Some(mut ctx) = self.ctx.take() {
            let _ = timeout(
                self.timeout,
                tokio_modbus::client::Client::disconnect(&mut ctx),
            )
            .await;
        }
    }
}
