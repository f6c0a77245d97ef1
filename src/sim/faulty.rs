//! A fault-injecting Modbus TCP peer: a proxy in front of a real (or simulated)
//! Modbus TCP server that passes requests through, except when a fault is
//! queued: then the next request gets that fault instead of a clean answer.
//!
//! For tests of the agent's failure handling. It parses only the MBAP header
//! (transaction id, length, unit id); the PDU is passed through untouched
//! unless a fault rewrites it.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_modbus::ExceptionCode;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What happens to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The answer arrives this much later.
    Delay(Duration),
    /// An exception answer instead of the device's.
    Exception(ExceptionCode),
    /// Bytes that are not a Modbus frame.
    Garbage,
    /// A well-framed read answer carrying fewer registers than asked.
    Short,
    /// The answer with another transaction id.
    WrongTransaction,
    /// The answer with another unit id.
    WrongUnit,
    /// The connection is closed instead of answering.
    Disconnect,
    /// No answer at all (the connection stays open).
    Silence,
}

type Queue = Arc<Mutex<VecDeque<Fault>>>;

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running fault-injecting proxy.
pub struct FaultyPeer {
    addr: SocketAddr,
    queue: Queue,
    applied: Arc<Mutex<Vec<Fault>>>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl FaultyPeer {
    /// Listens on an ephemeral loopback port, forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultyPeer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let peer = FaultyPeer {
            addr,
            queue: Arc::default(),
            applied: Arc::default(),
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
        };
        let (queue, applied, cancel, tasks) = (
            peer.queue.clone(),
            peer.applied.clone(),
            peer.cancel.clone(),
            peer.tasks.clone(),
        );
        peer.tasks.spawn(async move {
            loop {
                let client = tokio::select! {
                    () = cancel.cancelled() => return,
                    r = listener.accept() => match r {
                        Ok((s, _)) => s,
                        Err(_) => continue,
                    },
                };
                let _ = client.set_nodelay(true);
                let c = Conn {
                    queue: queue.clone(),
                    applied: applied.clone(),
                };
                let cancel = cancel.clone();
                tasks.spawn(async move {
                    tokio::select! {
                        () = cancel.cancelled() => {}
                        _ = c.run(client, upstream) => {}
                    }
                });
            }
        });
        Ok(peer)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a fault for the next request that arrives.
    pub fn inject(&self, fault: Fault) {
        locked(&self.queue).push_back(fault);
    }

    /// Faults still queued.
    pub fn pending(&self) -> usize {
        locked(&self.queue).len()
    }

    /// Faults applied so far, in order.
    pub fn applied(&self) -> Vec<Fault> {
        locked(&self.applied).clone()
    }

    pub async fn stop(self) {
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

struct Conn {
    queue: Queue,
    applied: Arc<Mutex<Vec<Fault>>>,
}

/// Reads one MBAP frame (header and PDU).
async fn read_frame(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = [0u8; 7];
    s.read_exact(&mut head).await?;
    let len = usize::from(u16::from_be_bytes([head[4], head[5]]));
    if !(2..=254).contains(&len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bad MBAP length",
        ));
    }
    let mut frame = head.to_vec();
    frame.resize(6 + len, 0);
    s.read_exact(&mut frame[7..]).await?;
    Ok(frame)
}

impl Conn {
    async fn run(self, mut client: TcpStream, upstream: SocketAddr) -> io::Result<()> {
        let mut up = TcpStream::connect(upstream).await?;
        let _ = up.set_nodelay(true);
        loop {
            let req = read_frame(&mut client).await?;
            let fault = locked(&self.queue).pop_front();
            if let Some(f) = &fault {
                locked(&self.applied).push(f.clone());
            }
            let reply = match fault {
                Some(Fault::Exception(code)) => {
                    let mut r = req[..7].to_vec();
                    r[4..6].copy_from_slice(&3u16.to_be_bytes());
                    r.extend_from_slice(&[req[7] | 0x80, u8::from(code)]);
                    r
                }
                Some(Fault::Garbage) => vec![0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x02, 0x01, 0x83],
                Some(Fault::Disconnect) => return Ok(()),
                Some(Fault::Silence) => continue,
                other => {
                    up.write_all(&req).await?;
                    let mut r = read_frame(&mut up).await?;
                    match other {
                        Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
                        Some(Fault::WrongTransaction) => {
                            let tid = u16::from_be_bytes([r[0], r[1]]).wrapping_add(1);
                            r[..2].copy_from_slice(&tid.to_be_bytes());
                        }
                        Some(Fault::WrongUnit) => r[6] = r[6].wrapping_add(1),
                        Some(Fault::Short) if matches!(r[7], 3 | 4) && r[8] >= 2 => {
                            // One register less, framed consistently.
                            r[8] -= 2;
                            r.truncate(r.len() - 2);
                            let len = (r.len() - 6) as u16;
                            r[4..6].copy_from_slice(&len.to_be_bytes());
                        }
                        _ => {}
                    }
                    r
                }
            };
            client.write_all(&reply).await?;
        }
    }
}
