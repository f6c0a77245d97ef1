//! A device's identity in IEEE 2030.5 (section 6.3.4): the SHA-256 of its
//! certificate in DER, the long form (lFDI) its first 160 bits in upper-case
//! hex, the short form (sFDI) its first 36 bits in decimal followed by a
//! check digit. The Registration PIN carries the same kind of check digit.
//!
//! Pure: bytes in, identifiers out. Here in `config`, which reads the device
//! certificate as the client will (`csip_files.rs`); the client takes the
//! identity from there.

use sha2::{Digest, Sha256};

/// A device's identifiers, as the server lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// 40 upper-case hex digits.
    pub lfdi: String,
    /// At most 12 decimal digits, the last the check digit.
    pub sfdi: u64,
}

impl Identity {
    /// The identity of the certificate `der` (the device's own, not its CA's).
    pub fn of_certificate(der: &[u8]) -> Identity {
        let hash = Sha256::digest(der);
        let lfdi = hex::encode_upper(&hash[..20]);
        // The first 36 bits: 4.5 bytes.
        let first = u64::from_be_bytes([0, 0, 0, hash[0], hash[1], hash[2], hash[3], hash[4]]) >> 4;
        Identity {
            lfdi,
            sfdi: with_check_digit(first),
        }
    }
}

/// The sum of `n`'s decimal digits.
fn digit_sum(mut n: u64) -> u64 {
    let mut sum = 0;
    while n > 0 {
        sum += n % 10;
        n /= 10;
    }
    sum
}

/// `n` followed by the digit that makes the digit sum a multiple of 10.
pub fn with_check_digit(n: u64) -> u64 {
    n * 10 + (10 - digit_sum(n) % 10) % 10
}

/// Whether `n`'s last digit is its check digit.
pub fn check_digit_holds(n: u64) -> bool {
    digit_sum(n).is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sFDI of an lFDI, computed from its first nine hex digits.
    fn sfdi_of(lfdi: &str) -> u64 {
        with_check_digit(u64::from_str_radix(&lfdi[..9], 16).unwrap())
    }

    #[test]
    fn the_sfdi_is_the_first_36_bits_with_a_check_digit() {
        // Published pairs: envoy's test certificate, an Energy Queensland
        // style EndDevice, and 2030.5's own example lFDI.
        assert_eq!(
            sfdi_of("854D10A201CA99E5E90D3C3E1F9BC1C3BD075F3B"),
            357_827_241_281
        );
        assert_eq!(
            sfdi_of("4075DE6031E562ACF4D9EAA765A5B2ED00057269"),
            173_034_634_270
        );
        assert_eq!(
            sfdi_of("3E4F45AB31EDFE5B67E343E5E4562E31984E23E5"),
            167_261_211_391
        );
    }

    #[test]
    fn a_certificate_gives_the_hash_prefix_in_upper_case_and_its_sfdi() {
        let der = b"not really DER, but any bytes hash";
        let id = Identity::of_certificate(der);
        let hash = hex::encode_upper(Sha256::digest(der));
        assert_eq!(id.lfdi, hash[..40]);
        assert_eq!(id.sfdi, sfdi_of(&id.lfdi));
        assert!(check_digit_holds(id.sfdi));
    }

    #[test]
    fn the_pin_check_digit_is_the_same_rule() {
        // CACTUS registers PIN 11111 and serves it as 111115.
        assert_eq!(with_check_digit(11_111), 111_115);
        assert_eq!(with_check_digit(12_345), 123_455);
        assert!(check_digit_holds(111_115));
        assert!(!check_digit_holds(111_116));
        assert_eq!(with_check_digit(0), 0);
    }
}
