//! A simulated RS-485 line: several simulated devices behind one serial port
//! (in tests, the master side of a pseudo-terminal pair), answering Modbus RTU
//! frames like real slaves: a frame with a bad CRC or for an absent unit gets
//! no answer at all, exceptions go back as exception frames.
//!
//! Faults for tests: the next answers can be sent with a corrupted CRC. No
//! physics runs here; the devices keep the values they were built with.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::broadcast;
use tokio_modbus::{ExceptionCode, Response, SlaveRequest};
use tokio_util::sync::CancellationToken;

use super::device::{Device, DeviceCell};
use super::service::ServerShared;
use super::{SimDeviceHandle, SimDeviceSpec};
use crate::modbus::rtu::frame::{self, Answer, MAX_FRAME};

/// A running simulated line.
pub struct SimRtuLine {
    shared: Arc<ServerShared>,
    corrupt: Arc<AtomicU32>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl SimRtuLine {
    /// Serves `devices` on `port` until [`SimRtuLine::stop`].
    pub fn start(port: tokio_serial::SerialStream, devices: &[SimDeviceSpec]) -> SimRtuLine {
        let cells: BTreeMap<u8, DeviceCell> = devices
            .iter()
            .map(|d| {
                (
                    d.unit_id,
                    Arc::new(Mutex::new(Device::new(
                        d,
                        super::device::Build::calm(50_000.0),
                    ))),
                )
            })
            .collect();
        let (events, _) = broadcast::channel(64);
        let shared = Arc::new(ServerShared::new("rtu".into(), cells, events));
        let corrupt = Arc::new(AtomicU32::new(0));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(serve(port, shared.clone(), corrupt.clone(), cancel.clone()));
        SimRtuLine {
            shared,
            corrupt,
            cancel,
            task,
        }
    }

    pub fn device(&self, unit: u8) -> Option<SimDeviceHandle> {
        self.shared
            .devices
            .get(&unit)
            .cloned()
            .map(SimDeviceHandle::new)
    }

    /// The next `n` answers go out with a wrong CRC.
    pub fn corrupt_next(&self, n: u32) {
        self.corrupt.store(n, Ordering::SeqCst);
    }

    pub async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

async fn serve(
    mut port: tokio_serial::SerialStream,
    shared: Arc<ServerShared>,
    corrupt: Arc<AtomicU32>,
    cancel: CancellationToken,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(MAX_FRAME);
    let mut chunk = [0u8; MAX_FRAME];
    loop {
        let n = tokio::select! {
            () = cancel.cancelled() => return,
            r = port.read(&mut chunk) => match r {
                Ok(n) => n,
                // EIO while no slave end is open: wait for one.
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(len) = frame::request_len(&buf) {
            if len > MAX_FRAME {
                buf.clear();
                break;
            }
            if buf.len() < len {
                break;
            }
            let req: Vec<u8> = buf.drain(..len).collect();
            let Some(mut reply) = respond(&shared, &req) else {
                // Bad CRC or another unit: a slave stays silent and resyncs.
                buf.clear();
                continue;
            };
            if corrupt
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1))
                .is_ok()
            {
                let last = reply.len() - 1;
                reply[last] ^= 0xFF;
            }
            if port.write_all(&reply).await.is_err() {
                buf.clear();
            }
        }
    }
}

/// The answer frame to a request frame, or `None` when a slave stays silent.
/// Requests are answered by the same code as over TCP.
fn respond(shared: &ServerShared, req: &[u8]) -> Option<Vec<u8>> {
    let (unit, pdu) = frame::decode_request(req).ok()?;
    shared.devices.get(&unit)?;
    let function = req.get(1).copied()?;
    let Ok(pdu) = pdu else {
        let a = Answer::Exception(ExceptionCode::IllegalFunction);
        return Some(frame::answer(unit, function, &a, None));
    };
    let request = pdu.request();
    let a = match shared.handle(SlaveRequest {
        slave: unit,
        request,
    }) {
        Err(code) => Answer::Exception(code),
        Ok(Response::ReadHoldingRegisters(w) | Response::ReadInputRegisters(w)) => Answer::Words(w),
        Ok(Response::ReadDiscreteInputs(bits)) => {
            Answer::Words(bits.into_iter().map(u16::from).collect())
        }
        Ok(_) => Answer::Written,
    };
    Some(frame::answer(unit, function, &a, Some(&pdu)))
}
