//! The node's SHIP identity: an ECDSA P-256 key made at first start and kept
//! in the state directory (`eebus-node.key`, mode 0600), and a self-signed
//! certificate issued from it at each start. The key is what the control
//! box trusts: its SKI stays the same across restarts and upgrades, as SHIP
//! §12.1.1 asks. Also what `sitegate eebus id` prints for pairing.
//!
//! Reads and writes only its key file.

use std::path::{Path, PathBuf};

use eebus::cert::{self, CertParams, Identity};
use eebus::ship::{ShipId, ShipQr};

use crate::config::EebusConfig;

/// The node's private key, PEM (PKCS#8).
pub const KEY_FILE: &str = "eebus-node.key";

/// Why the node has no identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{file}: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: not a usable P-256 key: {why}")]
    Key { file: PathBuf, why: String },
    #[error("cannot make the node's certificate: {0}")]
    Make(String),
}

/// `sitegate-<serial>`: sitegate has no IANA enterprise number of its own,
/// and a SHIP ID need only be unique.
pub fn ship_id(c: &EebusConfig) -> ShipId {
    let id = format!("sitegate-{}", c.serial);
    // A true invariant: the serial is checked with the config (1 to 32 of
    // A-Z, a-z, 0-9, '-', '_', '.'), so the ID is at most 41 such
    // characters, within SHIP's 63.
    id.parse().expect("a SHIP ID from a checked serial")
}

/// The node's identity from the key in `dir`, made there first if missing.
pub fn load_or_make(dir: &Path, c: &EebusConfig) -> Result<Identity, IdentityError> {
    let file = dir.join(KEY_FILE);
    let params = || CertParams::new(ship_id(c).as_str()).organization(c.brand.clone());
    match std::fs::read_to_string(&file) {
        Ok(pem) => {
            let key = cert::key_from_pem(&pem).map_err(|e| IdentityError::Key {
                file: file.clone(),
                why: e.to_string(),
            })?;
            cert::self_signed_with(params(), key).map_err(|e| IdentityError::Make(e.to_string()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|source| IdentityError::Io {
                file: dir.to_path_buf(),
                source,
            })?;
            let id = cert::self_signed(params()).map_err(|e| IdentityError::Make(e.to_string()))?;
            crate::https::self_signed::write(&file, id.key_pem().as_bytes(), 0o600).map_err(
                |e| IdentityError::Io {
                    file: file.clone(),
                    source: std::io::Error::other(e.to_string()),
                },
            )?;
            tracing::info!(file = %file.display(), ski = %id.ski.to_display_string(), "made the EEBus node's key");
            Ok(id)
        }
        Err(source) => Err(IdentityError::Io { file, source }),
    }
}

/// What an installer pairs the box with: the SHIP ID, the SKI in groups of
/// four, the certificate's fingerprint and the installation QR payload.
pub fn describe(c: &EebusConfig, id: &Identity) -> String {
    let ship = ship_id(c);
    let mut qr = ShipQr::new(id.ski, ship.clone());
    qr.certificate_fingerprint = Some(id.fingerprint());
    format!(
        "SHIP ID  {}\nSKI      {}\nFPH256   {}\nQR       {}\n",
        ship.as_str(),
        id.ski.to_display_string(),
        id.fingerprint(),
        qr.to_payload()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_made_once_and_the_ski_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let c = crate::eebus::tests::config();
        let first = load_or_make(dir.path(), &c).expect("made");
        let again = load_or_make(dir.path(), &c).expect("kept");
        assert_eq!(first.ski, again.ski);
        let text = describe(&c, &again);
        assert!(text.contains(&again.ski.to_display_string()), "{text}");
        assert!(text.contains("SHIP;"), "{text}");
        std::fs::write(dir.path().join(KEY_FILE), "not a key").expect("spoil");
        let e = load_or_make(dir.path(), &c).unwrap_err().to_string();
        assert!(
            e.contains("eebus-node.key") && e.contains("not a usable"),
            "{e}"
        );
    }
}
