//! A §14a control box for the tests: the `eebus` crate's Energy Guard (LPC
//! or LPP) on its own SHIP hub, dialling the agent's node over TCP, TLS and
//! WebSocket, and requiring the limit a test gives it. It records what the
//! guard reported, so a test can see the acknowledgement or the refusal,
//! and, as MGCP's and MPC's Monitoring Appliance, what the node says the
//! grid connection point and the controllable consumers read.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eebus::cert::{self, CertParams};
use eebus::model::{DeviceType, EntityType};
use eebus::runtime::{Hub, HubEvent, Node, TrustStore};
use eebus::ship::Ski;
use eebus::spine::{Engine, LocalDevice, LocalEntity};
use eebus::tls::ShipTls;
use eebus::usecases::descriptor::{actors, names};
use eebus::usecases::limitation::{self, Direction, EnergyGuardActor, GuardEvent, LimitWrite};
use eebus::usecases::monitoring::{self, MonitoringApplianceActor, MonitoringEvent};
use eebus::usecases::{lpc, lpp, mgcp, mpc};
use tokio::sync::mpsc;

/// What the box saw.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub connected: bool,
    pub handshake_failures: usize,
    pub accepted: Vec<LimitWrite>,
    pub refused: Vec<LimitWrite>,
    /// MGCP's readings by the measurand's signal name (`totalActivePower`,
    /// `voltageA`, ...); `None`: published as an error.
    pub grid: std::collections::BTreeMap<String, Option<f64>>,
    /// MPC's readings of the controllable consumers, named as `grid`'s.
    pub consumers: std::collections::BTreeMap<String, Option<f64>>,
}

pub struct ControlBox {
    pub ski: Ski,
    seen: Arc<Mutex<Seen>>,
    require: mpsc::UnboundedSender<Option<LimitWrite>>,
    task: tokio::task::JoinHandle<()>,
}

/// The box's SHIP ID: its certificate's name and its hub's identity.
const SHIP_ID: &str = "i:46925_u:ControlBox-test";

/// A box's key, made ahead so the agent's config can trust its SKI.
pub fn key() -> eebus::cert::Identity {
    cert::self_signed(CertParams::new(SHIP_ID)).expect("a box key")
}

/// The same box again (its key, so its SKI), as after the box restarts.
pub fn same_key(id: &eebus::cert::Identity) -> eebus::cert::Identity {
    let key = rcgen::KeyPair::try_from(id.key_der().as_slice()).expect("the box's key");
    cert::self_signed_with(CertParams::new(SHIP_ID), key).expect("a box key")
}

impl ControlBox {
    /// Starts an LPC box with `identity` that dials `node` (trusting
    /// `node_ski`) and requires `limit` of it once it is found.
    pub async fn start(
        identity: eebus::cert::Identity,
        node_ski: Ski,
        node: SocketAddr,
        use_case: &str,
        limit: Option<LimitWrite>,
    ) -> ControlBox {
        let ski = identity.ski;
        let direction: Direction = if use_case == "lpp" {
            lpp::DIRECTION
        } else {
            lpc::DIRECTION
        };
        let mut device = LocalDevice::new(
            "i:46925",
            "ControlBox-test",
            DeviceType::ElectricitySupplySystem,
        )
        .expect("the box's address");
        device
            .add_entity(
                LocalEntity::new([1], EntityType::GridGuard)
                    .with_feature(limitation::client_feature(1))
                    .with_feature(limitation::device_diagnosis_feature(2)),
            )
            .expect("the box's entity");
        let client = device.address_of(&[1], 1);
        let diagnosis = device.address_of(&[1], 2);
        let mut engine = Engine::new(device);
        engine.add_use_case(
            [1],
            1,
            if use_case == "lpp" {
                &lpp::ENERGY_GUARD
            } else {
                &lpc::ENERGY_GUARD
            },
        );
        engine.add_use_case([1], 1, &mgcp::MONITORING_APPLIANCE);
        engine.add_use_case([1], 1, &mpc::MONITORING_APPLIANCE);
        let mut monitor = MonitoringApplianceActor::new(client.clone());
        let node_cfg = Node::new(
            SHIP_ID,
            ShipTls::new(identity),
            TrustStore::with([node_ski]),
        );
        let mut hub = Hub::new(node_cfg, engine);
        let mut guard = EnergyGuardActor::new(direction, client, diagnosis, hub.now());
        hub.remember(node_ski, node);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (tx, mut rx) = mpsc::unbounded_channel::<Option<LimitWrite>>();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut wanted = limit;
            let mut found = None;
            let mut consumers = None;
            loop {
                // `Hub::next` is not raced (a write dropped half-way garbles
                // the stream): a new requirement is taken between calls, and
                // an overdue deadline is run once, then every 10 ms at most.
                let now = hub.now();
                while let Ok(w) = rx.try_recv() {
                    wanted = w;
                    if let Some(d) = &found {
                        guard.require(d, wanted, now);
                    }
                }
                hub.wake_at(guard.poll_timeout().max(now + Duration::from_millis(10)));
                hub.wake_at(now + Duration::from_millis(200));
                let event = hub.next().await;
                let Ok(event) = event else { return };
                let mut reports = Vec::new();
                match event {
                    HubEvent::Connected { .. } => record.lock().unwrap().connected = true,
                    HubEvent::HandshakeFailed { .. } => {
                        record.lock().unwrap().handshake_failures += 1
                    }
                    HubEvent::Disconnected { .. } => record.lock().unwrap().connected = false,
                    HubEvent::PeerDiscovered { device, .. } => {
                        let plays = hub
                            .engine()
                            .peer(&device)
                            .and_then(|r| limitation::locate(r, direction))
                            .is_some();
                        let grid = hub.engine().peer(&device).and_then(|r| {
                            monitoring::locate(r, names::MGCP, actors::GRID_CONNECTION_POINT)
                        });
                        if let Some(unit) = grid {
                            monitor.attach(hub.engine_mut(), unit, now);
                        }
                        let mpc = hub.engine().peer(&device).and_then(|r| {
                            monitoring::locate(r, names::MPC, actors::MONITORED_UNIT)
                        });
                        if let Some(unit) = mpc {
                            consumers = Some(unit.id());
                            monitor.attach(hub.engine_mut(), unit, now);
                        }
                        if plays {
                            found = Some(device.clone());
                            if wanted.is_some() {
                                guard.require(&device, wanted, now);
                            }
                        }
                    }
                    HubEvent::Spine(e) => {
                        if let Some(MonitoringEvent::Measured { readings, unit }) =
                            monitor.handle_event(&e)
                        {
                            let mut seen = record.lock().unwrap();
                            let into = if consumers.as_ref() == Some(&unit) {
                                &mut seen.consumers
                            } else {
                                &mut seen.grid
                            };
                            for r in readings {
                                into.insert(r.measurand.signal_name(), r.usable());
                            }
                        }
                        reports.extend(guard.handle_event(hub.engine_mut(), &e, now))
                    }
                    HubEvent::Tick => reports = guard.handle_timeout(hub.engine_mut(), now),
                    _ => {}
                }
                for r in reports {
                    match r {
                        GuardEvent::LimitAccepted { limit, .. } => {
                            record.lock().unwrap().accepted.push(limit)
                        }
                        GuardEvent::LimitRefused { limit, .. } => {
                            record.lock().unwrap().refused.push(limit)
                        }
                        _ => {}
                    }
                }
            }
        });
        ControlBox {
            ski,
            seen,
            require: tx,
            task,
        }
    }

    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    /// Requires another limit (the guard writes it when its rules allow).
    pub fn require(&self, limit: Option<LimitWrite>) {
        let _ = self.require.send(limit);
    }

    /// Waits until `check` holds of what the box saw; panics after `within`.
    pub async fn until(&self, what: &str, within: Duration, check: impl Fn(&Seen) -> bool) -> Seen {
        let start = tokio::time::Instant::now();
        loop {
            let s = self.seen();
            if check(&s) {
                return s;
            }
            assert!(start.elapsed() < within, "the box: {what}; it saw {s:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The box goes away: its hub and connections are dropped, no heartbeat
    /// follows.
    pub fn stop(self) {
        self.task.abort();
    }
}
