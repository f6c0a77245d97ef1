//! The self-signed certificate of `tls = "self-signed"`: made at first start
//! (ECDSA P-256) with the host name, the controller's addresses and the
//! configured names, kept in the state directory, and issued again (same key)
//! when it comes within [`RENEW_BEFORE_DAYS`] of expiring or its names
//! change. The key is kept: a pin of the public key (`curl --pinnedpubkey`)
//! survives a renewal, while the certificate's fingerprint changes with it.
//!
//! Reads and writes only its three files in the given directory (and reads
//! the host name and the interfaces' addresses from `/proc` in [`wanted`]).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use super::pem::{self, Pair};

/// The certificate, PEM.
pub const CERT_FILE: &str = "https-self-signed.crt";
/// Its private key, PEM (PKCS#8), mode 0600.
pub const KEY_FILE: &str = "https-self-signed.key";
/// The names and addresses it was issued for, one a line.
pub const NAMES_FILE: &str = "https-self-signed.names";

/// How long a certificate is issued for.
pub const VALID_DAYS: i64 = 397;
/// Issued again when it expires within this many days.
pub const RENEW_BEFORE_DAYS: i64 = 30;

/// Why the certificate could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum SelfSignedError {
    #[error("{file}: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: not a usable private key: {why}")]
    Key { file: PathBuf, why: String },
    #[error("cannot make the certificate: {0}")]
    Make(String),
    #[error("{0}")]
    Pair(#[from] pem::PairError),
}

/// What a certificate is issued for: DNS names and IP addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub names: Vec<String>,
    pub addrs: Vec<IpAddr>,
}

impl Wanted {
    /// One subject alternative name a line, names first.
    fn lines(&self) -> String {
        let mut text = String::new();
        for n in &self.names {
            text.push_str(n);
            text.push('\n');
        }
        for a in &self.addrs {
            text.push_str(&a.to_string());
            text.push('\n');
        }
        text
    }
}

/// The host name, `localhost`, `configured`, the addresses of the machine's
/// interfaces and of the HTTPS listeners (the unspecified address aside).
pub fn wanted(configured: &[String], listen: &[SocketAddr]) -> Wanted {
    let mut names = Vec::new();
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim().to_ascii_lowercase();
        if !host.is_empty() && host != "localhost" {
            names.push(host);
        }
    }
    names.push("localhost".to_string());
    for n in configured {
        let n = n.to_ascii_lowercase();
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut addrs: Vec<IpAddr> = interface_addrs();
    addrs.extend(listen.iter().map(SocketAddr::ip));
    addrs.retain(|a| !a.is_unspecified());
    addrs.sort();
    addrs.dedup();
    Wanted { names, addrs }
}

/// The addresses of the machine's interfaces (IPv6 link-local aside: no
/// client names a controller by one in a URL), as the kernel lists them in
/// `/proc/net`: read the same way inside the service's sandbox (which allows
/// no netlink socket) and outside it, so `sitegate tls fingerprint` and the
/// agent agree on the names.
pub fn interface_addrs() -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = std::fs::read_to_string("/proc/net/fib_trie")
        .map(|t| local_v4(&t).into_iter().map(IpAddr::V4).collect())
        .unwrap_or_default();
    if let Ok(t) = std::fs::read_to_string("/proc/net/if_inet6") {
        out.extend(
            v6(&t)
                .into_iter()
                .filter(|ip| ip.segments()[0] & 0xffc0 != 0xfe80)
                .map(IpAddr::V6),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// The local IPv4 addresses in `/proc/net/fib_trie`: each `|-- a.b.c.d` leaf
/// followed by `/32 host LOCAL`.
fn local_v4(fib_trie: &str) -> Vec<std::net::Ipv4Addr> {
    let mut out = Vec::new();
    let mut leaf = None;
    for line in fib_trie.lines().map(str::trim) {
        if let Some(addr) = line.strip_prefix("|-- ") {
            leaf = addr.parse().ok();
        } else if line.starts_with("/32 host LOCAL") {
            if let Some(a) = leaf.take() {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// The IPv6 addresses in `/proc/net/if_inet6` (32 hex digits first on each
/// line).
fn v6(if_inet6: &str) -> Vec<std::net::Ipv6Addr> {
    if_inet6
        .lines()
        .filter_map(|l| {
            let hex = l.split_whitespace().next()?;
            let n = u128::from_str_radix(hex, 16).ok()?;
            (hex.len() == 32).then(|| std::net::Ipv6Addr::from(n))
        })
        .collect()
}

/// Why a certificate was issued now, or `None` when the kept one serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issued {
    Kept,
    New(&'static str),
}

/// Whether the kept certificate must be issued again: pure.
pub fn renew_why(
    expires_s: Option<i64>,
    kept_names: Option<&str>,
    wanted: &Wanted,
    now_s: i64,
) -> Option<&'static str> {
    match expires_s {
        None => Some("none yet, or unreadable"),
        Some(t) if t - now_s < RENEW_BEFORE_DAYS * 86_400 => Some("it expires within 30 days"),
        Some(_) if kept_names != Some(wanted.lines().as_str()) => Some("its names changed"),
        Some(_) => None,
    }
}

/// The certificate in `dir`, made or issued again when due; what happened.
/// `dir` is made first when missing (a state directory before the agent's
/// first start).
pub fn ensure(dir: &Path, wanted: &Wanted, now_s: i64) -> Result<(Pair, Issued), SelfSignedError> {
    std::fs::create_dir_all(dir).map_err(|source| SelfSignedError::Io {
        file: dir.to_path_buf(),
        source,
    })?;
    let key_path = dir.join(KEY_FILE);
    let cert_path = dir.join(CERT_FILE);
    let names_path = dir.join(NAMES_FILE);
    let key = match std::fs::read_to_string(&key_path) {
        Ok(text) => rcgen::KeyPair::from_pem(&text).map_err(|e| SelfSignedError::Key {
            file: key_path.clone(),
            why: e.to_string(),
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                .map_err(|e| SelfSignedError::Make(e.to_string()))?;
            write(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
            key
        }
        Err(source) => {
            return Err(SelfSignedError::Io {
                file: key_path,
                source,
            })
        }
    };
    let key_pem = key.serialize_pem();
    let kept = std::fs::read(&cert_path).ok().and_then(|cert| {
        let pair = pem::from_pem(&cert, key_pem.as_bytes(), "", "").ok()?;
        let expires = pair
            .key
            .end_entity_cert()
            .ok()
            .and_then(|c| super::validity::not_after(c.as_ref()))?;
        Some((pair, expires))
    });
    let kept_names = std::fs::read_to_string(&names_path).ok();
    let why = renew_why(
        kept.as_ref().map(|(_, t)| *t),
        kept_names.as_deref(),
        wanted,
        now_s,
    );
    match (kept, why) {
        (Some((pair, _)), None) => Ok((pair, Issued::Kept)),
        (_, why) => {
            let cert = issue(&key, wanted, now_s)?;
            write(&cert_path, cert.as_bytes(), 0o644)?;
            write(&names_path, wanted.lines().as_bytes(), 0o644)?;
            let pair = pem::from_pem(
                cert.as_bytes(),
                key_pem.as_bytes(),
                &cert_path.display().to_string(),
                &key_path.display().to_string(),
            )?;
            Ok((pair, Issued::New(why.unwrap_or("none yet, or unreadable"))))
        }
    }
}

/// A certificate for `wanted` signed by `key`, valid from a day ago for
/// [`VALID_DAYS`]; PEM.
fn issue(key: &rcgen::KeyPair, wanted: &Wanted, now_s: i64) -> Result<String, SelfSignedError> {
    let make = |e: rcgen::Error| SelfSignedError::Make(e.to_string());
    let sans: Vec<String> = wanted
        .names
        .iter()
        .cloned()
        .chain(wanted.addrs.iter().map(ToString::to_string))
        .collect();
    let mut params = rcgen::CertificateParams::new(sans).map_err(make)?;
    let host = wanted.names.first().cloned().unwrap_or_default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("sitegate {host}"));
    let (y, m, d) = date(now_s - 86_400)?;
    params.not_before = rcgen::date_time_ymd(y, m, d);
    let (y, m, d) = date(now_s + VALID_DAYS * 86_400)?;
    params.not_after = rcgen::date_time_ymd(y, m, d);
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.self_signed(key).map_err(make)?;
    Ok(cert.pem())
}

/// The UTC date of `s` seconds since the epoch.
fn date(s: i64) -> Result<(i32, u8, u8), SelfSignedError> {
    let ts = jiff::Timestamp::from_second(s).map_err(|e| SelfSignedError::Make(e.to_string()))?;
    let d = ts.to_zoned(jiff::tz::TimeZone::UTC).date();
    let month = u8::try_from(d.month()).unwrap_or(1);
    let day = u8::try_from(d.day()).unwrap_or(1);
    Ok((i32::from(d.year()), month, day))
}

/// Writes `bytes` to `path` through a new file renamed into place.
pub(crate) fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), SelfSignedError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| SelfSignedError::Io {
        file: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted() -> Wanted {
        Wanted {
            names: vec!["ctrl".into(), "localhost".into()],
            addrs: vec!["192.0.2.7".parse().expect("ip")],
        }
    }

    #[test]
    fn interface_addresses_are_read_from_proc() {
        let fib = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n           |-- 127.0.0.1\n              /32 host LOCAL\n           |-- 192.0.2.0\n              /24 link UNICAST\n           |-- 192.0.2.2\n              /32 host LOCAL\n        |-- 192.0.2.255\n           /32 link BROADCAST\nLocal:\n           |-- 192.0.2.2\n              /32 host LOCAL\n";
        let v4: Vec<String> = local_v4(fib).iter().map(ToString::to_string).collect();
        assert_eq!(v4, ["127.0.0.1", "192.0.2.2"]);
        let inet6 = "fd000000000000000000000000000002 04 40 00 82     eth0\nfe8000000000000000fc00fffe000001 04 40 20 80     eth0\n00000000000000000000000000000001 01 80 10 80       lo\n";
        let v6: Vec<String> = v6(inet6).iter().map(ToString::to_string).collect();
        assert_eq!(v6, ["fd00::2", "fe80::fc:ff:fe00:1", "::1"]);
    }

    #[test]
    fn a_missing_state_directory_is_made_first() {
        let dir = tempfile::tempdir().expect("dir");
        let state = dir.path().join("not").join("yet");
        let (pair, how) = ensure(&state, &wanted(), 1_800_000_000).expect("made");
        assert_eq!(how, Issued::New("none yet, or unreadable"));
        assert!(!pair.fingerprint.is_empty());
        assert!(state.join(KEY_FILE).exists());
    }

    #[test]
    fn made_once_kept_then_issued_again_with_the_same_key() {
        let dir = tempfile::tempdir().expect("dir");
        let now = 1_800_000_000;
        let (first, how) = ensure(dir.path(), &wanted(), now).expect("made");
        assert_eq!(how, Issued::New("none yet, or unreadable"));
        let (again, how) = ensure(dir.path(), &wanted(), now + 86_400).expect("kept");
        assert_eq!(how, Issued::Kept);
        assert_eq!(again.fingerprint, first.fingerprint);
        // Within 30 days of expiry: issued again, same key (same pin).
        let late = now + (VALID_DAYS - 10) * 86_400;
        let (renewed, how) = ensure(dir.path(), &wanted(), late).expect("renewed");
        assert_eq!(how, Issued::New("it expires within 30 days"));
        assert_ne!(renewed.fingerprint, first.fingerprint);
        assert_eq!(renewed.pin, first.pin);
        let mut more = wanted();
        more.names.push("site.example".into());
        let (_, how) = ensure(dir.path(), &more, late).expect("renamed");
        assert_eq!(how, Issued::New("its names changed"));
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .expect("key")
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
    }
}
