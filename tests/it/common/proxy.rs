//! A bus of a test config routed through the simulator's fault-injecting
//! proxy (`sim::FaultyPeer`), so that a test can delay requests or leave them
//! unanswered on a real socket. It only rewires the config; the test decides
//! the faults.

use sitegate::config::{Config, Transport};
use sitegate::sim::{FaultyPeer, SimSite};

/// Starts a proxy in front of the simulated server of bus `bus` and points
/// that bus of `config` at it.
pub async fn behind_proxy(sim: &SimSite, config: &mut Config, bus: &str) -> FaultyPeer {
    let server = sim
        .addr(bus)
        .unwrap_or_else(|| panic!("the simulator serves no bus {bus:?}"));
    let peer = FaultyPeer::start(server).await.expect("the proxy starts");
    let routed = config
        .buses
        .iter_mut()
        .find(|b| b.name == bus)
        .unwrap_or_else(|| panic!("the config has no bus {bus:?}"));
    routed.transport = Transport::Tcp {
        host: "127.0.0.1".into(),
        port: peer.addr().port(),
    };
    peer
}
