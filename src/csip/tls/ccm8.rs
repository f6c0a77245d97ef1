//! TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8 (RFC 7251) as a rustls cipher suite:
//! the one suite IEEE 2030.5 mandates, and the only one CSIP-AUS's test
//! servers offer (`docs/csip-aus.md`, "TLS"). rustls's ring provider has no
//! CCM, so the record cipher is RustCrypto's AES-128-CCM with an 8-byte tag;
//! the key exchange, the signatures, the hash and the PRF stay ring's, taken
//! from ring's ECDHE-ECDSA-AES128-GCM-SHA256 suite, which CCM_8 shares.
//!
//! The record layout is TLS 1.2's for AEAD suites, as for AES-GCM: a 4-byte
//! salt from the key block, an 8-byte explicit nonce sent before each record
//! (the key block's 8 bytes XORed with the sequence number, so it never
//! repeats under one key), the sequence number, type, version and length as
//! the additional data, and the 8-byte tag after the ciphertext.
//!
//! This file only encrypts and decrypts records; it chooses no suite and
//! opens no socket.

use std::sync::OnceLock;

use aes::Aes128;
use ccm::aead::generic_array::GenericArray;
use ccm::aead::{AeadInPlace, KeyInit};
use ccm::consts::{U12, U8};
use ccm::Ccm;
use rustls::crypto::cipher::{
    make_tls12_aad, AeadKey, InboundOpaqueMessage, InboundPlainMessage, Iv, KeyBlockShape,
    MessageDecrypter, MessageEncrypter, Nonce, OutboundOpaqueMessage, OutboundPlainMessage,
    PrefixedPayload, Tls12AeadAlgorithm, UnsupportedOperationError,
};
use rustls::crypto::{CipherSuiteCommon, KeyExchangeAlgorithm};
use rustls::{
    CipherSuite, ConnectionTrafficSecrets, Error, SupportedCipherSuite, Tls12CipherSuite,
};

type Aes128Ccm8 = Ccm<Aes128, U8, U12>;

const EXPLICIT_NONCE_LEN: usize = 8;
const TAG_LEN: usize = 8;
const OVERHEAD: usize = EXPLICIT_NONCE_LEN + TAG_LEN;
/// The largest plaintext a TLS record may carry.
const MAX_FRAGMENT_LEN: usize = 16_384;

/// The suite, for a rustls `CryptoProvider`'s list. `None` only if ring's
/// provider lost its ECDHE-ECDSA-AES128-GCM-SHA256 suite (the one whose hash,
/// PRF and signature schemes this suite takes).
pub fn suite() -> Option<SupportedCipherSuite> {
    static SUITE: OnceLock<Option<&'static Tls12CipherSuite>> = OnceLock::new();
    let suite = SUITE.get_or_init(|| {
        let SupportedCipherSuite::Tls12(gcm) =
            rustls::crypto::ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        else {
            return None;
        };
        // Made once per process and kept for its life: rustls takes suites
        // by `'static` reference.
        Some(Box::leak(Box::new(Tls12CipherSuite {
            common: CipherSuiteCommon {
                suite: CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8,
                hash_provider: gcm.common.hash_provider,
                // AES-CCM's bound is that of AES-GCM (RFC 9325 section 4.4).
                confidentiality_limit: gcm.common.confidentiality_limit,
            },
            prf_provider: gcm.prf_provider,
            kx: KeyExchangeAlgorithm::ECDHE,
            sign: gcm.sign,
            aead_alg: &AES_128_CCM_8,
        })))
    });
    suite.map(SupportedCipherSuite::Tls12)
}

static AES_128_CCM_8: Ccm8Algorithm = Ccm8Algorithm;

struct Ccm8Algorithm;

fn cipher(key: &AeadKey) -> Aes128Ccm8 {
    // The key block gives `enc_key_len` (16) bytes: AES-128's key size.
    Aes128Ccm8::new(GenericArray::from_slice(key.as_ref()))
}

impl Tls12AeadAlgorithm for Ccm8Algorithm {
    fn encrypter(
        &self,
        key: AeadKey,
        write_iv: &[u8],
        explicit: &[u8],
    ) -> Box<dyn MessageEncrypter> {
        let mut iv = [0u8; 12];
        iv[..4].copy_from_slice(write_iv);
        iv[4..].copy_from_slice(explicit);
        Box::new(Ccm8Encrypter {
            cipher: cipher(&key),
            iv: Iv::new(iv),
        })
    }

    fn decrypter(&self, key: AeadKey, write_iv: &[u8]) -> Box<dyn MessageDecrypter> {
        let mut salt = [0u8; 4];
        salt.copy_from_slice(write_iv);
        Box::new(Ccm8Decrypter {
            cipher: cipher(&key),
            salt,
        })
    }

    fn key_block_shape(&self) -> KeyBlockShape {
        KeyBlockShape {
            enc_key_len: 16,
            fixed_iv_len: 4,
            explicit_nonce_len: EXPLICIT_NONCE_LEN,
        }
    }

    fn extract_keys(
        &self,
        _key: AeadKey,
        _write_iv: &[u8],
        _explicit: &[u8],
    ) -> Result<ConnectionTrafficSecrets, UnsupportedOperationError> {
        // Kernel TLS has no CCM_8; the records stay in user space.
        Err(UnsupportedOperationError)
    }
}

struct Ccm8Encrypter {
    cipher: Aes128Ccm8,
    /// Salt and the key block's explicit part; XORed with the sequence
    /// number for each record's nonce.
    iv: Iv,
}

struct Ccm8Decrypter {
    cipher: Aes128Ccm8,
    salt: [u8; 4],
}

impl MessageEncrypter for Ccm8Encrypter {
    fn encrypt(
        &mut self,
        msg: OutboundPlainMessage<'_>,
        seq: u64,
    ) -> Result<OutboundOpaqueMessage, Error> {
        let mut payload =
            PrefixedPayload::with_capacity(self.encrypted_payload_len(msg.payload.len()));
        let nonce = Nonce::new(&self.iv, seq).0;
        let aad = make_tls12_aad(seq, msg.typ, msg.version, msg.payload.len());
        payload.extend_from_slice(&nonce[4..]);
        payload.extend_from_chunks(&msg.payload);
        let tag = self
            .cipher
            .encrypt_in_place_detached(
                GenericArray::from_slice(&nonce),
                &aad,
                &mut payload.as_mut()[EXPLICIT_NONCE_LEN..],
            )
            .map_err(|_| Error::EncryptError)?;
        payload.extend_from_slice(&tag);
        Ok(OutboundOpaqueMessage::new(msg.typ, msg.version, payload))
    }

    fn encrypted_payload_len(&self, payload_len: usize) -> usize {
        payload_len + OVERHEAD
    }
}

impl MessageDecrypter for Ccm8Decrypter {
    fn decrypt<'a>(
        &mut self,
        mut msg: InboundOpaqueMessage<'a>,
        seq: u64,
    ) -> Result<InboundPlainMessage<'a>, Error> {
        let len = msg.payload.len();
        if len < OVERHEAD {
            return Err(Error::DecryptError);
        }
        let plain_len = len - OVERHEAD;
        if plain_len > MAX_FRAGMENT_LEN {
            return Err(Error::PeerSentOversizedRecord);
        }
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&self.salt);
        nonce[4..].copy_from_slice(&msg.payload[..EXPLICIT_NONCE_LEN]);
        let aad = make_tls12_aad(seq, msg.typ, msg.version, plain_len);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&msg.payload[len - TAG_LEN..]);
        let payload = &mut msg.payload;
        self.cipher
            .decrypt_in_place_detached(
                GenericArray::from_slice(&nonce),
                &aad,
                &mut payload[EXPLICIT_NONCE_LEN..len - TAG_LEN],
                GenericArray::from_slice(&tag),
            )
            .map_err(|_| Error::DecryptError)?;
        // The plaintext sits after the explicit nonce: move it to the front.
        payload.copy_within(EXPLICIT_NONCE_LEN..len - TAG_LEN, 0);
        payload.truncate(plain_len);
        Ok(msg.into_plain_message())
    }
}

#[cfg(test)]
mod tests;
