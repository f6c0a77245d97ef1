//! Which MQTT version the link speaks. With `mqtt.protocol` unset it starts
//! with MQTT 5; a broker that closes the connection at CONNECT twice under
//! 5 before ever accepting it (NATS's MQTT gateway and other 3.1.1-only
//! brokers do), or refuses the version outright, gets MQTT 3.1.1 from then
//! on, until the agent restarts. A pinned `protocol` is never changed.
//!
//! The decision is pure (`Version::lost`); `build_311` makes the new client
//! as the first one was made (`Setup::build`).

use super::super::client::{Client, EventLoop, LostKind};
use super::Setup;
use crate::config::MqttProtocol;

/// How many closes at CONNECT under MQTT 5 make the link fall back: one
/// may be a broker restarting.
const CLOSES_BEFORE_FALLBACK: u32 = 2;

pub(super) struct Version {
    setup: Setup,
    pinned: bool,
    /// A broker accepted MQTT 5 once: it speaks it, whatever it does later.
    v5_accepted: bool,
    closes_at_connect: u32,
}

impl Version {
    pub fn new(setup: Setup) -> Version {
        Version {
            pinned: setup.config.protocol.is_some(),
            setup,
            v5_accepted: false,
            closes_at_connect: 0,
        }
    }

    /// The broker accepted the connection.
    pub fn connected(&mut self, client: &Client) {
        self.v5_accepted |= client.is_v5();
        self.closes_at_connect = 0;
    }

    /// A connection of `client` was lost (`was_connected`: after its
    /// CONNACK); whether to speak MQTT 3.1.1 from now on.
    pub fn lost(&mut self, client: &Client, was_connected: bool, kind: LostKind) -> bool {
        if self.pinned || self.v5_accepted || was_connected || !client.is_v5() {
            return false;
        }
        match kind {
            LostKind::VersionRefused => true,
            LostKind::ClosedByPeer => {
                self.closes_at_connect += 1;
                self.closes_at_connect >= CLOSES_BEFORE_FALLBACK
            }
            _ => false,
        }
    }

    /// The client and event loop of the same config under MQTT 3.1.1.
    pub async fn build_311(&self) -> Result<(Client, EventLoop), String> {
        let mut setup = self.setup.clone();
        setup.config.protocol = Some(MqttProtocol::V311);
        setup.build().await
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::client;
    use super::*;

    fn version(protocol: Option<MqttProtocol>) -> (Version, Client) {
        let config = crate::config::MqttConfig {
            url: "mqtt://127.0.0.1:1".into(),
            protocol,
            ..Default::default()
        };
        let topics = super::super::super::topics::Topics::new("sitegate", "gw");
        let setup = Setup {
            config: config.clone(),
            gateway_id: "gw".into(),
            topics: topics.clone(),
        };
        let (client, _) = client::build(&config, "gw", &topics).expect("a client");
        (Version::new(setup), client)
    }

    #[tokio::test]
    async fn two_closes_at_connect_under_5_fall_back_to_3_1_1() {
        let (mut v, client) = version(None);
        assert!(
            !v.lost(&client, false, LostKind::ClosedByPeer),
            "one may be a restart"
        );
        assert!(v.lost(&client, false, LostKind::ClosedByPeer));
        let (v311, _) = v.build_311().await.expect("a 3.1.1 client");
        assert!(!v311.is_v5());
        // Speaking 3.1.1, it never falls back again.
        assert!(!v.lost(&v311, false, LostKind::ClosedByPeer));
    }

    #[tokio::test]
    async fn a_refused_version_falls_back_at_once() {
        let (mut v, client) = version(None);
        assert!(v.lost(&client, false, LostKind::VersionRefused));
    }

    #[tokio::test]
    async fn a_pinned_protocol_or_a_broker_that_took_5_never_falls_back() {
        let (mut v, client) = version(Some(MqttProtocol::V5));
        for _ in 0..5 {
            assert!(!v.lost(&client, false, LostKind::ClosedByPeer));
        }
        let (mut v, client) = version(None);
        v.connected(&client);
        for _ in 0..5 {
            assert!(!v.lost(&client, false, LostKind::ClosedByPeer));
        }
        // A connection that had its CONNACK is not a refusal of the version.
        let (mut v, client) = version(None);
        for _ in 0..5 {
            assert!(!v.lost(&client, true, LostKind::ClosedByPeer));
        }
        // Nor is a broker that is not there.
        assert!(!v.lost(&client, false, LostKind::Other));
    }
}
