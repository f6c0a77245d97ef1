//! The bus task: sole owner of one Modbus connection. It polls each device on the
//! bus at its interval, discovers devices on first contact, backs off from failing
//! devices, and runs commands (steering writes, read-backs) ahead of polls.
//!
//! Only this task touches its `Port`. Others hold a [`BusHandle`] and send
//! commands over a bounded channel, getting the answer on a oneshot; reads
//! for others (the Modbus server's forwarded reads) wait on a channel of
//! their own until nothing else is due.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::ModbusError;
use super::image::PollImage;
use super::link::Port;
use super::maps::DeviceMaps;
use super::poll::{poll_device, DeviceState, PollError, Polled};
use super::reader::RegisterReader;
use super::stats::BusStats;
use crate::config::{BusConfig, DeviceConfig, PollingConfig};
use crate::liveness::{Heartbeat, Pulse};
use crate::model::{time::now_ms, Property, Sample};
use crate::register::plan::Span;
use crate::telemetry::Telemetry;
use crate::util::Backoff;

/// Commands queued at most; senders wait beyond that.
const COMMAND_QUEUE: usize = 64;
/// Reads for others that wait until the bus is idle, queued at most; past
/// it they are refused at once ([`IdleReadError::Busy`]).
const IDLE_QUEUE: usize = 4;

/// One step of a command.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Read(Span),
    Write { addr: u16, values: Vec<u16> },
}

/// What a step returned: the words of a read, nothing for a write.
#[derive(Debug, Clone, PartialEq)]
pub enum OpOutput {
    Words(Vec<u16>),
    Written,
}

/// What a transaction did: the outputs of the ops that ran, in order, and
/// the failure that stopped it, if one did (the ops after it did not run).
#[derive(Debug)]
pub struct Transacted {
    pub out: Vec<OpOutput>,
    pub error: Option<ModbusError>,
}

/// Why a read (or write) waiting for an idle bus did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum IdleReadError {
    /// [`IDLE_QUEUE`] reads wait already.
    #[error("the bus has {IDLE_QUEUE} reads of others waiting already")]
    Busy,
    #[error(transparent)]
    Failed(#[from] ModbusError),
}

struct Command {
    unit: u8,
    ops: Vec<Op>,
    reply: oneshot::Sender<Transacted>,
}

/// A device for a running bus task to poll from now on.
struct Added {
    device: DeviceConfig,
    reply: oneshot::Sender<()>,
}

/// Cheap handle to a bus task.
#[derive(Clone)]
pub struct BusHandle {
    name: Arc<str>,
    tx: mpsc::Sender<Command>,
    idle: mpsc::Sender<Command>,
    adds: mpsc::Sender<Added>,
    stats: Arc<BusStats>,
    pulse: Pulse,
}

impl BusHandle {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bus task's heartbeat, for the watchdog.
    pub fn pulse(&self) -> &Pulse {
        &self.pulse
    }

    /// The bus's poll and request counters.
    pub fn stats(&self) -> &Arc<BusStats> {
        &self.stats
    }

    /// Commands sent and not yet taken up by the bus task (they wait for the
    /// request in flight).
    pub fn queued(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Runs `ops` in order on device `unit`, before any further poll request.
    /// Stops at the first failing op and returns its error.
    pub async fn transact(&self, unit: u8, ops: Vec<Op>) -> Result<Vec<OpOutput>, ModbusError> {
        let done = self.transact_partial(unit, ops).await?;
        match done.error {
            Some(e) => Err(e),
            None => Ok(done.out),
        }
    }

    /// [`BusHandle::transact`] that also says which ops ran before a failure
    /// (a write taken, then its read-back refused). `Err` only when the bus
    /// task is gone.
    pub async fn transact_partial(
        &self,
        unit: u8,
        ops: Vec<Op>,
    ) -> Result<Transacted, ModbusError> {
        let (reply, rx) = oneshot::channel();
        let stopped = || ModbusError::Stopped(self.name.clone());
        self.tx
            .send(Command { unit, ops, reply })
            .await
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())
    }

    /// Reads `span` of device `unit` when the bus has nothing else to do:
    /// behind every poll that is due and every command, so it never delays
    /// control (it may delay a poll not yet due by the one request). At
    /// most [`IDLE_QUEUE`] wait; past that the read is refused at once.
    pub async fn read_when_idle(&self, unit: u8, span: Span) -> Result<Vec<u16>, IdleReadError> {
        match self.when_idle(unit, Op::Read(span)).await?.next() {
            Some(OpOutput::Words(w)) => Ok(w),
            _ => Err(ModbusError::Protocol("no words for a read".into()).into()),
        }
    }

    /// Writes `values` from `addr` of device `unit` when the bus has nothing
    /// else to do, as [`BusHandle::read_when_idle`] reads.
    pub async fn write_when_idle(
        &self,
        unit: u8,
        addr: u16,
        values: Vec<u16>,
    ) -> Result<(), IdleReadError> {
        self.when_idle(unit, Op::Write { addr, values })
            .await
            .map(drop)
    }

    /// Queues `op` for device `unit` on the idle queue and waits for it:
    /// its outputs, or the bus's error.
    async fn when_idle(
        &self,
        unit: u8,
        op: Op,
    ) -> Result<std::vec::IntoIter<OpOutput>, IdleReadError> {
        let (reply, rx) = oneshot::channel();
        let stopped = || ModbusError::Stopped(self.name.clone());
        let cmd = Command {
            unit,
            ops: vec![op],
            reply,
        };
        match self.idle.try_send(cmd) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Err(IdleReadError::Busy),
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(stopped().into()),
        }
        let done = rx.await.map_err(|_| stopped())?;
        match done.error {
            Some(e) => Err(e.into()),
            None => Ok(done.out.into_iter()),
        }
    }

    /// Has the bus task poll `device` from now on (a config change applied
    /// live); answers once the task took it. The device must be known to
    /// the telemetry's `Live` and the store first.
    pub async fn add_device(&self, device: DeviceConfig) -> Result<(), ModbusError> {
        let (reply, rx) = oneshot::channel();
        let stopped = || ModbusError::Stopped(self.name.clone());
        self.adds
            .send(Added { device, reply })
            .await
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())
    }
}

struct Slot {
    cfg: DeviceConfig,
    next_due: Instant,
    failures: u32,
    state: DeviceState,
}

/// Builds the task's state; call [`BusTask::run`] on a spawned task.
pub struct BusTask {
    name: Arc<str>,
    port: Port,
    rx: mpsc::Receiver<Command>,
    idle: mpsc::Receiver<Command>,
    adds: mpsc::Receiver<Added>,
    slots: Vec<Slot>,
    polling: PollingConfig,
    telemetry: Telemetry,
    maps: Arc<DeviceMaps>,
    stats: Arc<BusStats>,
    heartbeat: Heartbeat,
    /// The bus said once that it cannot keep its poll intervals.
    overrun_said: bool,
}

impl BusTask {
    pub fn new(
        bus: &BusConfig,
        devices: Vec<DeviceConfig>,
        polling: PollingConfig,
        telemetry: Telemetry,
        maps: Arc<DeviceMaps>,
    ) -> (BusTask, BusHandle) {
        let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
        let (adds_tx, adds) = mpsc::channel(1);
        let (idle_tx, idle) = mpsc::channel(IDLE_QUEUE);
        let name: Arc<str> = bus.name.as_str().into();
        let now = Instant::now();
        let stats = Arc::new(BusStats::new(
            &bus.name,
            devices.iter().map(|d| d.reference.clone()),
        ));
        let slots = devices
            .into_iter()
            .map(|cfg| Slot {
                cfg,
                next_due: now,
                failures: 0,
                state: DeviceState::default(),
            })
            .collect();
        let task = BusTask {
            name: name.clone(),
            port: Port::new(bus.transport.clone(), Duration::from_millis(bus.timeout_ms))
                .with_stats(stats.requests.clone()),
            rx,
            idle,
            adds,
            slots,
            polling,
            telemetry,
            maps,
            stats: stats.clone(),
            heartbeat: Heartbeat::new(format!("bus {}", bus.name)),
            overrun_said: false,
        };
        let pulse = task.heartbeat.pulse();
        (
            task,
            BusHandle {
                name,
                tx,
                idle: idle_tx,
                adds: adds_tx,
                stats,
                pulse,
            },
        )
    }

    pub async fn run(mut self, cancel: CancellationToken) {
        tracing::info!(bus = %self.name, devices = self.slots.len(), "bus task started");
        let mut beat = Heartbeat::ticker();
        loop {
            self.heartbeat.beat();
            let due = self
                .slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.next_due)
                .map(|(i, s)| (i, s.next_due));
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                _ = beat.tick() => {}
                cmd = self.rx.recv() => match cmd {
                    Some(cmd) => execute(&mut self.port, cmd).await,
                    None => break,
                },
                Some(added) = self.adds.recv() => self.add(added),
                () = sleep_until(due.map(|(_, at)| at)) => {
                    if let Some((i, _)) = due {
                        self.poll(i).await;
                    }
                }
                // Last: only when no command waits and no poll is due.
                Some(cmd) = self.idle.recv() => execute(&mut self.port, cmd).await,
            }
        }
        self.port.close().await;
        tracing::info!(bus = %self.name, "bus task stopped");
    }

    /// A device added at run time: polled at once, then at its interval.
    /// Its polls count for its bus; its own failed polls are not in
    /// `/metrics` until the next start.
    fn add(&mut self, added: Added) {
        tracing::info!(bus = %self.name, device = %added.device.reference, "device added: polling it");
        self.slots.push(Slot {
            cfg: added.device,
            next_due: Instant::now(),
            failures: 0,
            state: DeviceState::default(),
        });
        let _ = added.reply.send(());
    }

    async fn poll(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        let mut reader = PollReader {
            port: &mut self.port,
            rx: &mut self.rx,
            unit: slot.cfg.unit_id,
        };
        let started = Instant::now();
        let result = poll_device(&mut reader, &slot.cfg, &self.polling, &mut slot.state).await;
        self.stats.record_poll(i, result.is_ok(), started.elapsed());
        match result {
            Ok(polled) => self.answered(i, polled, started).await,
            Err(e) => self.failed(i, &e),
        }
    }

    /// A poll answered: the device's catalog and register image brought up
    /// to date, its samples recorded and handed to the store.
    async fn answered(&mut self, i: usize, polled: Polled, started: Instant) {
        let Polled {
            values,
            fresh: fresh_map,
            statics_read,
            image,
        } = polled;
        self.schedule_after_answer(i);
        let slot = &mut self.slots[i];
        let id = slot.cfg.id;
        if let Some(map) = fresh_map {
            let offered: Vec<Property> = values.iter().map(|(p, _)| *p).collect();
            self.telemetry.set_catalog(id, offered, map.info());
            self.maps.set(id, Some(map));
        } else if let Some(map) = &slot.state.map {
            let live = self.telemetry.live();
            let grown = !live.inspect(id, |s| values.iter().all(|(p, _)| s.offers(*p)));
            // Static points read again may carry new ratings.
            if grown || statics_read {
                let mut offered = live.snapshot(id).properties;
                offered.extend(values.iter().map(|(p, _)| *p));
                self.telemetry.set_catalog(id, offered, map.info());
            }
        }
        let ts = now_ms();
        if let Some(map) = slot.state.map.as_ref().filter(|_| self.maps.keeps_images()) {
            let image = PollImage::build(&image, &map.discovered, &map.chain, Instant::now(), ts);
            self.maps.set_image(id, Some(Arc::new(image)));
        }
        let samples: Vec<Sample> = values
            .into_iter()
            .map(|(property, value)| Sample {
                device: id,
                property,
                ts_ms: ts,
                value,
            })
            .collect();
        tracing::trace!(device = %slot.cfg.reference, elapsed_ms = started.elapsed().as_millis() as u64, "polled");
        if samples.is_empty() {
            self.telemetry.mark_online(id, ts);
        } else {
            self.telemetry.record(id, &samples);
            self.hand_off(samples).await;
        }
    }

    /// After an answer: the device's next poll one interval on, or at once
    /// when that is past already (an overrun: counted, and said once).
    fn schedule_after_answer(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        if slot.failures > 0 {
            tracing::info!(device = %slot.cfg.reference, "device answers again");
        }
        slot.failures = 0;
        let interval = Duration::from_millis(slot.cfg.poll_interval_ms);
        // Keep the cadence, but never queue up missed polls. A next
        // poll already due is an overrun: the link carries less than
        // the devices ask, and they are polled in turn (the earliest
        // due first), as often as it allows.
        let (next, now) = (slot.next_due + interval, Instant::now());
        if next < now {
            self.stats.overruns.fetch_add(1, Ordering::Relaxed);
            if !self.overrun_said {
                self.overrun_said = true;
                tracing::warn!(
                    bus = %self.name,
                    device = %slot.cfg.reference,
                    interval_ms = slot.cfg.poll_interval_ms,
                    late_ms = (now - next).as_millis() as u64,
                    "polls overrun: this bus cannot poll its devices at their intervals; each is polled in turn as often as the link allows (sitegate_modbus_poll_overruns_total counts them)"
                );
            }
        }
        slot.next_due = next.max(now);
    }

    /// A poll failed: the device's next try (at its cadence the first time,
    /// then backing off), its map forgotten after [`REDISCOVER_AFTER`]
    /// failures in a row, and the failure told to the live values.
    fn failed(&mut self, i: usize, e: &PollError) {
        let slot = &mut self.slots[i];
        let id = slot.cfg.id;
        slot.failures += 1;
        // A first failure is retried at the device's own cadence: one
        // lost or late answer must not cost the grid loop its meter
        // (lost after 3 poll intervals without a reading, which a
        // backoff after the timeout would pass). From the second in a
        // row, the device backs off.
        let now = Instant::now();
        let retry_at = if slot.failures == 1 {
            let interval = Duration::from_millis(slot.cfg.poll_interval_ms);
            (slot.next_due + interval).max(now)
        } else {
            now + backoff(&self.polling, slot.failures - 1)
        };
        slot.next_due = retry_at;
        if slot.failures >= REDISCOVER_AFTER && slot.state.map.is_some() {
            slot.state.forget();
            self.maps.set(id, None);
            self.maps.set_image(id, None);
        }
        if slot.failures == 1 {
            tracing::warn!(device = %slot.cfg.reference, bus = %self.name, error = %e, "poll failed; device offline");
        } else {
            tracing::debug!(device = %slot.cfg.reference, failures = slot.failures, retry_in_ms = retry_at.saturating_duration_since(now).as_millis() as u64, error = %e, "poll failed again");
        }
        self.telemetry.mark_failed(id, e.to_string());
    }
}

impl BusTask {
    /// Hands a poll's samples to the store. While its queue is full, the task
    /// waits for room and runs commands meanwhile, so a stalled store delays
    /// polls but no setpoint write.
    async fn hand_off(&mut self, samples: Vec<Sample>) {
        let Some(tx) = self.telemetry.downstream() else {
            return;
        };
        let permit = match tx.try_reserve() {
            Ok(permit) => Ok(permit),
            Err(mpsc::error::TrySendError::Closed(())) => Err(()),
            Err(mpsc::error::TrySendError::Full(())) => {
                self.stats.store_waits.fetch_add(1, Ordering::Relaxed);
                self.stats.waiting_for_store.store(true, Ordering::Relaxed);
                tracing::debug!(bus = %self.name, "store queue full: serving commands while waiting");
                let mut beat = Heartbeat::ticker();
                let reserve = tx.reserve();
                tokio::pin!(reserve);
                let permit = loop {
                    self.heartbeat.beat();
                    tokio::select! {
                        biased;
                        permit = &mut reserve => break permit.map_err(|_| ()),
                        Some(cmd) = self.rx.recv() => execute(&mut self.port, cmd).await,
                        _ = beat.tick() => {}
                    }
                };
                self.stats.waiting_for_store.store(false, Ordering::Relaxed);
                permit
            }
        };
        // Closed: the store is shutting down; the latest values are still served.
        if let Ok(permit) = permit {
            permit.send(samples);
        }
    }
}

/// Consecutive failures after which the device is discovered afresh (it may
/// have been replaced or updated).
const REDISCOVER_AFTER: u32 = 3;

/// The wait before the next attempt at a device that failed `failures` + 1
/// times in a row (the first failure is retried at its cadence):
/// `min × 2^(failures−1)`, capped at `max`, without jitter: each device keeps
/// its own rhythm on its bus.
pub fn backoff(p: &PollingConfig, failures: u32) -> Duration {
    Backoff::new(
        Duration::from_millis(p.min_backoff_ms),
        Duration::from_millis(p.max_backoff_ms),
    )
    .ceiling(failures.saturating_sub(1))
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Reads for a poll, running queued commands before each request so that a
/// steering write waits for one request at most.
struct PollReader<'a> {
    port: &'a mut Port,
    rx: &'a mut mpsc::Receiver<Command>,
    unit: u8,
}

impl RegisterReader for PollReader<'_> {
    async fn read(&mut self, span: Span) -> Result<Vec<u16>, ModbusError> {
        while let Ok(cmd) = self.rx.try_recv() {
            execute(self.port, cmd).await;
        }
        self.port.read(self.unit, span).await
    }
}

async fn execute(port: &mut Port, cmd: Command) {
    let mut out = Vec::with_capacity(cmd.ops.len());
    let mut error = None;
    for op in cmd.ops {
        let step = match op {
            Op::Read(span) => port.read(cmd.unit, span).await.map(OpOutput::Words),
            Op::Write { addr, values } => port
                .write(cmd.unit, addr, &values)
                .await
                .map(|()| OpOutput::Written),
        };
        match step {
            Ok(o) => out.push(o),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    // The requester may have given up waiting; nothing to do then.
    let _ = cmd.reply.send(Transacted { out, error });
}
