//! The certificate files of `[csip_aus]`, read and checked as the client
//! reads them: the CA chain that signs the server, the device certificate
//! (ECDSA P-256, as 2030.5 requires) with its chain, and its key, which must
//! match it. The device's lFDI and sFDI come from the same certificate, so
//! `check-config`, `sitegate csip id` and the client cannot disagree.
//!
//! Reads only the named files.

use super::csip::identity::Identity;
use super::csip::CsipConfig;
use super::problem::Problem;
use super::tls::{load_files, TlsFiles, TlsMaterial};

/// What the client connects with.
#[derive(Debug)]
pub struct CsipMaterial {
    pub tls: TlsMaterial,
    /// The identity of the device certificate (the first in `cert_file`).
    pub identity: Identity,
}

/// The DER of the OID prime256v1 (1.2.840.10045.3.1.7), as a certificate's
/// public key names its curve.
const P256_OID: [u8; 10] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];

/// Reads entry `index` of `count`'s files; every problem at once.
pub fn load(c: &CsipConfig, index: usize, count: usize) -> Result<CsipMaterial, Vec<Problem>> {
    let key = |k: &str| CsipConfig::key(index, count, k);
    let (ca_key, cert_key, key_key) = (key("ca_file"), key("cert_file"), key("key_file"));
    let tls = load_files(&TlsFiles {
        ca_key: &ca_key,
        ca_file: Some(&c.ca_file),
        cert_key: &cert_key,
        cert_file: Some(&c.cert_file),
        key_key: &key_key,
        key_file: Some(&c.key_file),
    })?;
    let Some((chain, _)) = &tls.client else {
        return Err(vec![Problem::new(cert_key, "no device certificate")]);
    };
    let Some(leaf) = chain.first() else {
        return Err(vec![Problem::new(cert_key, "no device certificate")]);
    };
    if !leaf.windows(P256_OID.len()).any(|w| w == P256_OID) {
        return Err(vec![Problem::new(
            cert_key,
            format!(
                "{}: the device certificate's key is not ECDSA P-256, which 2030.5 requires",
                c.cert_file.display()
            ),
        )]);
    }
    let identity = Identity::of_certificate(leaf);
    Ok(CsipMaterial { tls, identity })
}
