//! One face for rumqttc's MQTT 3.1.1 and MQTT 5 clients: building the options
//! (persistent session, keep-alive, credentials, TLS, last will) and turning their
//! events into the few the uplink cares about.
//!
//! Owns no decisions: what to publish and when is `link.rs`'s job. Every publish
//! here is QoS 1.

use std::time::Duration;

use axum::body::Bytes;
use rumqttc::v5::mqttbytes::v5 as m5;
use rumqttc::{v5, TlsConfiguration, Transport};

use super::payload;
use super::tls::{client_config, TlsError};
use super::topics::Topics;
use crate::config::{MqttConfig, MqttProtocol};

/// Requests the client may queue before the event loop takes them. Telemetry is
/// windowed well below this; see `link.rs`.
const REQUEST_CAPACITY: usize = 1024;
/// Unacknowledged QoS 1 publishes rumqttc allows at once.
const INFLIGHT_LIMIT: u16 = 256;

/// What the event loop reported, reduced to what the uplink acts on.
#[derive(Debug)]
pub enum LinkEvent {
    /// CONNACK: a session is up.
    Connected { session_present: bool },
    /// A QoS 1 publish went out with this packet id.
    Sent(u16),
    /// The broker acknowledged packet `pkid`.
    Acked(u16),
    /// A message arrived on a subscribed topic.
    Message(Incoming),
    /// SUBACK: the RPC subscription is in place.
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
    pub response_topic: Option<String>,
    pub correlation: Option<Bytes>,
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
/// event loop is polled.
pub fn build(
    m: &MqttConfig,
    gateway_id: &str,
    topics: &Topics,
) -> Result<(Client, EventLoop), TlsError> {
    let broker = m.broker().map_err(|why| TlsError::File {
        key: "url",
        file: m.url.clone(),
        why,
    })?;
    let client_id = m
        .client_id
        .clone()
        .unwrap_or_else(|| format!("sitegate-{gateway_id}"));
    let transport = if broker.tls {
        Transport::Tls(TlsConfiguration::Rustls(client_config(m)?))
    } else {
        Transport::Tcp
    };
    let keep_alive = Duration::from_secs(m.keep_alive_s);
    let will_topic = topics.status();
    Ok(match m.protocol {
        MqttProtocol::V311 => {
            let mut o = rumqttc::MqttOptions::new(client_id, broker.host, broker.port);
            o.set_clean_session(false)
                .set_keep_alive(keep_alive)
                .set_transport(transport)
                .set_inflight(INFLIGHT_LIMIT)
                .set_max_packet_size(1 << 20, 1 << 20)
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
            o.set_clean_start(false)
                .set_session_expiry_interval(Some(m.session_expiry_s))
                .set_keep_alive(keep_alive)
                .set_transport(transport)
                .set_outgoing_inflight_upper_limit(INFLIGHT_LIMIT)
                .set_max_packet_size(Some(1 << 20))
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

/// Why a request could not be queued.
#[derive(Debug, thiserror::Error)]
#[error("the MQTT request queue is full or closed")]
pub struct QueueFull;

impl Client {
    /// Queues a QoS 1 publish without waiting. `correlation` is sent as MQTT 5
    /// correlation data (ignored with 3.1.1).
    pub fn publish(
        &self,
        topic: String,
        retain: bool,
        payload: Vec<u8>,
        correlation: Option<Bytes>,
    ) -> Result<(), QueueFull> {
        match self {
            Client::V4(c) => c
                .try_publish(topic, rumqttc::QoS::AtLeastOnce, retain, payload)
                .map_err(|_| QueueFull),
            Client::V5(c) => {
                let qos = v5::mqttbytes::QoS::AtLeastOnce;
                match correlation {
                    None => c.try_publish(topic, qos, retain, payload),
                    Some(data) => {
                        let props = m5::PublishProperties {
                            correlation_data: Some(data),
                            ..Default::default()
                        };
                        c.try_publish_with_properties(topic, qos, retain, payload, props)
                    }
                }
                .map_err(|_| QueueFull)
            }
        }
    }

    /// Queues a QoS 1 subscription.
    pub fn subscribe(&self, topic: String) -> Result<(), QueueFull> {
        match self {
            Client::V4(c) => c
                .try_subscribe(topic, rumqttc::QoS::AtLeastOnce)
                .map_err(|_| QueueFull),
            Client::V5(c) => c
                .try_subscribe(topic, v5::mqttbytes::QoS::AtLeastOnce)
                .map_err(|_| QueueFull),
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
    pub async fn poll(&mut self) -> Result<LinkEvent, String> {
        match self {
            EventLoop::V4(e) => e.poll().await.map(v4_event).map_err(|e| e.to_string()),
            EventLoop::V5(e) => e.poll().await.map(v5_event).map_err(|e| e.to_string()),
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
}

fn v4_event(e: rumqttc::Event) -> LinkEvent {
    use rumqttc::{Event, Outgoing, Packet};
    match e {
        Event::Incoming(Packet::ConnAck(a)) => LinkEvent::Connected {
            session_present: a.session_present,
        },
        Event::Incoming(Packet::PubAck(a)) => LinkEvent::Acked(a.pkid),
        Event::Incoming(Packet::SubAck(_)) => LinkEvent::Subscribed,
        Event::Incoming(Packet::Publish(p)) => LinkEvent::Message(Incoming {
            topic: String::from_utf8_lossy(p.topic.as_bytes()).into_owned(),
            payload: p.payload,
            response_topic: None,
            correlation: None,
        }),
        Event::Outgoing(Outgoing::Publish(pkid)) => LinkEvent::Sent(pkid),
        Event::Outgoing(Outgoing::Disconnect) => LinkEvent::Disconnecting,
        _ => LinkEvent::Other,
    }
}

fn v5_event(e: v5::Event) -> LinkEvent {
    use m5::Packet;
    use v5::Event;
    match e {
        Event::Incoming(Packet::ConnAck(a)) => LinkEvent::Connected {
            session_present: a.session_present,
        },
        Event::Incoming(Packet::PubAck(a)) => {
            if !matches!(
                a.reason,
                m5::PubAckReason::Success | m5::PubAckReason::NoMatchingSubscribers
            ) {
                tracing::warn!(pkid = a.pkid, reason = ?a.reason, "broker refused a publish");
            }
            LinkEvent::Acked(a.pkid)
        }
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
                response_topic,
                correlation,
            })
        }
        Event::Outgoing(rumqttc::Outgoing::Publish(pkid)) => LinkEvent::Sent(pkid),
        Event::Outgoing(rumqttc::Outgoing::Disconnect) => LinkEvent::Disconnecting,
        _ => LinkEvent::Other,
    }
}
