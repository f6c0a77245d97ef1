//! Brokers that speak TLS with a server certificate of the test CA: rumqttd
//! behind the rustls front of `broker.rs`, or mosquitto terminating TLS itself
//! (OpenSSL) on a second listener of a generated config. Either way the broker
//! also keeps a plain listener for the test's own subscribers.

use std::net::SocketAddr;

use tokio::sync::mpsc;

use super::broker::{tls_front, wait_listening, Broker, Kind, TestPki};
use super::free_port;

/// A running broker with a TLS listener.
pub struct TlsBroker {
    pub broker: Broker,
    /// Where the agent connects with `mqtts://`.
    pub tls: SocketAddr,
    /// The outcome of each handshake, where the TLS side reports them (the
    /// rumqttd front; mosquitto keeps its handshakes to itself).
    pub handshakes: Option<mpsc::UnboundedReceiver<Result<(), String>>>,
    _files: tempfile::TempDir,
}

impl TlsBroker {
    /// With `client_auth`, the broker demands a client certificate signed by the
    /// test CA.
    pub async fn start(kind: Kind, pki: &TestPki, client_auth: bool) -> TlsBroker {
        let files = tempfile::tempdir().expect("temp dir");
        match kind {
            Kind::Rumqttd => {
                let broker = Broker::start(kind).await;
                let (tls, handshakes) = tls_front(broker.addr("5"), pki, client_auth).await;
                TlsBroker {
                    broker,
                    tls,
                    handshakes: Some(handshakes),
                    _files: files,
                }
            }
            Kind::Mosquitto => {
                let dir = files.path();
                std::fs::write(dir.join("ca.pem"), &pki.ca_pem).expect("write ca");
                std::fs::write(dir.join("server.pem"), &pki.server_cert_pem).expect("write cert");
                std::fs::write(dir.join("server.key"), &pki.server_key_pem).expect("write key");
                let tls = free_port();
                let extra = format!(
                    "listener {port} 127.0.0.1\ncafile {ca}\ncertfile {cert}\nkeyfile {key}\nrequire_certificate {client_auth}\n",
                    port = tls.port(),
                    ca = dir.join("ca.pem").display(),
                    cert = dir.join("server.pem").display(),
                    key = dir.join("server.key").display(),
                );
                let broker = Broker::mosquitto_with(&extra).await;
                wait_listening(tls).await;
                TlsBroker {
                    broker,
                    tls,
                    handshakes: None,
                    _files: files,
                }
            }
        }
    }
}
