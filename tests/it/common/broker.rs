//! Brokers for the MQTT tests: rumqttd in-process (always) and mosquitto as a
//! child process (where the binary exists), each on an ephemeral loopback port;
//! mosquitto can be given files (an ACL) and reloaded (SIGHUP); a TCP gate that
//! can cut the agent off from the broker and let it back; a TLS front with a CA
//! generated in the test; and a subscriber that records messages.
//!
//! rumqttd takes messages up to 16 MiB (so oversized RPC requests reach the
//! agent), acknowledges every publish (it has no ACL: it cannot refuse one), and
//! drops the older of two connections with one client id without saying why.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::free_port;

use rumqttc::v5::mqttbytes::v5::{Packet, PubAckReason, PublishProperties};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// Which broker implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rumqttd,
    Mosquitto,
}

/// rumqttd always; mosquitto too when its binary is installed.
pub fn kinds() -> Vec<Kind> {
    let mut kinds = vec![Kind::Rumqttd];
    if mosquitto_binary().is_some() {
        kinds.push(Kind::Mosquitto);
    } else if super::required("MOSQUITTO") {
        panic!("SITEGATE_REQUIRE_MOSQUITTO=1 but no mosquitto binary is installed");
    } else {
        #[allow(clippy::print_stderr, reason = "a test run should say what it skipped")]
        {
            eprintln!("mosquitto not installed: MQTT tests run against rumqttd only");
        }
    }
    kinds
}

/// Runs `scenario` on every broker of [`kinds`] at once (each scenario has
/// its own broker, agent and store, so they are independent) and fails as the
/// first of them that fails, with its message.
pub async fn on_every_kind<F, Fut>(scenario: F)
where
    F: Fn(Kind) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let runs: Vec<_> = kinds()
        .into_iter()
        .map(|kind| tokio::spawn(scenario(kind)))
        .collect();
    for run in runs {
        if let Err(e) = run.await {
            match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(e) => panic!("a broker's scenario did not finish: {e}"),
            }
        }
    }
}

fn mosquitto_binary() -> Option<PathBuf> {
    super::installed("mosquitto")
}

/// A mosquitto password file for `users` (name, password), hashed by
/// `mosquitto_passwd -b` (the mosquitto package ships it); `None` where that
/// binary is not installed (mosquitto 2 takes no plain-text passwords).
pub fn mosquitto_password_file(users: &[(&str, &str)]) -> Option<String> {
    let bin = super::installed("mosquitto_passwd")?;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("passwd");
    std::fs::write(&file, "").expect("an empty password file");
    for (user, password) in users {
        let out = std::process::Command::new(&bin)
            .arg("-b")
            .arg(&file)
            .args([user, password])
            .output()
            .expect("mosquitto_passwd runs");
        assert!(
            out.status.success(),
            "mosquitto_passwd -b {user}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Some(std::fs::read_to_string(&file).expect("the password file"))
}

/// A running broker. MQTT 3.1.1 and 5 are both served (rumqttd on two ports).
pub struct Broker {
    pub kind: Kind,
    v5: SocketAddr,
    v4: SocketAddr,
    _child: Option<ChildGuard>,
    _dir: Option<tempfile::TempDir>,
}

struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub async fn wait_listening(addr: SocketAddr) {
    super::wait_for(
        &format!("broker on {addr}"),
        Duration::from_secs(10),
        || async { TcpStream::connect(addr).await.ok().map(drop) },
    )
    .await;
}

impl Broker {
    pub async fn start(kind: Kind) -> Broker {
        match kind {
            Kind::Rumqttd => Self::rumqttd().await,
            Kind::Mosquitto => Self::mosquitto().await,
        }
    }

    /// The address for a client of `protocol` ("5" or "3.1.1").
    pub fn addr(&self, protocol: &str) -> SocketAddr {
        if protocol == "3.1.1" {
            self.v4
        } else {
            self.v5
        }
    }

    async fn rumqttd() -> Broker {
        use rumqttd::{Config, ConnectionSettings, RouterConfig, ServerSettings};
        let (v4, v5) = (free_port(), free_port());
        let server = |name: &str, listen| ServerSettings {
            name: name.into(),
            listen,
            tls: None,
            next_connection_delay_ms: 1,
            connections: ConnectionSettings {
                connection_timeout_ms: 60_000,
                max_payload_size: 16 << 20,
                max_inflight_count: 500,
                auth: None,
                external_auth: None,
                dynamic_filters: true,
            },
        };
        let config = Config {
            id: 0,
            router: RouterConfig {
                max_connections: 100,
                max_outgoing_packet_count: 200,
                max_segment_size: 100 << 20,
                max_segment_count: 10,
                custom_segment: None,
                initialized_filters: None,
                shared_subscriptions_strategy: Default::default(),
            },
            v4: Some(HashMap::from([("1".to_string(), server("v4", v4))])),
            v5: Some(HashMap::from([("1".to_string(), server("v5", v5))])),
            ..Default::default()
        };
        std::thread::spawn(move || {
            let mut broker = rumqttd::Broker::new(config);
            // Runs until the test process ends; a start failure shows as the
            // listening wait below timing out.
            let _ = broker.start();
        });
        wait_listening(v4).await;
        wait_listening(v5).await;
        Broker {
            kind: Kind::Rumqttd,
            v5,
            v4,
            _child: None,
            _dir: None,
        }
    }

    async fn mosquitto() -> Broker {
        Self::mosquitto_with("").await
    }

    /// mosquitto with `extra` appended to its config (more listeners, TLS files):
    /// the plain listener comes first, so settings in `extra` that follow a
    /// `listener` line apply to that listener only.
    pub async fn mosquitto_with(extra: &str) -> Broker {
        Self::mosquitto_files(extra, &[]).await
    }

    /// [`Broker::mosquitto_with`], with `files` written into its directory first;
    /// `{dir}` in `extra` names that directory (`acl_file {dir}/acl`).
    pub async fn mosquitto_files(extra: &str, files: &[(&str, &str)]) -> Broker {
        let bin = mosquitto_binary().expect("mosquitto installed");
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).expect("write a mosquitto file");
        }
        let extra = extra.replace("{dir}", &dir.path().display().to_string());
        let addr = free_port();
        let conf = dir.path().join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!(
                "listener {} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n{extra}",
                addr.port()
            ),
        )
        .expect("write mosquitto.conf");
        let child = std::process::Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("mosquitto starts");
        let guard = ChildGuard(child);
        wait_listening(addr).await;
        Broker {
            kind: Kind::Mosquitto,
            v5: addr,
            v4: addr,
            _child: Some(guard),
            _dir: Some(dir),
        }
    }

    /// Rewrites a file given to [`Broker::mosquitto_files`] and has mosquitto
    /// read its config again (SIGHUP: ACLs, password files).
    pub fn reload_with(&self, name: &str, text: &str) {
        let (Some(child), Some(dir)) = (&self._child, &self._dir) else {
            panic!("only a mosquitto child can be reloaded");
        };
        std::fs::write(dir.path().join(name), text).expect("rewrite a mosquitto file");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.0.id()).expect("pid fits i32"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP mosquitto");
    }
}

/// A TCP forwarder that can cut every connection and refuse new ones ("the broker
/// went away") and later let them through again.
pub struct Gate {
    pub addr: SocketAddr,
    open: watch::Sender<bool>,
}

impl Gate {
    pub async fn start(upstream: SocketAddr) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind gate");
        let addr = listener.local_addr().expect("gate addr");
        let (open, _) = watch::channel(true);
        let rx = open.subscribe();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut open = rx.clone();
                if !*open.borrow_and_update() {
                    continue; // dropped: connection refused in effect
                }
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = open.wait_for(|o| !*o) => {}
                    }
                });
            }
        });
        Gate { addr, open }
    }

    /// Cuts every connection through the gate and refuses new ones.
    pub fn close(&self) {
        self.open.send_replace(false);
    }

    pub fn reopen(&self) {
        self.open.send_replace(true);
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it, plus a client
/// certificate signed by it, all generated here.
pub struct TestPki {
    pub ca_pem: String,
    server_cert: rustls::pki_types::CertificateDer<'static>,
    server_key: rustls::pki_types::PrivateKeyDer<'static>,
    ca_der: rustls::pki_types::CertificateDer<'static>,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

impl TestPki {
    pub fn generate() -> TestPki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
        let ca_key = KeyPair::generate().expect("ca key");
        let mut ca_params = CertificateParams::new(Vec::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sitegate test CA");
        let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().expect("server key");
        let mut server_params = CertificateParams::new(Vec::new()).expect("server params");
        server_params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        let server_cert = server_params
            .signed_by(&server_key, &issuer)
            .expect("server cert");

        let client_key = KeyPair::generate().expect("client key");
        let mut client_params = CertificateParams::new(Vec::new()).expect("client params");
        client_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sitegate-test");
        let client_cert = client_params
            .signed_by(&client_key, &issuer)
            .expect("client cert");

        TestPki {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            server_cert: server_cert.der().clone(),
            server_key: rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
            server_cert_pem: server_cert.pem(),
            server_key_pem: server_key.serialize_pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        }
    }

    /// Writes `ca.pem`, `client.pem`, `client.key` into `dir`.
    pub fn write(&self, dir: &std::path::Path) {
        std::fs::write(dir.join("ca.pem"), &self.ca_pem).expect("write ca");
        std::fs::write(dir.join("client.pem"), &self.client_cert_pem).expect("write cert");
        std::fs::write(dir.join("client.key"), &self.client_key_pem).expect("write key");
    }
}

/// A TLS front to `upstream` with the server certificate of `pki`; with
/// `client_auth` it demands a client certificate signed by the test CA. Reports
/// each handshake's outcome.
pub async fn tls_front(
    upstream: SocketAddr,
    pki: &TestPki,
    client_auth: bool,
) -> (SocketAddr, mpsc::UnboundedReceiver<Result<(), String>>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions");
    let builder = if client_auth {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_der.clone()).expect("ca root");
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(vec![pki.server_cert.clone()], pki.server_key.clone_key())
        .expect("server cert");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind tls");
    let addr = listener.local_addr().expect("tls addr");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                match acceptor.accept(inbound).await {
                    Ok(mut tls) => {
                        let _ = tx.send(Ok(()));
                        if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut outbound).await;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                    }
                }
            });
        }
    });
    (addr, rx)
}

/// One received message.
#[derive(Clone, Debug)]
pub struct Message {
    pub topic: String,
    pub payload: Vec<u8>,
    pub retain: bool,
    pub correlation: Option<Vec<u8>>,
    /// MQTT 5 user properties.
    pub user: Vec<(String, String)>,
    /// When the subscriber's event loop read it.
    pub at: tokio::time::Instant,
}

impl Message {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.payload)
            .unwrap_or_else(|e| panic!("{}: payload is not JSON: {e}", self.topic))
    }
}

/// An MQTT 5 test client that subscribes to `filter` and records every message.
pub struct Subscriber {
    pub client: AsyncClient,
    messages: mpsc::UnboundedReceiver<Message>,
    /// The reason of every PUBACK the broker sent this client, in order.
    acks: mpsc::UnboundedReceiver<PubAckReason>,
    pub seen: Vec<Message>,
}

impl Subscriber {
    pub async fn connect(addr: SocketAddr, id: &str, filter: &str) -> Subscriber {
        Self::connect_as(addr, id, None, filter).await
    }

    /// [`Subscriber::connect`] with a broker user name and password.
    pub async fn connect_as(
        addr: SocketAddr,
        id: &str,
        login: Option<(&str, &str)>,
        filter: &str,
    ) -> Subscriber {
        let mut options = MqttOptions::new(id, addr.ip().to_string(), addr.port());
        if let Some((user, password)) = login {
            options.set_credentials(user, password);
        }
        options.set_keep_alive(Duration::from_secs(30));
        // Large RPC answers (the OpenAPI document) must not break the watcher.
        options.set_max_packet_size(Some(16 << 20));
        let (client, mut eventloop) = AsyncClient::new(options, 100);
        let (tx, messages) = mpsc::unbounded_channel();
        let (acks_tx, acks) = mpsc::unbounded_channel();
        let (subscribed_tx, mut subscribed) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let (correlation, user) = match p.properties {
                            Some(pr) => {
                                (pr.correlation_data.map(|b| b.to_vec()), pr.user_properties)
                            }
                            None => (None, Vec::new()),
                        };
                        let _ = tx.send(Message {
                            topic: String::from_utf8_lossy(&p.topic).into_owned(),
                            payload: p.payload.to_vec(),
                            retain: p.retain,
                            correlation,
                            user,
                            at: tokio::time::Instant::now(),
                        });
                    }
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        let _ = subscribed_tx.send(());
                    }
                    Ok(Event::Incoming(Packet::PubAck(a))) => {
                        let _ = acks_tx.send(a.reason);
                    }
                    Ok(_) => {}
                    Err(_) => {
                        if tx.is_closed() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        client
            .subscribe(filter, QoS::AtLeastOnce)
            .await
            .expect("subscribe");
        tokio::time::timeout(Duration::from_secs(10), subscribed.recv())
            .await
            .expect("SUBACK in time");
        Subscriber {
            client,
            messages,
            acks,
            seen: Vec::new(),
        }
    }

    /// Waits for the next message (recorded in `seen`) matching `pred`.
    pub async fn expect(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Message) -> bool,
    ) -> Message {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let m = tokio::time::timeout_at(deadline, self.messages.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out after {timeout:?} waiting for {what}"))
                .expect("subscriber running");
            self.seen.push(m.clone());
            if pred(&m) {
                return m;
            }
        }
    }

    /// Records in `seen` every message received so far, without waiting.
    pub fn drain(&mut self) {
        while let Ok(m) = self.messages.try_recv() {
            self.seen.push(m);
        }
    }

    /// Publishes an RPC request, optionally with an MQTT 5 response topic and
    /// correlation data.
    pub async fn request(&self, topic: &str, body: &Value, response: Option<(&str, &[u8])>) {
        let mut props = PublishProperties::default();
        if let Some((t, c)) = response {
            props.response_topic = Some(t.to_string());
            props.correlation_data = Some(c.to_vec().into());
        }
        self.client
            .publish_with_properties(topic, QoS::AtLeastOnce, false, body.to_string(), props)
            .await
            .expect("publish request");
    }

    /// [`Subscriber::request`], then the reason of the broker's PUBACK for it
    /// (`NotAuthorized` where its ACL denies the topic). Waits for no earlier
    /// publish of this client: only one may be unacknowledged.
    pub async fn request_acked(
        &mut self,
        topic: &str,
        body: &Value,
        response: Option<(&str, &[u8])>,
    ) -> PubAckReason {
        while self.acks.try_recv().is_ok() {}
        self.request(topic, body, response).await;
        tokio::time::timeout(Duration::from_secs(10), self.acks.recv())
            .await
            .unwrap_or_else(|_| panic!("no PUBACK for a publish to {topic} within 10 s"))
            .expect("subscriber running")
    }
}
