//! A 2030.5 utility server for the CSIP-AUS tests: axum over rustls that
//! demands a client certificate of the test CA and offers one cipher suite,
//! TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8, as CACTUS's servers do. It serves the
//! resource tree of envoy (the reference server) at the paths CACTUS's
//! procedures name, from state a test changes while the agent runs: the
//! EndDevice (registered out of band or in band), DER programs with their
//! defaults and controls, poll and post rates, the server's clock, and an
//! outage (every request answered 500, as CACTUS simulates one). It records
//! every request and what the client PUT and POSTed.

mod xml;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use sha2::Digest;
use tokio::net::TcpListener;

use super::broker::TestPki;

/// What a control or a default sets.
#[derive(Clone, Debug, Default)]
pub struct BaseSpec {
    pub connect: Option<bool>,
    pub energize: Option<bool>,
    pub ramp_tms: Option<u16>,
    pub import_w: Option<f64>,
    pub export_w: Option<f64>,
    pub generation_w: Option<f64>,
    pub load_w: Option<f64>,
    pub storage_w: Option<f64>,
    /// The power of ten the limits are sent with.
    pub multiplier: i8,
}

impl BaseSpec {
    pub fn export(w: f64) -> BaseSpec {
        BaseSpec {
            export_w: Some(w),
            ..BaseSpec::default()
        }
    }

    pub fn import(w: f64) -> BaseSpec {
        BaseSpec {
            import_w: Some(w),
            ..BaseSpec::default()
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct DefaultSpec {
    pub base: BaseSpec,
    pub set_grad_w: Option<u16>,
}

#[derive(Clone, Debug)]
pub struct Control {
    pub mrid: String,
    pub tag: String,
    pub created_s: i64,
    pub start_s: i64,
    pub duration_s: u32,
    pub randomize_start_s: i16,
    pub base: BaseSpec,
    pub cancelled: bool,
    pub superseded: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub fsa: usize,
    pub primacy: u8,
    pub default: Option<DefaultSpec>,
    pub controls: Vec<Control>,
}

#[derive(Clone, Debug)]
pub struct Mirror {
    pub mrid: String,
    pub role: u16,
    pub lfdi: String,
    /// Each reading posted: its quantity's uom (from the MUP), period start,
    /// duration, and value × 10^power.
    pub readings: Vec<Reading>,
    /// uom and power of ten by reading mRID.
    pub types: BTreeMap<String, (u8, i8)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub uom: u8,
    pub start_s: i64,
    pub duration_s: i64,
    pub value: f64,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    /// Server time, ms.
    pub at_ms: i64,
}

/// The rates the server hands out, s.
#[derive(Clone, Debug)]
pub struct Rates {
    pub dcap: u32,
    pub edev_list: u32,
    pub fsa_list: u32,
    pub derp_list: u32,
    pub der_list: u32,
    pub mup_list: u32,
    pub mup_post: u32,
    pub edev_post: u32,
}

impl Rates {
    /// Every rate `s`.
    pub fn all(s: u32) -> Rates {
        Rates {
            dcap: s,
            edev_list: s,
            fsa_list: s,
            derp_list: s,
            der_list: s,
            mup_list: s,
            mup_post: s,
            edev_post: s,
        }
    }
}

#[derive(Clone, Debug)]
pub struct EndDeviceRec {
    pub lfdi: String,
    pub sfdi: u64,
    pub pin: u32,
    pub nmi: Option<String>,
}

pub struct ServerState {
    pub rates: Rates,
    pub end_device: Option<EndDeviceRec>,
    /// The PIN an in-band registration gets.
    pub pin: u32,
    pub registration_links: bool,
    pub programs: Vec<Program>,
    pub mirrors: Vec<Mirror>,
    pub capability: Option<String>,
    pub settings: Option<String>,
    pub statuses: Vec<String>,
    /// `(mrid, status)` in the order posted.
    pub responses: Vec<(String, u8)>,
    pub requests: Vec<Seen>,
    /// Answer every request 500 while set.
    pub offline: bool,
    /// The server's clock minus the real one, s.
    pub clock_offset_s: i64,
    /// Canned answers by path: status, body, and a delay before it.
    pub overrides: BTreeMap<String, Canned>,
    /// The `responseRequired` of every control served.
    pub response_required: &'static str,
    next_mrid: u32,
}

/// A canned answer.
#[derive(Clone, Debug)]
pub struct Canned {
    pub status: StatusCode,
    pub body: String,
    pub location: Option<String>,
    pub delay: Duration,
}

/// The running server.
pub struct CsipServer {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<ServerState>>,
    pub pki: TestPki,
    /// `ca.pem`, `client.pem`, `client.key`.
    pub files: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CsipServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// The test server's own clock, not the agent's: the peer keeps real time.
#[allow(clippy::disallowed_methods)]
fn real_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn real_now_s() -> i64 {
    real_now_ms() / 1000
}

impl ServerState {
    pub fn now_s(&self) -> i64 {
        real_now_s() + self.clock_offset_s
    }
}

/// The lFDI of a certificate, as 2030.5 defines it.
pub fn lfdi_of(der: &[u8]) -> (String, u64) {
    let h = sha2::Sha256::digest(der);
    let lfdi = hex::encode_upper(&h[..20]);
    let raw = u64::from_str_radix(&lfdi[..9], 16).unwrap();
    let digits: u64 = raw.to_string().bytes().map(|b| u64::from(b - b'0')).sum();
    (lfdi, raw * 10 + (10 - digits % 10) % 10)
}

impl CsipServer {
    /// Starts on a free loopback port with every rate `rate_s` and one
    /// program of primacy 0 (CACTUS's usual set-up).
    pub async fn start(rate_s: u32) -> CsipServer {
        let pki = TestPki::generate();
        let files = tempfile::tempdir().unwrap();
        pki.write(files.path());
        let state = Arc::new(Mutex::new(ServerState {
            rates: Rates::all(rate_s),
            end_device: None,
            pin: 111_115,
            registration_links: true,
            programs: vec![Program::default()],
            mirrors: Vec::new(),
            capability: None,
            settings: None,
            statuses: Vec::new(),
            responses: Vec::new(),
            requests: Vec::new(),
            offline: false,
            clock_offset_s: 0,
            overrides: BTreeMap::new(),
            response_required: "03",
            next_mrid: 1,
        }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = Arc::new(server_tls(&pki));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
                let app = app.clone();
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let peer = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .map(|c| lfdi_of(c.as_ref()));
                    let app = app.layer(Extension(Peer(peer)));
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        CsipServer {
            addr,
            state,
            pki,
            files,
            task,
        }
    }

    /// The `[csip_aus]` table for `site`.
    pub fn table(&self, site: &str, pin: Option<u32>) -> String {
        let d = self.files.path();
        format!(
            "\n[csip_aus]\nsite = \"{site}\"\ndcap_url = \"https://127.0.0.1:{port}/dcap\"\ncert_file = \"{cert}\"\nkey_file = \"{key}\"\nca_file = \"{ca}\"\nnmi = \"2001985732\"\n{pin}pen = 12345\ntimeout_s = 2\n",
            port = self.addr.port(),
            cert = d.join("client.pem").display(),
            key = d.join("client.key").display(),
            ca = d.join("ca.pem").display(),
            pin = pin.map(|p| format!("pin = {p}\n")).unwrap_or_default(),
        )
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut ServerState) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }

    pub fn now_s(&self) -> i64 {
        self.with(|s| s.now_s())
    }

    /// The client's identity: the test PKI's client certificate.
    pub fn client_identity(&self) -> (String, u64) {
        let der =
            rustls::pki_types::CertificateDer::from_pem_slice(self.pki.client_cert_pem.as_bytes())
                .unwrap();
        lfdi_of(der.as_ref())
    }

    /// Registers the client's EndDevice out of band with `pin`.
    pub fn register(&self, pin: u32) {
        let (lfdi, sfdi) = self.client_identity();
        self.with(|s| {
            s.end_device = Some(EndDeviceRec {
                lfdi,
                sfdi,
                pin,
                nmi: None,
            })
        });
    }

    /// Adds a program in function set `fsa` (1 or more); its index.
    pub fn add_program(&self, fsa: usize, primacy: u8) -> usize {
        self.with(|s| {
            s.programs.push(Program {
                fsa,
                primacy,
                ..Program::default()
            });
            s.programs.len()
        })
    }

    /// Sets program `k`'s default (1-based).
    pub fn set_default(&self, k: usize, d: Option<DefaultSpec>) {
        self.with(|s| s.programs[k - 1].default = d);
    }

    /// Adds a control to program `k` (1-based), starting `start_in_s` from
    /// the server's now; its mRID.
    pub fn add_control(
        &self,
        k: usize,
        tag: &str,
        start_in_s: i64,
        duration_s: u32,
        base: BaseSpec,
    ) -> String {
        self.add_control_with(k, tag, start_in_s, duration_s, base, 0)
    }

    pub fn add_control_with(
        &self,
        k: usize,
        tag: &str,
        start_in_s: i64,
        duration_s: u32,
        base: BaseSpec,
        randomize_start_s: i16,
    ) -> String {
        let start = self.now_s() + start_in_s;
        self.add_control_at(k, tag, start, duration_s, base, randomize_start_s)
    }

    /// Adds a control to program `k` starting at server time `start_s`.
    pub fn add_control_at(
        &self,
        k: usize,
        tag: &str,
        start_s: i64,
        duration_s: u32,
        base: BaseSpec,
        randomize_start_s: i16,
    ) -> String {
        self.with(|s| {
            let mrid = format!("{:024X}{:08}", s.next_mrid, 12345);
            s.next_mrid += 1;
            let now = s.now_s();
            s.programs[k - 1].controls.push(Control {
                mrid: mrid.clone(),
                tag: tag.to_string(),
                created_s: now,
                start_s,
                duration_s,
                randomize_start_s,
                base,
                cancelled: false,
                superseded: false,
            });
            mrid
        })
    }

    /// Cancels every control not over yet (CACTUS's
    /// `cancel-active-der-controls`).
    pub fn cancel_active(&self) {
        self.with(|s| {
            let now = s.now_s();
            for p in &mut s.programs {
                for c in &mut p.controls {
                    if now < c.start_s + i64::from(c.duration_s) {
                        c.cancelled = true;
                    }
                }
            }
        });
    }

    pub fn responses(&self) -> Vec<(String, u8)> {
        self.with(|s| s.responses.clone())
    }

    /// The statuses posted for `mrid`, in order.
    pub fn responses_for(&self, mrid: &str) -> Vec<u8> {
        self.with(|s| {
            s.responses
                .iter()
                .filter(|(m, _)| m == mrid)
                .map(|(_, st)| *st)
                .collect()
        })
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.with(|s| s.requests.clone())
    }

    /// The paths requested with `method`, in order (no query).
    pub fn paths(&self, method: Method) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method)
            .map(|r| r.path)
            .collect()
    }

    /// The times (server ms) `path` was asked with `method`.
    pub fn times(&self, method: Method, path: &str) -> Vec<i64> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .map(|r| r.at_ms)
            .collect()
    }

    /// Answers `path` with `status` and `body` after `delay` from now on.
    pub fn canned(&self, path: &str, status: StatusCode, body: &str, delay: Duration) {
        self.with(|s| {
            s.overrides.insert(
                path.to_string(),
                Canned {
                    status,
                    body: body.to_string(),
                    location: None,
                    delay,
                },
            )
        });
    }

    /// `path` answered as it should again.
    pub fn uncanned(&self, path: &str) {
        self.with(|s| s.overrides.remove(path));
    }

    pub fn set_offline(&self, offline: bool) {
        self.with(|s| s.offline = offline);
    }

    /// The readings of the mirror with `role` of `uom`.
    pub fn readings(&self, role: u16, uom: u8) -> Vec<Reading> {
        self.with(|s| {
            s.mirrors
                .iter()
                .filter(|m| m.role == role)
                .flat_map(|m| m.readings.iter().filter(|r| r.uom == uom).cloned())
                .collect()
        })
    }

    /// The last DERStatus's genConnectStatus bits, and how many were PUT.
    pub fn last_status_bits(&self) -> Option<(u32, usize)> {
        self.with(|s| {
            let last = s.statuses.last()?;
            let doc = roxmltree::Document::parse(last).ok()?;
            let v = doc
                .descendants()
                .find(|n| n.has_tag_name("genConnectStatus"))?
                .children()
                .find(|n| n.has_tag_name("value"))?
                .text()?;
            Some((u32::from_str_radix(v.trim(), 16).ok()?, s.statuses.len()))
        })
    }
}

/// The TLS of the server: its certificate for 127.0.0.1, the test CA's
/// client certificates demanded, TLS 1.2 with CCM_8 only.
fn server_tls(pki: &TestPki) -> rustls::ServerConfig {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: vec![sitegate::csip::tls::ccm8::suite().unwrap()],
        ..(*sitegate::csip::tls::provider()).clone()
    });
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(pki.server_cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(pki.server_key_pem.as_bytes()).unwrap(),
        )
        .unwrap()
}

use rustls::pki_types::pem::PemObject;

/// The client's lFDI and sFDI, from its certificate.
#[derive(Clone)]
struct Peer(Option<(String, u64)>);

fn sep(status: StatusCode, body: String) -> Response {
    (status, [("content-type", "application/sep+xml")], body).into_response()
}

fn created(location: &str) -> Response {
    (StatusCode::CREATED, [("location", location.to_string())]).into_response()
}

/// `s` and `l` of a list query.
fn paging(uri: &Uri) -> (usize, usize) {
    let mut s = 0;
    let mut l = 1;
    for pair in uri.query().unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("s", v)) => s = v.parse().unwrap_or(0),
            Some(("l", v)) => l = v.parse().unwrap_or(1),
            _ => {}
        }
    }
    (s, l)
}

fn page(items: Vec<String>, uri: &Uri) -> (usize, Vec<String>) {
    let (s, l) = paging(uri);
    let all = items.len();
    (all, items.into_iter().skip(s).take(l).collect())
}

/// The text of the first element `name` of `body`.
fn text_of(body: &str, name: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(body).ok()?;
    doc.descendants()
        .find(|n| n.tag_name().name() == name)
        .and_then(|n| n.text())
        .map(|t| t.trim().to_string())
}

async fn handle(
    State(state): State<Arc<Mutex<ServerState>>>,
    Extension(peer): Extension<Peer>,
    method: Method,
    uri: Uri,
    _headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = String::from_utf8_lossy(&body).to_string();
    let path = uri.path().to_string();
    let canned = {
        let mut s = state.lock().unwrap();
        let real_ms = real_now_ms();
        let at_ms = real_ms + s.clock_offset_s * 1000;
        s.requests.push(Seen {
            method: method.clone(),
            path: path.clone(),
            at_ms,
        });
        if s.offline {
            return (StatusCode::INTERNAL_SERVER_ERROR, "offline").into_response();
        }
        s.overrides.get(&path).cloned()
    };
    if let Some(c) = canned {
        // A real wait on the server's socket: a delay past the client's own request
        // timeout (csip_bad_input: 3 s against its 2000 ms) makes the client give up.
        tokio::time::sleep(c.delay).await;
        let mut r = sep(c.status, c.body);
        if let Some(l) = c.location {
            r.headers_mut().insert("location", l.parse().unwrap());
        }
        return r;
    }
    answer(&state, &peer, &method, &uri, body)
}

/// The server's answer from its state.
fn answer(
    state: &Mutex<ServerState>,
    peer: &Peer,
    method: &Method,
    uri: &Uri,
    body: String,
) -> Response {
    let mut s = state.lock().unwrap();
    let path = uri.path().to_string();
    let now = s.now_s();
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let r = s.rates.clone();
    match (method.as_str(), segs.as_slice()) {
        ("GET", ["dcap"]) => sep(
            StatusCode::OK,
            format!(
                r#"<DeviceCapability {} href="/dcap" pollRate="{}"><TimeLink href="/tm"/><EndDeviceListLink href="/edev" all="{}"/><MirrorUsagePointListLink href="/mup" all="{}"/></DeviceCapability>"#,
                xml::NS,
                r.dcap,
                usize::from(s.end_device.is_some()),
                s.mirrors.len()
            ),
        ),
        ("GET", ["tm"]) => sep(
            StatusCode::OK,
            format!(
                r#"<Time {} href="/tm" pollRate="900"><currentTime>{now}</currentTime><dstEndTime>0</dstEndTime><dstOffset>0</dstOffset><dstStartTime>0</dstStartTime><localTime>{}</localTime><quality>4</quality><tzOffset>36000</tzOffset></Time>"#,
                xml::NS,
                now + 36_000
            ),
        ),
        ("GET", ["edev"]) => {
            let items = match (&s.end_device, &peer.0) {
                (Some(e), Some((lfdi, _))) if e.lfdi == *lfdi => {
                    vec![xml::end_device(&e.lfdi, e.sfdi, s.registration_links, r.edev_post)]
                }
                _ => Vec::new(),
            };
            let (all, items) = page(items, uri);
            sep(StatusCode::OK, xml::list("EndDeviceList", all, &items, Some(r.edev_list), "/edev"))
        }
        ("POST", ["edev"]) => {
            let (Some(lfdi), Some(sfdi)) = (text_of(&body, "lFDI"), text_of(&body, "sFDI")) else {
                return (StatusCode::BAD_REQUEST, "no lFDI or sFDI").into_response();
            };
            // envoy refuses a device certificate's body with another
            // identity (403).
            let Some((cert_lfdi, cert_sfdi)) = &peer.0 else {
                return StatusCode::FORBIDDEN.into_response();
            };
            if lfdi != *cert_lfdi || sfdi.parse::<u64>().ok() != Some(*cert_sfdi) {
                return (StatusCode::FORBIDDEN, "lFDI or sFDI not the certificate's").into_response();
            }
            let pin = s.pin;
            s.end_device = Some(EndDeviceRec {
                lfdi,
                sfdi: *cert_sfdi,
                pin,
                nmi: None,
            });
            created("/edev/1")
        }
        ("GET", ["edev", "1"]) => match &s.end_device {
            Some(e) => sep(
                StatusCode::OK,
                xml::end_device(&e.lfdi, e.sfdi, s.registration_links, r.edev_post)
                    .replacen("<EndDevice ", &format!("<EndDevice {} ", xml::NS), 1),
            ),
            None => StatusCode::NOT_FOUND.into_response(),
        },
        ("GET", ["edev", "1", "rg"]) => match &s.end_device {
            Some(e) => sep(
                StatusCode::OK,
                format!(
                    r#"<Registration {} href="/edev/1/rg" pollRate="86400"><dateTimeRegistered>1700000000</dateTimeRegistered><pIN>{}</pIN></Registration>"#,
                    xml::NS,
                    e.pin
                ),
            ),
            None => StatusCode::NOT_FOUND.into_response(),
        },
        ("PUT" | "POST", ["edev", "1", "cp"]) => {
            let nmi = text_of(&body, "connectionPointId");
            match (&mut s.end_device, nmi) {
                (Some(e), Some(n)) => {
                    e.nmi = Some(n);
                    StatusCode::NO_CONTENT.into_response()
                }
                _ => StatusCode::BAD_REQUEST.into_response(),
            }
        }
        ("GET", ["edev", "1", "fsa"]) => {
            let mut fsas: Vec<usize> = s.programs.iter().map(|p| p.fsa.max(1)).collect();
            fsas.sort_unstable();
            fsas.dedup();
            let items = fsas
                .iter()
                .map(|f| {
                    let n = s.programs.iter().filter(|p| p.fsa.max(1) == *f).count();
                    format!(
                        r#"<FunctionSetAssignments href="/edev/1/fsa/{f}" subscribable="0"><DERProgramListLink href="/edev/1/fsa/{f}/derp" all="{n}"/><TimeLink href="/tm"/><mRID>F5A{f:029}</mRID><description>fsa {f}</description><version>0</version></FunctionSetAssignments>"#
                    )
                })
                .collect();
            let (all, items) = page(items, uri);
            sep(
                StatusCode::OK,
                xml::list("FunctionSetAssignmentsList", all, &items, Some(r.fsa_list), "/edev/1/fsa"),
            )
        }
        ("GET", ["edev", "1", "fsa", f, "derp"]) => {
            let f: usize = f.parse().unwrap_or(0);
            let items = s
                .programs
                .iter()
                .enumerate()
                .filter(|(_, p)| p.fsa.max(1) == f)
                .map(|(i, p)| xml::program(i + 1, p))
                .collect();
            let (all, items) = page(items, uri);
            sep(
                StatusCode::OK,
                xml::list("DERProgramList", all, &items, Some(r.derp_list), &path),
            )
        }
        ("GET", ["edev", "1", "derp", k, "derc"]) => {
            let k: usize = k.parse().unwrap_or(0);
            let Some(p) = s.programs.get(k.wrapping_sub(1)) else {
                return StatusCode::NOT_FOUND.into_response();
            };
            let rr = s.response_required;
            let (from, take) = paging(uri);
            let all = p.controls.len();
            // Only the page asked for is written (10,000 controls listed).
            let items: Vec<String> = p
                .controls
                .iter()
                .skip(from)
                .take(take)
                .map(|c| {
                    xml::control(k, c, now).replacen(
                        r#"responseRequired="03""#,
                        &format!(r#"responseRequired="{rr}""#),
                        1,
                    )
                })
                .collect();
            sep(StatusCode::OK, xml::list("DERControlList", all, &items, None, &path))
        }
        ("GET", ["edev", "1", "derp", k, "dderc"]) => {
            let k: usize = k.parse().unwrap_or(0);
            match s.programs.get(k.wrapping_sub(1)).and_then(|p| p.default.as_ref()) {
                Some(d) => sep(StatusCode::OK, xml::default(k, d)),
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
        ("GET", ["edev", "1", "der"]) => sep(
            StatusCode::OK,
            xml::list(
                "DERList",
                1,
                &[r#"<DER href="/edev/1/der/1" subscribable="0"><DERAvailabilityLink href="/edev/1/der/1/dera"/><DERCapabilityLink href="/edev/1/der/1/dercap"/><DERSettingsLink href="/edev/1/der/1/derg"/><DERStatusLink href="/edev/1/der/1/ders"/></DER>"#.to_string()],
                Some(r.der_list),
                "/edev/1/der",
            ),
        ),
        ("PUT", ["edev", "1", "der", "1", which]) => {
            match *which {
                "dercap" => s.capability = Some(body),
                "derg" => s.settings = Some(body),
                "ders" => s.statuses.push(body),
                _ => return StatusCode::NOT_FOUND.into_response(),
            }
            StatusCode::NO_CONTENT.into_response()
        }
        ("GET", ["mup"]) => {
            let post = r.mup_post;
            let items = s
                .mirrors
                .iter()
                .enumerate()
                .map(|(i, m)| xml::mirror(i + 1, m, post))
                .collect();
            let (all, items) = page(items, uri);
            sep(StatusCode::OK, xml::list("MirrorUsagePointList", all, &items, Some(r.mup_list), "/mup"))
        }
        ("POST", ["mup"]) => {
            let Ok(doc) = roxmltree::Document::parse(&body) else {
                return (StatusCode::BAD_REQUEST, "not XML").into_response();
            };
            let root = doc.root_element();
            let child = |n: roxmltree::Node, name: &str| {
                n.children()
                    .find(|c| c.tag_name().name() == name)
                    .and_then(|c| c.text())
                    .map(|t| t.trim().to_string())
            };
            let (Some(mrid), Some(role), Some(lfdi)) = (
                child(root, "mRID"),
                child(root, "roleFlags").and_then(|r| u16::from_str_radix(&r, 16).ok()),
                child(root, "deviceLFDI"),
            ) else {
                return (StatusCode::BAD_REQUEST, "no mRID, roleFlags or deviceLFDI").into_response();
            };
            let mut types = BTreeMap::new();
            for mmr in root.children().filter(|c| c.tag_name().name() == "MirrorMeterReading") {
                let rt = mmr.children().find(|c| c.tag_name().name() == "ReadingType");
                let (Some(id), Some(rt)) = (child(mmr, "mRID"), rt) else {
                    continue;
                };
                let uom = child(rt, "uom").and_then(|u| u.parse().ok()).unwrap_or(0);
                let p10 = child(rt, "powerOfTenMultiplier").and_then(|u| u.parse().ok()).unwrap_or(0);
                types.insert(id, (uom, p10));
            }
            let at = match s.mirrors.iter().position(|m| m.mrid == mrid) {
                Some(i) => i + 1,
                None => {
                    s.mirrors.push(Mirror {
                        mrid,
                        role,
                        lfdi,
                        readings: Vec::new(),
                        types,
                    });
                    s.mirrors.len()
                }
            };
            created(&format!("/mup/{at}"))
        }
        ("GET", ["mup", id]) => {
            let id: usize = id.parse().unwrap_or(0);
            let post = r.mup_post;
            match s.mirrors.get(id.wrapping_sub(1)) {
                Some(m) => sep(StatusCode::OK, xml::mirror(id, m, post).replacen("<MirrorUsagePoint ", &format!("<MirrorUsagePoint {} ", xml::NS), 1)),
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
        ("POST", ["mup", id]) => {
            let id: usize = id.parse().unwrap_or(0);
            let Some(m) = s.mirrors.get_mut(id.wrapping_sub(1)) else {
                return StatusCode::NOT_FOUND.into_response();
            };
            let Ok(doc) = roxmltree::Document::parse(&body) else {
                return (StatusCode::BAD_REQUEST, "not XML").into_response();
            };
            for mmr in doc.descendants().filter(|n| n.tag_name().name() == "MirrorMeterReading") {
                let get = |n: roxmltree::Node, name: &str| {
                    n.descendants()
                        .find(|c| c.tag_name().name() == name)
                        .and_then(|c| c.text())
                        .and_then(|t| t.trim().parse::<i64>().ok())
                };
                let id = mmr
                    .children()
                    .find(|c| c.tag_name().name() == "mRID")
                    .and_then(|c| c.text())
                    .unwrap_or("")
                    .trim()
                    .to_string();
                let Some((uom, p10)) = m.types.get(&id).copied() else {
                    return (StatusCode::BAD_REQUEST, format!("reading {id} was not declared")).into_response();
                };
                let Some(reading) = mmr.children().find(|c| c.tag_name().name() == "Reading") else {
                    continue;
                };
                let (Some(start), Some(duration), Some(value)) = (get(reading, "start"), get(reading, "duration"), get(reading, "value")) else {
                    return (StatusCode::BAD_REQUEST, "a reading without its period or value").into_response();
                };
                m.readings.push(Reading {
                    uom,
                    start_s: start,
                    duration_s: duration,
                    value: value as f64 * 10f64.powi(i32::from(p10)),
                });
            }
            created(&format!("/mup/{id}"))
        }
        ("POST", ["edev", "1", "rsps", "site_control", "rsp"]) => {
            let (Some(subject), Some(status)) = (text_of(&body, "subject"), text_of(&body, "status")) else {
                return (StatusCode::BAD_REQUEST, "no subject or status").into_response();
            };
            let n = s.responses.len();
            s.responses.push((subject, status.parse().unwrap_or(0)));
            created(&format!("/edev/1/rsps/site_control/rsp/{n}"))
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Waits until `f` holds of the server, or panics after `within` naming
/// `what` with the server's requests so far.
pub async fn until(
    server: &CsipServer,
    what: &str,
    within: Duration,
    f: impl Fn(&CsipServer) -> bool,
) {
    let deadline = tokio::time::Instant::now() + within;
    while !f(server) {
        if tokio::time::Instant::now() >= deadline {
            let seen: Vec<String> = server
                .requests()
                .iter()
                .rev()
                .take(30)
                .map(|r| format!("{} {}", r.method, r.path))
                .collect();
            panic!("timed out after {within:?} waiting for {what}; last requests: {seen:?}; responses {:?}", server.responses());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
