//! The Modbus TCP server and RTU slave (`docs/modbus-server.md`): shares the
//! site's devices with the installer's other systems and the site itself
//! with a SCADA.
//! Each device answers under its unit id from its last poll's registers (no
//! bus traffic; inside a SunSpec device's models, what it never read as
//! "not implemented"), each site as one SunSpec device; writes are refused but for
//! a site's limits where the config allows a SCADA to set them, and for
//! devices whose config has them passed on (never to what steering writes).
//!
//! `frame.rs` is the framing (pure), `dispatch.rs` what a request gets,
//! `models.rs` a mirrored SunSpec device's registers inside its models,
//! `forward.rs` reads and writes passed on to a device, `site_map.rs` the
//! site's registers (pure), `site.rs` the task that keeps them, `conn.rs`
//! one connection, `listen.rs` the listeners and their bounds, `rtu.rs` the
//! RTU slave on a serial line, `peer.rs` who asked, `stats.rs` the counters. It never writes a register steering writes, never holds a
//! lock across an await, and never makes a bus or the control loop wait:
//! what it reads is published by their owners, and what it passes on waits
//! for an idle bus. A SCADA's limit changes and forwarded writes are
//! records of the site's steering history.

mod conn;
mod dispatch;
mod forward;
pub mod frame;
mod listen;
mod models;
mod peer;
mod rtu;
mod site;
pub mod site_map;
mod stats;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{ModbusServerConfig, Served};
use crate::modbus::{BusHandle, DeviceMaps};
use crate::steering::SteeringService;
use crate::telemetry::Live;

pub use stats::ServerStats;

/// What the server reads: the devices' state and last polls, the steering,
/// and the buses (for forwarded reads).
pub struct Parts {
    pub live: Arc<Live>,
    pub maps: Arc<DeviceMaps>,
    pub steering: SteeringService,
    pub buses: HashMap<String, BusHandle>,
}

/// A started server.
pub struct ModbusServer {
    addrs: Vec<SocketAddr>,
    ctx: Arc<dispatch::Context>,
}

/// The server's listeners and serial line, bound and opened before anything
/// else starts (a taken address fails the start with its address, a serial
/// port that cannot be opened with its path).
pub struct Bound {
    listeners: Vec<tokio::net::TcpListener>,
    serial: Option<rtu::Line>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot open the Modbus server's serial line {}: {source}", .path.display())]
    Serial {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Bound {
    pub async fn bind(config: &ModbusServerConfig) -> Result<Bound, BindError> {
        let listeners = listen::bind(&config.listen)
            .await
            .map_err(|(addr, source)| BindError::Listen { addr, source })?;
        let serial = match &config.serial {
            Some(line) => Some(rtu::open(line).map_err(|source| BindError::Serial {
                path: line.path.clone(),
                source,
            })?),
            None => None,
        };
        Ok(Bound { listeners, serial })
    }
}

impl ModbusServer {
    /// Serves on the bound listeners, on `tracker` until `cancel`.
    pub fn start(
        config: ModbusServerConfig,
        bound: Bound,
        parts: Parts,
        tracker: &TaskTracker,
        cancel: CancellationToken,
    ) -> std::io::Result<ModbusServer> {
        let listeners = bound.listeners;
        parts.maps.keep_images();
        let stats = Arc::new(ServerStats::default());
        let mut sites = site::Sites::default();
        for unit in &config.units {
            if let Served::Site(s) = &unit.served {
                let shared = sites.add(unit.unit_id, s.clone(), parts.steering.clone());
                tracker.spawn(site::keep(
                    shared,
                    parts.live.clone(),
                    parts.steering.clone(),
                    cancel.child_token(),
                ));
            }
        }
        let forward =
            forward::Forwarders::new(&parts.live.devices(), &parts.buses, config.forward_cache_ms);
        let ctx = Arc::new(dispatch::Context {
            config,
            forward,
            live: parts.live,
            maps: parts.maps,
            sites,
            stats: stats.clone(),
            steering: parts.steering,
        });
        if let Some(line) = bound.serial {
            tracker.spawn(rtu::serve(line, ctx.clone(), cancel.child_token()));
        }
        let addrs = listen::serve(listeners, ctx.clone(), tracker, cancel)?;
        Ok(ModbusServer { addrs, ctx })
    }

    /// The addresses it listens on (port 0 resolved).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Its counters, for `/metrics`.
    pub fn collector(&self) -> Arc<dyn crate::metrics::Collect> {
        self.ctx.clone()
    }
}
