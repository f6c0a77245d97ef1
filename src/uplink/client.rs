//! One face for rumqttc's MQTT 3.1.1 and MQTT 5 clients: building the options
//! (persistent session, keep-alive, credentials, TLS, last will, the largest
//! incoming message) and turning their events and errors into the few the
//! uplink acts on.
//!
//! Owns no decisions: what to publish, when to retry and how to read a lost
//! connection is `link.rs`'s job. Every publish here is QoS 1.

use std::time::Duration;

use axum::body::Bytes;
use rumqttc::v5::mqttbytes::v5 as m5;
use rumqttc::{v5, TlsConfiguration, Transport};

use super::payload;
use super::refusal::Reason;
use super::tls::{client_config, SetupError};
use super::topics::Topics;
use crate::config::{MqttConfig, MqttProtocol};

/// Requests the client may queue before the event loop takes them. Telemetry is
/// windowed well below this; see `link.rs`.
const REQUEST_CAPACITY: usize = 1024;
/// Unacknowledged QoS 1 publishes rumqttc allows at once.
const INFLIGHT_LIMIT: u16 = 256;
/// The largest message the uplink sends (3.1.1; with MQTT 5 the broker's
/// CONNACK says).
const MAX_OUTGOING: usize = 1 << 20;

/// What the event loop reported, reduced to what the uplink acts on.
#[derive(Debug)]
pub enum LinkEvent {
    /// CONNACK: a session is up.
    /// `max_packet`: the Maximum Packet Size the broker's CONNACK gave
    /// (MQTT 5), the largest message it takes.
    Connected {
        session_present: bool,
        max_packet: Option<u32>,
    },
    /// A QoS 1 publish went out with this packet id.
    Sent(u16),
    /// The broker accepted packet `pkid`.
    Acked(u16),
    /// The broker refused packet `pkid` (MQTT 5 PUBACK reason 0x80 or more).
    Refused { pkid: u16, reason: Reason },
    /// A message arrived on a subscribed topic.
    Message(Incoming),
    /// SUBACK: the subscriptions are in place.
    Subscribed,
    /// Anything else (pings, our own DISCONNECT, ...).
    Other,
    /// We sent DISCONNECT.
    Disconnecting,
}

/// An incoming publish; `response_topic`/`correlation` only with MQTT 5.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub topic: String,
    pub payload: Bytes,
    /// Delivered because it was retained (not published just now).
    pub retain: bool,
    pub response_topic: Option<String>,
    pub correlation: Option<Bytes>,
}

/// Why a connection ended (or did not come up), as far as the link cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostKind {
    /// MQTT 5 DISCONNECT 0x8E: another client connected with our client id.
    TakenOver,
    /// The broker sent a message larger than `max_incoming_kb`.
    Oversized,
    /// The broker closed the connection without saying why.
    ClosedByPeer,
    /// The broker refused the protocol version at CONNECT.
    VersionRefused,
    /// Anything else (refused, timeout, TLS, DNS, ...).
    Other,
}

/// A lost connection: its kind and rumqttc's words.
#[derive(Debug, Clone)]
pub struct Lost {
    pub kind: LostKind,
    pub message: String,
}

/// The request side (cloneable).
#[derive(Clone)]
pub enum Client {
    V4(rumqttc::AsyncClient),
    V5(v5::AsyncClient),
}

/// The connection side, owned by the link task.
pub enum EventLoop {
    V4(Box<rumqttc::EventLoop>),
    V5(Box<v5::EventLoop>),
}

/// Builds a client and its event loop from config. Nothing connects until the
/// event loop is polled; an error means the TLS files cannot be used now.
pub fn build(
    m: &MqttConfig,
    gateway_id: &str,
    topics: &Topics,
) -> Result<(Client, EventLoop), SetupError> {
    let broker = m.broker().map_err(SetupError::Url)?;
    let client_id = client_id(m, gateway_id);
    let transport = if broker.tls {
        Transport::Tls(TlsConfiguration::Rustls(client_config(m)?))
    } else {
        Transport::Tcp
    };
    let keep_alive = Duration::from_secs(m.keep_alive_s);
    let will_topic = topics.status();
    let max_incoming = m.max_incoming_kb as usize * 1024;
    Ok(match m.protocol() {
        MqttProtocol::V311 => {
            let mut o = rumqttc::MqttOptions::new(client_id, broker.host, broker.port);
            o.set_clean_session(false)
                .set_keep_alive(keep_alive)
                .set_transport(transport)
                .set_inflight(INFLIGHT_LIMIT)
                .set_max_packet_size(max_incoming, MAX_OUTGOING)
                .set_last_will(rumqttc::LastWill::new(
                    will_topic,
                    payload::status_offline(),
                    rumqttc::QoS::AtLeastOnce,
                    true,
                ));
            if let Some(user) = &m.username {
                o.set_credentials(user, m.password.clone().unwrap_or_default());
            }
            let (c, e) = rumqttc::AsyncClient::new(o, REQUEST_CAPACITY);
            (Client::V4(c), EventLoop::V4(Box::new(e)))
        }
        MqttProtocol::V5 => {
            let mut o = v5::MqttOptions::new(client_id, broker.host, broker.port);
            // The maximum packet size goes to the broker in CONNECT: a
            // conforming broker drops bigger messages for us (MQTT 5, 3.1.2.11.4).
            o.set_clean_start(false)
                .set_session_expiry_interval(Some(m.session_expiry_s))
                .set_keep_alive(keep_alive)
                .set_transport(transport)
                .set_outgoing_inflight_upper_limit(INFLIGHT_LIMIT)
                .set_max_packet_size(Some(m.max_incoming_kb.saturating_mul(1024)))
                .set_last_will(m5::LastWill::new(
                    will_topic,
                    payload::status_offline(),
                    v5::mqttbytes::QoS::AtLeastOnce,
                    true,
                    None,
                ));
            if let Some(user) = &m.username {
                o.set_credentials(user, m.password.clone().unwrap_or_default());
            }
            let (c, e) = v5::AsyncClient::new(o, REQUEST_CAPACITY);
            (Client::V5(c), EventLoop::V5(Box::new(e)))
        }
    })
}

/// `client_id`, or `sitegate-{gateway_id}`.
pub fn client_id(m: &MqttConfig, gateway_id: &str) -> String {
    m.client_id
        .clone()
        .unwrap_or_else(|| format!("sitegate-{gateway_id}"))
}

/// The MQTT 5 user property of a message stamped while the wall clock was
/// known not to be synchronised.
pub const CLOCK_PROPERTY: (&str, &str) = ("sitegate-clock", "unsynchronised");

/// Why a request could not be queued.
#[derive(Debug, thiserror::Error)]
#[error("the MQTT request queue is full or closed")]
pub struct QueueFull;

impl Client {
    /// Whether this client speaks MQTT 5.
    pub fn is_v5(&self) -> bool {
        matches!(self, Client::V5(_))
    }

    /// Queues a QoS 1 publish without waiting. `correlation` is sent as MQTT 5
    /// correlation data, and `clock_unsynchronised` as the user property
    /// `sitegate-clock: unsynchronised` (both ignored with 3.1.1, which has
    /// neither).
    pub fn publish(
        &self,
        topic: String,
        retain: bool,
        payload: Vec<u8>,
        correlation: Option<Bytes>,
        clock_unsynchronised: bool,
    ) -> Result<(), QueueFull> {
        match self {
            Client::V4(c) => c
                .try_publish(topic, rumqttc::QoS::AtLeastOnce, retain, payload)
                .map_err(|_| QueueFull),
            Client::V5(c) => {
                let qos = v5::mqttbytes::QoS::AtLeastOnce;
                if correlation.is_none() && !clock_unsynchronised {
                    return c
                        .try_publish(topic, qos, retain, payload)
                        .map_err(|_| QueueFull);
                }
                let mut props = m5::PublishProperties {
                    correlation_data: correlation,
                    ..Default::default()
                };
                if clock_unsynchronised {
                    props
                        .user_properties
                        .push((CLOCK_PROPERTY.0.into(), CLOCK_PROPERTY.1.into()));
                }
                c.try_publish_with_properties(topic, qos, retain, payload, props)
                    .map_err(|_| QueueFull)
            }
        }
    }

    /// Queues one QoS 1 subscription to the request topics (RPC and ops
    /// channel), so one SUBACK says both are heard. With MQTT 5 the broker is
    /// asked not to send retained messages on them (a request is never meant
    /// to be retained); with 3.1.1 the link ignores retained ones.
    pub fn subscribe_requests(&self, topics: &[String]) -> Result<(), QueueFull> {
        match self {
            Client::V4(c) => c
                .try_subscribe_many(
                    topics.iter().map(|t| {
                        rumqttc::SubscribeFilter::new(t.clone(), rumqttc::QoS::AtLeastOnce)
                    }),
                )
                .map_err(|_| QueueFull),
            Client::V5(c) => {
                let filters = topics.iter().map(|t| {
                    let mut filter = m5::Filter::new(t.clone(), v5::mqttbytes::QoS::AtLeastOnce);
                    filter.retain_forward_rule = m5::RetainForwardRule::Never;
                    filter
                });
                c.try_subscribe_many(filters).map_err(|_| QueueFull)
            }
        }
    }

    /// Queues a clean DISCONNECT (the broker then drops the will).
    pub fn disconnect(&self) -> Result<(), QueueFull> {
        match self {
            Client::V4(c) => c.try_disconnect().map_err(|_| QueueFull),
            Client::V5(c) => c.try_disconnect().map_err(|_| QueueFull),
        }
    }
}

impl EventLoop {
    /// The next event; an error means the connection is gone (the next call
    /// reconnects). Not cancel-safe: keep the future alive until it completes.
    pub async fn poll(&mut self) -> Result<LinkEvent, Lost> {
        match self {
            EventLoop::V4(e) => e.poll().await.map(v4_event).map_err(|e| v4_lost(&e)),
            EventLoop::V5(e) => e.poll().await.map(v5_event).map_err(|e| v5_lost(&e)),
        }
    }

    /// Drops what rumqttc kept to replay from the lost connection: the uplink
    /// republishes from its outbox and current state instead, so nothing it queued
    /// before the loss may reach the next connection.
    pub fn forget_pending(&mut self) {
        match self {
            EventLoop::V4(e) => e.pending.clear(),
            EventLoop::V5(e) => e.pending.clear(),
        }
    }

    /// With `clean`, the next connect asks the broker to discard the session
    /// (and the messages it queued for us); then back to the persistent one.
    pub fn set_clean(&mut self, clean: bool) {
        match self {
            EventLoop::V4(e) => {
                e.mqtt_options.set_clean_session(clean);
            }
            EventLoop::V5(e) => {
                e.options.set_clean_start(clean);
            }
        }
    }
}

fn io_closed(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        e.kind(),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
    )
}

fn v4_lost(e: &rumqttc::ConnectionError) -> Lost {
    use rumqttc::{mqttbytes, ConnectionError as C, StateError as S};
    let kind = match e {
        C::MqttState(S::Deserialization(mqttbytes::Error::PayloadSizeLimitExceeded(_))) => {
            LostKind::Oversized
        }
        C::MqttState(S::ConnectionAborted) => LostKind::ClosedByPeer,
        C::MqttState(S::Io(io)) | C::Io(io) if io_closed(io) => LostKind::ClosedByPeer,
        _ => LostKind::Other,
    };
    Lost {
        kind,
        message: e.to_string(),
    }
}

fn v5_lost(e: &v5::ConnectionError) -> Lost {
    use rumqttc::v5::{mqttbytes, ConnectionError as C, StateError as S};
    let kind = match e {
        C::MqttState(S::ServerDisconnect {
            reason_code: m5::DisconnectReasonCode::SessionTakenOver,
            ..
        }) => LostKind::TakenOver,
        C::MqttState(S::IncomingPacketTooLarge { .. })
        | C::MqttState(S::Deserialization(mqttbytes::Error::PayloadSizeLimitExceeded { .. })) => {
            LostKind::Oversized
        }
        C::ConnectionRefused(m5::ConnectReturnCode::UnsupportedProtocolVersion) => {
            LostKind::VersionRefused
        }
        C::MqttState(S::ConnectionAborted) => LostKind::ClosedByPeer,
        C::MqttState(S::Io(io)) | C::Io(io) if io_closed(io) => LostKind::ClosedByPeer,
        _ => LostKind::Other,
    };
    Lost {
        kind,
        message: e.to_string(),
    }
}

fn v4_event(e: rumqttc::Event) -> LinkEvent {
    use rumqttc::{Event, Outgoing, Packet};
    match e {
        Event::Incoming(Packet::ConnAck(a)) => LinkEvent::Connected {
            session_present: a.session_present,
            max_packet: None,
        },
        Event::Incoming(Packet::PubAck(a)) => LinkEvent::Acked(a.pkid),
        Event::Incoming(Packet::SubAck(_)) => LinkEvent::Subscribed,
        Event::Incoming(Packet::Publish(p)) => LinkEvent::Message(Incoming {
            topic: String::from_utf8_lossy(p.topic.as_bytes()).into_owned(),
            payload: p.payload,
            retain: p.retain,
            response_topic: None,
            correlation: None,
        }),
        Event::Outgoing(Outgoing::Publish(pkid)) => LinkEvent::Sent(pkid),
        Event::Outgoing(Outgoing::Disconnect) => LinkEvent::Disconnecting,
        _ => LinkEvent::Other,
    }
}

/// The PUBACK reason code as a number (rumqttc keeps it as an enum).
fn puback_code(r: &m5::PubAckReason) -> u8 {
    use m5::PubAckReason as R;
    match r {
        R::Success => 0x00,
        R::NoMatchingSubscribers => 0x10,
        R::UnspecifiedError => 0x80,
        R::ImplementationSpecificError => 0x83,
        R::NotAuthorized => 0x87,
        R::TopicNameInvalid => 0x90,
        R::PacketIdentifierInUse => 0x91,
        R::QuotaExceeded => 0x97,
        R::PayloadFormatInvalid => 0x99,
    }
}

fn v5_event(e: v5::Event) -> LinkEvent {
    use m5::Packet;
    use v5::Event;
    match e {
        Event::Incoming(Packet::ConnAck(a)) => LinkEvent::Connected {
            session_present: a.session_present,
            max_packet: a.properties.as_ref().and_then(|p| p.max_packet_size),
        },
        Event::Incoming(Packet::PubAck(a)) => match puback_code(&a.reason) {
            code if code >= 0x80 => LinkEvent::Refused {
                pkid: a.pkid,
                reason: Reason(code),
            },
            _ => LinkEvent::Acked(a.pkid),
        },
        Event::Incoming(Packet::SubAck(a)) => {
            if a.return_codes
                .iter()
                .any(|c| !matches!(c, m5::SubscribeReasonCode::Success(_)))
            {
                tracing::warn!(reasons = ?a.return_codes, "broker refused the RPC subscription");
            }
            LinkEvent::Subscribed
        }
        Event::Incoming(Packet::Publish(p)) => {
            let (response_topic, correlation) = p
                .properties
                .map(|props| (props.response_topic, props.correlation_data))
                .unwrap_or_default();
            LinkEvent::Message(Incoming {
                topic: String::from_utf8_lossy(&p.topic).into_owned(),
                payload: p.payload,
                retain: p.retain,
                response_topic,
                correlation,
            })
        }
        Event::Outgoing(rumqttc::Outgoing::Publish(pkid)) => LinkEvent::Sent(pkid),
        Event::Outgoing(rumqttc::Outgoing::Disconnect) => LinkEvent::Disconnecting,
        _ => LinkEvent::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rumqttc::v5::{ConnectionError as C5, StateError as S5};
    use rumqttc::{ConnectionError as C4, StateError as S4};

    #[test]
    fn lost_connections_are_told_apart() {
        let taken = C5::MqttState(S5::ServerDisconnect {
            reason_code: m5::DisconnectReasonCode::SessionTakenOver,
            reason_string: None,
        });
        assert_eq!(v5_lost(&taken).kind, LostKind::TakenOver);
        let too_big = C5::MqttState(S5::Deserialization(
            v5::mqttbytes::Error::PayloadSizeLimitExceeded {
                pkt_size: 2 << 20,
                max: 1 << 20,
            },
        ));
        assert_eq!(v5_lost(&too_big).kind, LostKind::Oversized);
        assert_eq!(
            v5_lost(&C5::MqttState(S5::ConnectionAborted)).kind,
            LostKind::ClosedByPeer
        );
        let other = C5::MqttState(S5::ServerDisconnect {
            reason_code: m5::DisconnectReasonCode::ServerShuttingDown,
            reason_string: None,
        });
        assert_eq!(v5_lost(&other).kind, LostKind::Other);

        let too_big = C4::MqttState(S4::Deserialization(
            rumqttc::mqttbytes::Error::PayloadSizeLimitExceeded(2 << 20),
        ));
        assert_eq!(v4_lost(&too_big).kind, LostKind::Oversized);
        let reset = C4::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(v4_lost(&reset).kind, LostKind::ClosedByPeer);
        assert_eq!(v4_lost(&C4::NetworkTimeout).kind, LostKind::Other);
    }

    #[test]
    fn refusing_pubacks_carry_their_reason() {
        let puback = |reason| {
            v5_event(v5::Event::Incoming(m5::Packet::PubAck(m5::PubAck {
                pkid: 7,
                reason,
                properties: None,
            })))
        };
        assert!(matches!(
            puback(m5::PubAckReason::NotAuthorized),
            LinkEvent::Refused {
                pkid: 7,
                reason: Reason(0x87)
            }
        ));
        assert!(matches!(
            puback(m5::PubAckReason::NoMatchingSubscribers),
            LinkEvent::Acked(7)
        ));
    }
}
