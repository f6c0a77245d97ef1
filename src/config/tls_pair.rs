//! The HTTPS certificate chain and its private key (`http.tls`), from PEM,
//! as rustls serves it: checked to match, with the SHA-256 fingerprint of the
//! certificate and the SHA-256 pin of its public key (what
//! `curl --pinnedpubkey` takes). `check-config` reports its errors under
//! `http.tls.cert_file` or `http.tls.key_file`; the agent's `https/` serves
//! what it reads.
//!
//! Parses bytes and reads the two files it is given; nothing else.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use sha2::Digest;

/// Which of the two files a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Cert,
    Key,
}

/// Why a pair cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("{file}: cannot read: {source}")]
    Read {
        part: Part,
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {why}")]
    Invalid {
        part: Part,
        file: String,
        why: String,
    },
}

impl PairError {
    /// The file the problem is about.
    pub fn part(&self) -> Part {
        match self {
            PairError::Read { part, .. } | PairError::Invalid { part, .. } => *part,
        }
    }
}

/// A pair ready to serve.
#[derive(Debug, Clone)]
pub struct Pair {
    pub key: Arc<CertifiedKey>,
    /// SHA-256 of the certificate, upper-case hex in colon-separated pairs.
    pub fingerprint: String,
    /// `sha256//` and the base64 SHA-256 of the public key.
    pub pin: Option<String>,
}

/// Reads and checks the pair in `cert_file` and `key_file`.
pub fn load_files(cert_file: &Path, key_file: &Path) -> Result<Pair, PairError> {
    let read = |part, file: &Path| {
        std::fs::read(file).map_err(|source| PairError::Read {
            part,
            file: file.display().to_string(),
            source,
        })
    };
    let cert = read(Part::Cert, cert_file)?;
    let key = read(Part::Key, key_file)?;
    from_pem(
        &cert,
        &key,
        &cert_file.display().to_string(),
        &key_file.display().to_string(),
    )
}

/// Checks the pair in PEM text; `cert_name` and `key_name` name them in errors.
pub fn from_pem(
    cert: &[u8],
    key: &[u8],
    cert_name: &str,
    key_name: &str,
) -> Result<Pair, PairError> {
    let invalid = |part, file: &str, why: String| PairError::Invalid {
        part,
        file: file.to_string(),
        why,
    };
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(Part::Cert, cert_name, format!("not valid PEM: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(
            Part::Cert,
            cert_name,
            "holds no CERTIFICATE section".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
        invalid(
            Part::Key,
            key_name,
            format!("holds no usable private key: {e}"),
        )
    })?;
    let provider = super::tls::provider();
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => invalid(
            Part::Key,
            key_name,
            format!("does not match the certificate in {cert_name}"),
        ),
        other => invalid(Part::Key, key_name, format!("cannot be used: {other}")),
    })?;
    Ok(pair(certified))
}

/// The pair with its fingerprint and pin.
pub fn pair(certified: CertifiedKey) -> Pair {
    let fingerprint = certified
        .end_entity_cert()
        .map(|c| fingerprint(c.as_ref()))
        .unwrap_or_default();
    let pin = certified.key.public_key().map(|spki| pin(spki.as_ref()));
    Pair {
        key: Arc::new(certified),
        fingerprint,
        pin,
    }
}

/// SHA-256 of `der`, upper-case hex in colon-separated pairs (as browsers
/// and `openssl x509 -fingerprint -sha256` show it).
pub fn fingerprint(der: &[u8]) -> String {
    let digest = sha2::Sha256::digest(der);
    digest
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A fingerprint as written by people: colons, spaces and case ignored;
/// `None` unless it is 32 bytes of hex.
pub fn normalise_fingerprint(text: &str) -> Option<String> {
    let hex: String = text
        .chars()
        .filter(|c| !matches!(c, ':' | ' '))
        .collect::<String>()
        .to_ascii_uppercase();
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(&hex, &mut bytes).ok()?;
    Some(fingerprint_of_digest(&bytes))
}

fn fingerprint_of_digest(digest: &[u8]) -> String {
    digest
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `sha256//` and the base64 SHA-256 of a SubjectPublicKeyInfo.
pub fn pin(spki: &[u8]) -> String {
    format!("sha256//{}", base64(&sha2::Sha256::digest(spki)))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_fingerprints_read_as_tools_write_them() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        let f = fingerprint(b"abc");
        assert!(f.starts_with("BA:78:16:BF:"), "{f}");
        assert_eq!(
            normalise_fingerprint(&f.to_lowercase().replace(':', "")),
            Some(f.clone())
        );
        assert_eq!(normalise_fingerprint("ab:cd"), None);
    }
}
