//! HTTPS through the binary: the self-signed certificate made at first start
//! is served over TLS 1.3 (and 1.2) with ALPN http/1.1, its fingerprint as
//! `sitegate tls fingerprint` prints it is the one served, a client pinning
//! it gets in and one pinning another does not; `sitegate diag` over HTTPS
//! with the pin; a SIGHUP swaps the certificate under running requests (none
//! fails), and a broken file keeps the one in service.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::site::{ADMIN_TOKEN, READ_TOKEN};
use crate::https_support::{any_certificate, get, sitegate, start, T};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_signed_certificate_is_served_pinned_and_printed() {
    let agent = start("\"self-signed\"", "tls_names = [\"controller.test\"]").await;
    let printed = sitegate(&["tls", "fingerprint"], &agent.file);
    assert_eq!(printed.len(), 95, "{printed}");
    let pin = sitegate(&["tls", "fingerprint", "--pin"], &agent.file);
    assert!(pin.starts_with("sha256//") && pin.ends_with('='), "{pin}");

    // Pinned to the printed fingerprint: in, TLS 1.3, http/1.1.
    let pinned = sitegate::https::pinned::client_config(&printed).expect("a fingerprint");
    let a = get(agent.https, pinned, "/healthz", None)
        .await
        .expect("pinned HTTPS");
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.served, printed);
    assert_eq!(a.version, Some(rustls::ProtocolVersion::TLSv1_3));
    // Offered h2 and http/1.1: the server speaks HTTP/1.1 only.
    let a = get(agent.https, any_certificate(), "/healthz", None)
        .await
        .expect("HTTPS");
    assert_eq!(a.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(a.served, printed);
    // TLS 1.2 too.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls12 = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .expect("TLS 1.2")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(
            sitegate::https::pinned::Pinned::new(&printed).expect("pin"),
        ))
        .with_no_client_auth();
    let a = get(agent.https, Arc::new(tls12), "/devices", Some(ADMIN_TOKEN))
        .await
        .expect("TLS 1.2");
    assert_eq!(a.version, Some(rustls::ProtocolVersion::TLSv1_2));
    assert_ne!(a.status, 401, "{a:?}");
    // Pinned to another certificate: no handshake.
    let other = "AB:".repeat(31) + "AB";
    let wrong = sitegate::https::pinned::client_config(&other).expect("a fingerprint");
    let e = get(agent.https, wrong, "/healthz", None)
        .await
        .expect_err("another pin gets in");
    assert!(e.contains("not the pinned"), "{e}");

    // The start log says it; the files are in the state directory.
    let log = agent.process.log();
    assert!(log.contains(&printed), "{log}");
    let dir = agent.file.parent().expect("dir");
    let key = std::fs::metadata(dir.join("https-self-signed.key")).expect("key kept");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777,
        0o600
    );
    let names = std::fs::read_to_string(dir.join("https-self-signed.names")).expect("names");
    for n in ["controller.test", "localhost", "127.0.0.1"] {
        assert!(names.lines().any(|l| l == n), "{n} not in {names}");
    }

    // `sitegate diag` over HTTPS, pinned: the bundle names the fingerprint.
    let out_file = dir.join("bundle.txt");
    let https = agent.https.to_string();
    let out_path = out_file.display().to_string();
    sitegate(
        &[
            "diag",
            "--https",
            &https,
            "--fingerprint",
            &printed,
            "--token",
            ADMIN_TOKEN,
            "--output",
            &out_path,
        ],
        &agent.file,
    );
    let bundle = std::fs::read_to_string(&out_file).expect("bundle");
    assert!(
        bundle.contains(&format!("https_fingerprint_sha256: {printed}")),
        "{bundle}"
    );
    // Without --fingerprint: pinned to the config's certificate, read on
    // this machine.
    let bundle = sitegate(
        &[
            "diag",
            "--https",
            &https,
            "--token",
            ADMIN_TOKEN,
            "--output",
            "-",
        ],
        &agent.file,
    );
    assert!(
        bundle.contains(&format!("https_fingerprint_sha256: {printed}")),
        "{bundle}"
    );
    // Pinned to another certificate: refused, saying why.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(["diag", "--https", &https, "--fingerprint", &other])
        .args(["--token", ADMIN_TOKEN, "--output", "-", "--config"])
        .arg(&agent.file)
        .output()
        .expect("diag runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not the pinned"), "{err}");
}

/// Under systemd the certificate lives in the unit's state directory, not
/// in the store's folder: a store that cannot be opened (here its folder is a
/// file; in the package check, a path on the read-only /usr) leaves the agent
/// on a temporary store, serving HTTPS with the state directory's
/// certificate, the one `sitegate tls fingerprint` prints there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_opened_leaves_https_on_the_state_directory() {
    let root = tempfile::tempdir().expect("temp dir");
    let not_a_folder = root.path().join("not-a-folder");
    std::fs::write(&not_a_folder, "a file").expect("write");
    let store = not_a_folder.join("sitegate.db");
    let state = root.path().join("state");
    let runtime = root.path().join("run");
    std::fs::create_dir(&state).expect("state dir");
    std::fs::create_dir(&runtime).expect("runtime dir");
    let placement = crate::https_support::Placement {
        store: Some(&store),
        env: vec![("STATE_DIRECTORY", &state), ("RUNTIME_DIRECTORY", &runtime)],
    };
    let agent = crate::https_support::start_with(
        crate::common::free_port(),
        crate::common::free_port(),
        "\"self-signed\"",
        "",
        placement,
    )
    .await;
    assert!(
        runtime.join("temporary.db").exists(),
        "{}",
        agent.process.log()
    );
    assert!(state.join("https-self-signed.crt").exists());
    let printed = crate::https_support::sitegate_in(
        &["tls", "fingerprint"],
        &agent.file,
        &[("STATE_DIRECTORY", &state)],
    );
    let a = get(agent.https, any_certificate(), "/readyz", None)
        .await
        .expect("HTTPS");
    assert_eq!(a.served, printed);
    assert!(a.body.contains("temporary store"), "{a:?}");
}

/// A certificate and key for `name`, PEM.
fn pair(name: &str) -> (String, String, String) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let cert = rcgen::CertificateParams::new(vec![name.to_string(), "127.0.0.1".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let fp = crate::https_support::fingerprint(cert.der());
    (cert.pem(), key.serialize_pem(), fp)
}

/// Writes `text` to `path` through a rename, as a deployment tool would.
/// SIGHUP to the agent, then waits until its log holds `text`.
async fn sighup_until_logged(agent: &crate::common::process::AgentProcess, text: &str) {
    agent.signal(Signal::SIGHUP);
    crate::common::wait_for(text, T, || {
        std::future::ready(agent.log().contains(text).then_some(()))
    })
    .await;
}

fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_swaps_the_certificate_under_running_requests() {
    let files = tempfile::tempdir().expect("dir");
    let cert_file = files.path().join("cert.pem");
    let key_file = files.path().join("key.pem");
    let (cert_a, key_a, fp_a) = pair("a.test");
    let (cert_b, key_b, fp_b) = pair("b.test");
    std::fs::write(&cert_file, &cert_a).expect("cert");
    std::fs::write(&key_file, &key_a).expect("key");
    let tls = format!(
        "{{ cert_file = \"{}\", key_file = \"{}\" }}",
        cert_file.display(),
        key_file.display()
    );
    let agent = start(&tls, "").await;
    assert_eq!(sitegate(&["tls", "fingerprint"], &agent.file), fp_a);

    // Requests on new connections all along; each must succeed.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..3 {
        let (stop, done, addr) = (stop.clone(), done.clone(), agent.https);
        workers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let a = get(addr, any_certificate(), "/devices", Some(READ_TOKEN))
                    .await
                    .unwrap_or_else(|e| panic!("a request failed during the swap: {e}"));
                assert_eq!(a.status, 200, "{a:?}");
                if !seen.contains(&a.served) {
                    seen.push(a.served);
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            seen
        }));
    }
    let served = || async {
        get(agent.https, any_certificate(), "/healthz", None)
            .await
            .expect("HTTPS")
            .served
    };
    crate::common::wait_for("requests running", T, || {
        std::future::ready((done.load(Ordering::Relaxed) >= 10).then_some(()))
    })
    .await;
    // Key first, then the certificate: a SIGHUP between the two would find
    // them apart and keep A.
    replace(&key_file, &key_b);
    replace(&cert_file, &cert_b);
    agent.process.signal(Signal::SIGHUP);
    crate::common::wait_for("B served", T, || async {
        (served().await == fp_b).then_some(())
    })
    .await;
    let before = done.load(Ordering::Relaxed);
    crate::common::wait_for("requests after the swap", T, || {
        std::future::ready((done.load(Ordering::Relaxed) >= before + 10).then_some(()))
    })
    .await;

    // A broken certificate: B stays, and the log says why.
    replace(
        &cert_file,
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
    );
    sighup_until_logged(
        &agent.process,
        "the HTTPS certificate cannot be used; the one in service stays",
    )
    .await;
    let log = agent.process.log();
    assert!(log.contains(&cert_file.display().to_string()), "{log}");
    // A key that does not match the certificate: B stays too.
    replace(&cert_file, &cert_a);
    sighup_until_logged(&agent.process, "does not match the certificate").await;
    // A swap the agent process made anyway, after logging the refusal, would be in
    // service within moments: after 200 ms B must still be served.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(served().await, fp_b);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let seen = w.await.expect("no request failed");
        assert!(seen.iter().all(|s| *s == fp_a || *s == fp_b), "{seen:?}");
    }
}

/// A plain listener beyond loopback under `auth = "tokens"`: check-config
/// refuses it (without `allow_plain_tokens`), the agent runs on it anyway
/// (an upgraded site keeps going), and a request carrying a token from the
/// network is refused 401 before the token is looked at, naming the HTTPS
/// address; without a token it is served; over HTTPS the token works. The
/// token is in no log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_over_plain_http_from_the_network_is_refused() {
    let Some(lan) = crate::https_support::lan_address() else {
        assert!(
            !crate::common::required("LAN_ADDRESS"),
            "no address other than loopback on this machine"
        );
        eprintln!("skipped: no address other than loopback on this machine");
        return;
    };
    let plain = crate::https_support::free_port_on(lan);
    let https = crate::https_support::free_port_on(lan);
    let agent = crate::https_support::start_on(plain, https, "\"self-signed\"", "").await;
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .arg("check-config")
        .arg(&agent.file)
        .output()
        .expect("check-config runs");
    assert_eq!(check.status.code(), Some(78));
    let said = String::from_utf8_lossy(&check.stderr);
    assert!(said.contains("http.listen[0]"), "{said}");
    assert!(said.contains("allow_plain_tokens = true"), "{said}");
    let http = reqwest::Client::new();
    for token in [READ_TOKEN, "sg_not_a_known_token"] {
        let resp = http
            .get(format!("http://{plain}/devices"))
            .bearer_auth(token)
            .send()
            .await
            .expect("answers");
        assert_eq!(resp.status(), 401);
        let body: serde_json::Value = resp.json().await.expect("problem+json");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(&format!("https://{https}")), "{body}");
        assert!(detail.contains("not checked"), "{body}");
    }
    let resp = http
        .get(format!("http://{plain}/healthz"))
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status(), 200);
    // Over HTTPS the same token is taken.
    let a = get(https, any_certificate(), "/devices", Some(READ_TOKEN))
        .await
        .expect("HTTPS");
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.starts_with('['), "{}", a.body);
    // From loopback, plain HTTP still takes it.
    let loopback = crate::https_support::start("\"self-signed\"", "").await;
    let resp = http
        .get(format!("http://{}/devices", loopback.plain))
        .bearer_auth(READ_TOKEN)
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status(), 200);
    assert!(!agent.process.log().contains(READ_TOKEN));
}

/// A TLS handshake holds a connection slot like a request head, and one
/// trickled a byte at a time is closed within the head deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_handshake_ends_within_the_head_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let agent = start("\"self-signed\"", "").await;
    let metric = |name: &'static str| {
        let base = format!("http://{}", agent.plain);
        async move {
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client");
            crate::common::prom::scrape(&client, &base)
                .await
                .get(name)
                .unwrap_or(0.0)
        }
    };
    let mut conn = tokio::net::TcpStream::connect(agent.https)
        .await
        .expect("connect");
    // The start of a ClientHello record: handshake, TLS 1.0 record version.
    let hello = [
        0x16u8, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4, 0x03, 0x03,
    ];
    conn.write_all(&hello[..1]).await.expect("write");
    // The handshake holds a slot: it and the scrape are open.
    crate::common::wait_for("the handshake holds a slot", T, || async {
        (metric("sitegate_http_connections").await >= 2.0).then_some(())
    })
    .await;
    let started = tokio::time::Instant::now();
    let mut closed = false;
    for byte in hello[1..].iter().cycle() {
        if conn.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 64];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(500), conn.read(&mut buf)).await
        {
            closed = true;
            break;
        }
        if started.elapsed() > 2 * sitegate::agent::HTTP_HEAD_TIMEOUT + T {
            break;
        }
    }
    assert!(closed, "a trickled handshake kept its connection");
    assert!(metric("sitegate_http_tls_handshakes_failed_total").await >= 1.0);
    assert!(metric("sitegate_http_head_timeouts_total").await >= 1.0);
}
