//! The LPC timings over real sockets, on a paused clock: the node's task
//! (hub, use cases, store on disk) against the `eebus` crate's Energy Guard
//! over TCP, TLS 1.2, WebSocket and SHIP, and hours of heartbeats, silence
//! and failsafe stepped through in seconds.
//!
//! The two sides connect on real time; then tokio's clock is paused and
//! stepped by hand. Between steps the test yields for a few real
//! milliseconds so that the loopback's bytes arrive before the clock moves
//! on (tokio's auto-advance would otherwise fire a timeout while an answer
//! is still in flight). The pure rules are `src/eebus/policy/tests.rs`'s.

use std::sync::Arc;
use std::time::Duration;

use eebus::usecases::limitation::LimitWrite;
use sitegate::steering::runtime::SiteRuntime;
use sitegate::steering::service::AuditQueue;
use sitegate::steering::sources::{Kind, Server, SourceLimit};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::common::eebus_box::{self, ControlBox};
use crate::steering_support::{site_header, SITE};

const S: Duration = Duration::from_secs(1);
/// The failsafe consumption limit of the node's config.
const FAILSAFE_W: f64 = 4_200.0;

/// A node on its own, its store in `dir`.
struct Node {
    site: Arc<SiteRuntime>,
    /// The node's store: `settle` waits for the writes it has queued.
    store: sitegate::store::StoreHandle,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    ski: eebus::ship::Ski,
    addr: std::net::SocketAddr,
}

fn config(box_ski: &eebus::ship::Ski, listen: std::net::SocketAddr) -> sitegate::config::Config {
    let text = format!(
        "{}\n[eebus]\nsite = \"{SITE}\"\nlisten = \"{listen}\"\ntrusted_ski = \"{}\"\n\
         contractual_max_consumption_w = 60000\ncontractual_max_production_w = 40000\n\
         failsafe_consumption_w = {FAILSAFE_W}\nfailsafe_production_w = 20000\nmdns = false\n",
        site_header(250, 30).replace("{rated_production}", ""),
        hex::encode(box_ski.as_bytes())
    );
    sitegate::config::parse(&text).expect("a valid config")
}

impl Node {
    /// Starts the node of a config trusting `box_ski` (its key and its
    /// store kept in `dir`, as the agent keeps them in its state folder).
    async fn start(box_ski: &eebus::ship::Ski, dir: &std::path::Path) -> Node {
        let listen = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
            l.local_addr().expect("its address")
        };
        let mut cfg = config(box_ski, listen);
        cfg.storage.path = dir.join("sitegate.db");
        let eebus = cfg.eebus.clone().expect("[eebus]");
        let ski = sitegate::eebus::identity::load_or_make(dir, &eebus)
            .expect("the node's key")
            .ski;
        let live = Arc::new(sitegate::telemetry::Live::new(&[]));
        let site = Arc::new(SiteRuntime::new(
            cfg.sites[0].clone(),
            Default::default(),
            Default::default(),
            &live,
        ));
        let store =
            sitegate::store::StoreHandle::open(&cfg.storage, Vec::new()).expect("the store opens");
        let (history, _) = tokio::sync::mpsc::channel(1_024);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(sitegate::eebus::task::run(
            sitegate::eebus::task::Parts {
                config: eebus,
                site: site.clone(),
                live,
                history: AuditQueue(history),
                store: sitegate::eebus::store::EebusStore::new(store.clone()),
                state_dir: dir.to_path_buf(),
            },
            cancel.clone(),
        ));
        Node {
            site,
            store,
            cancel,
            task,
            ski,
            addr: listen,
        }
    }

    /// What LPC holds the site to now.
    fn consumption(&self) -> Option<SourceLimit> {
        self.site
            .limits_of(Server::Eebus)
            .tightest(Kind::Consumption)
            .cloned()
    }

    /// What LPP holds the export to now (beside the contract's 40 kW).
    fn production(&self) -> Option<SourceLimit> {
        self.site
            .limits_of(Server::Eebus)
            .tightest(Kind::Export)
            .cloned()
    }

    /// Waits (real time: the handshake runs on real sockets) until `done`
    /// holds of the node; `what` and the node's limits name a timeout.
    async fn wait_for(&self, what: &str, done: impl Fn(&Node) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{what}: {:?}",
                self.site.limits_of(Server::Eebus)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until LPC holds `w` W, in failsafe or not.
    async fn until(&self, w: f64, failsafe: bool) -> SourceLimit {
        let holds = |n: &Node| {
            n.consumption()
                .is_some_and(|l| l.value == w && l.failsafe == failsafe)
        };
        self.wait_for(&format!("LPC holds {w} W (failsafe {failsafe})"), holds)
            .await;
        self.consumption().expect("held just now")
    }

    async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

/// Lets the loopback's bytes through, and the node's store writes finish,
/// without moving the paused clock. The runtime thread sleeps a millisecond
/// at a time (the kernel carries the bytes, the store's writer thread
/// commits), then yields enough times for the scheduler to poll the sockets
/// and run what they woke: the runtime is never idle, so it never
/// auto-advances, and the test spends its time asleep, not spinning a core
/// the rest of the suite needs.
///
/// A state change holds the node's loop until its store write is done (on
/// the writer's thread, in real time): a flush queued behind it is waited
/// for, or a heartbeat could sit unread while the clock moves past its
/// deadline on a loaded machine.
async fn settle(node: &Node) {
    let breathe = || async {
        std::thread::sleep(Duration::from_millis(1));
        for _ in 0..128 {
            tokio::task::yield_now().await;
        }
    };
    for _ in 0..8 {
        breathe().await;
    }
    let store = node.store.clone();
    let written = tokio::spawn(async move { store.flush().await });
    while !written.is_finished() {
        breathe().await;
    }
    breathe().await;
}

/// Steps the paused clock by `step` until `total` has passed, calling
/// `each` after every step with the time passed so far.
async fn step_through(
    node: &Node,
    total: Duration,
    step: Duration,
    mut each: impl FnMut(Duration),
) {
    step_until(node, total, step, |t| {
        each(t);
        None::<()>
    })
    .await;
}

/// Steps the paused clock by `step`, at most until `total` has passed,
/// and stops at the first step where `found` gives something: that, with
/// the time passed, or `None` if no step did.
async fn step_until<T>(
    node: &Node,
    total: Duration,
    step: Duration,
    mut found: impl FnMut(Duration) -> Option<T>,
) -> Option<(Duration, T)> {
    let start = Instant::now();
    while start.elapsed() < total {
        tokio::time::advance(step).await;
        settle(node).await;
        let t = start.elapsed();
        if let Some(v) = found(t) {
            return Some((t, v));
        }
    }
    None
}

/// A box that dials `node` and has `write` accepted, or, without one,
/// is connected (real time).
async fn boxed(key: eebus::cert::Identity, node: &Node, write: Option<LimitWrite>) -> ControlBox {
    boxed_as(key, node, "lpc", write).await
}

/// [`boxed`] for `use_case` (`lpc` or `lpp`).
async fn boxed_as(
    key: eebus::cert::Identity,
    node: &Node,
    use_case: &str,
    write: Option<LimitWrite>,
) -> ControlBox {
    let wait = Duration::from_secs(30);
    let writes = write.is_some();
    let b = ControlBox::start(key, node.ski, node.addr, use_case, write).await;
    if writes {
        b.until("the limit accepted", wait, |s| !s.accepted.is_empty())
            .await;
    } else {
        b.until("connected", wait, |s| s.connected).await;
    }
    b
}

/// A box whose limit of `w` W holds.
async fn limited(key: eebus::cert::Identity, node: &Node, w: f64) -> ControlBox {
    let b = boxed(key, node, Some(LimitWrite::active(w))).await;
    node.until(w, false).await;
    b
}

/// A node on a store of its own and the key of the box it trusts.
async fn fresh_node() -> (tempfile::TempDir, eebus::cert::Identity, Node) {
    let dir = tempfile::tempdir().expect("dir");
    let key = eebus_box::key();
    let node = Node::start(&key.ski, dir.path()).await;
    (dir, key, node)
}

/// A box holds the site at 3 kW, then falls silent for `silent` on the
/// paused clock (which stays paused): the node is in failsafe.
async fn into_failsafe(key: &eebus::cert::Identity, node: &Node, silent: Duration) {
    let b = limited(eebus_box::same_key(key), node, 3_000.0).await;
    tokio::time::pause();
    b.stop();
    step_through(node, silent, 10 * S, |_| {}).await;
    let l = node.consumption().expect("LPC");
    assert!(
        l.failsafe,
        "not in failsafe after {silent:?} of silence: {l:?}"
    );
}

/// Steps 180 s in 5 s steps and returns when `read` first showed a
/// failsafe limit, with it.
async fn first_failsafe(
    node: &Node,
    read: impl Fn() -> Option<SourceLimit>,
) -> (Duration, SourceLimit) {
    step_until(node, 180 * S, 5 * S, |_| {
        Some(read().expect("a limit always holds here")).filter(|l| l.failsafe)
    })
    .await
    .expect("the failsafe entered")
}

#[tokio::test]
async fn heartbeat_loss_enters_failsafe_within_120_s() {
    let (_dir, key, node) = fresh_node().await;
    let b = limited(key, &node, 3_000.0).await;
    tokio::time::pause();
    b.stop();
    let (t, l) = first_failsafe(&node, || node.consumption()).await;
    // The box's last heartbeat came at most 60 s before it went: the limit
    // holds at least 60 s, the failsafe comes at most 120 s after it.
    assert!((60 * S..=125 * S).contains(&t), "failsafe after {t:?}");
    assert_eq!(l.value, FAILSAFE_W);
    assert_eq!(l.reference.as_deref(), Some("lpc: failsafe state"));
    node.stop().await;
}

/// LPP runs the same machine: its heartbeat loss, over the wire.
#[tokio::test]
async fn lpp_heartbeat_loss_enters_its_failsafe_within_120_s() {
    let (_dir, key, node) = fresh_node().await;
    let b = boxed_as(key, &node, "lpp", Some(LimitWrite::active(5_000.0))).await;
    node.wait_for("LPP holds 5 kW", |n| {
        n.production()
            .is_some_and(|l| l.value == 5_000.0 && !l.failsafe)
    })
    .await;
    tokio::time::pause();
    b.stop();
    let (t, l) = first_failsafe(&node, || node.production()).await;
    assert!((60 * S..=125 * S).contains(&t), "failsafe after {t:?}");
    assert_eq!(l.value, 20_000.0, "the failsafe production limit");
    assert_eq!(l.reference.as_deref(), Some("lpp: failsafe state"));
    node.stop().await;
}

#[tokio::test]
async fn a_limit_without_a_duration_outlives_an_hour() {
    let (_dir, key, node) = fresh_node().await;
    let b = limited(key, &node, 3_000.0).await;
    tokio::time::pause();
    step_through(&node, 3_700 * S, 10 * S, |t| {
        let l = node.consumption().expect("the limit");
        assert!(
            l.value == 3_000.0 && !l.failsafe && l.until_ms.is_none(),
            "at {t:?}: {l:?}"
        );
    })
    .await;
    b.stop();
    node.stop().await;
}

/// The crate's Energy Guard always sends an opening write behind its first
/// heartbeat. Here it is one above the contract, which the node refuses
/// before the use case sees it: the heartbeat is back, no limit is.
#[tokio::test]
async fn a_returning_heartbeat_alone_does_not_leave_failsafe_before_120_s() {
    let (_dir, key, node) = fresh_node().await;
    into_failsafe(&key, &node, 200 * S).await;
    // The box is back (its handshake on real time), its write refused.
    tokio::time::resume();
    let b = ControlBox::start(
        key,
        node.ski,
        node.addr,
        "lpc",
        Some(LimitWrite::active(90_000.0)),
    )
    .await;
    b.until("the write refused", 30 * S, |s| !s.refused.is_empty())
        .await;
    tokio::time::pause();
    // Stepped until the failsafe is left, and the limits taken then: the
    // subject is when it is left and what holds at that moment.
    let left = step_until(&node, 200 * S, 5 * S, |_| {
        let failsafe = node.consumption().is_some_and(|l| l.failsafe);
        (!failsafe).then(|| node.site.limits_of(Server::Eebus))
    })
    .await;
    let (t, set) = left.unwrap_or_else(|| {
        panic!(
            "failsafe 200 s after the heartbeat returned: {:?}",
            node.site.limits_of(Server::Eebus)
        )
    });
    assert!(
        (115 * S..=130 * S).contains(&t),
        "left after {t:?}: {set:?}"
    );
    // The box present and not controlling: the use case's unlimited, the
    // contract still bounding the import.
    assert!(set.tightest(Kind::Consumption).is_none(), "{set:?}");
    assert_eq!(set.value(Kind::Import), Some(60_000.0));
    b.stop();
    node.stop().await;
}

/// A box that reconnects is heard again: its heartbeat and a fresh write
/// leave the failsafe at once.
#[tokio::test]
async fn failsafe_is_left_on_a_heartbeat_and_a_fresh_write_after_a_reconnection() {
    let (_dir, key, node) = fresh_node().await;
    into_failsafe(&key, &node, 200 * S).await;
    tokio::time::resume();
    let b = limited(key, &node, 6_000.0).await;
    let l = node.consumption().expect("LPC");
    assert_eq!(l.reference.as_deref(), Some("lpc: limited"), "{l:?}");
    b.stop();
    node.stop().await;
}

#[tokio::test]
async fn a_24_h_outage_never_leaves_the_site_unlimited() {
    let (_dir, key, node) = fresh_node().await;
    // The box lets the site run unlimited, then goes.
    let b = boxed(key, &node, Some(LimitWrite::deactivated())).await;
    node.wait_for("LPC unlimited", |n| n.consumption().is_none())
        .await;
    tokio::time::pause();
    b.stop();
    let mut limited_from = None;
    step_through(&node, 24 * 3_600 * S, 60 * S, |t| {
        match node.consumption() {
            Some(l) if l.value == FAILSAFE_W => {
                limited_from.get_or_insert(t);
            }
            other => assert!(
                limited_from.is_none() && t <= 125 * S,
                "at {t:?} the site was not held to the failsafe: {other:?}"
            ),
        }
    })
    .await;
    assert!(limited_from.is_some(), "the failsafe never held");
    node.stop().await;
}

#[tokio::test]
async fn a_restart_in_failsafe_stays_in_failsafe() {
    let (dir, key, node) = fresh_node().await;
    into_failsafe(&key, &node, 130 * S).await;
    let before = node.consumption().expect("LPC");
    tokio::time::resume();
    node.stop().await;
    // The node again, on the same store: in failsafe at once, with the
    // failsafe's start kept, and through the 120 s of its own start.
    let node = Node::start(&key.ski, dir.path()).await;
    let after = node.until(FAILSAFE_W, true).await;
    assert_eq!(after.since_ms, before.since_ms, "{after:?} / {before:?}");
    tokio::time::pause();
    step_through(&node, 300 * S, 10 * S, |t| {
        let l = node.consumption().expect("LPC");
        assert!(l.failsafe && l.value == FAILSAFE_W, "at {t:?}: {l:?}");
    })
    .await;
    node.stop().await;
}
