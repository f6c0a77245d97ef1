//! When a certificate expires: its `notAfter`, read from the DER (the
//! validity of the TBSCertificate, RFC 5280 4.1), so that a self-signed
//! certificate is renewed before it expires and a configured one is warned
//! about.
//!
//! Pure: reads bytes, walks the few DER elements on the way and nothing more.

/// One DER element at the start of `der`: its tag, its content, and what
/// follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT Version`.
const VERSION: u8 = 0xa0;

/// The certificate's `notAfter`, in seconds since the epoch; `None` when
/// `der` is not a certificate as RFC 5280 lays it out.
pub fn not_after(der: &[u8]) -> Option<i64> {
    let (tag, cert, _) = element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    let (tag, _, after) = element(rest)?;
    if tag == VERSION {
        rest = after;
    }
    // serialNumber, signature, issuer, then validity.
    for _ in 0..3 {
        let (_, _, after) = element(rest)?;
        rest = after;
    }
    let (tag, validity, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_, _, after_not_before) = element(validity)?;
    let (tag, time, _) = element(after_not_before)?;
    let text = std::str::from_utf8(time).ok()?;
    let full = match tag {
        // YYMMDDHHMMSSZ: 50..99 are 19xx (RFC 5280 4.1.2.5.1).
        UTC_TIME => {
            let yy: u32 = text.get(..2)?.parse().ok()?;
            let century = if yy >= 50 { "19" } else { "20" };
            format!("{century}{text}")
        }
        GENERALIZED_TIME => text.to_string(),
        _ => return None,
    };
    let digits = full.strip_suffix('Z')?;
    if digits.len() != 14 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &digits[..4],
        &digits[4..6],
        &digits[6..8],
        &digits[8..10],
        &digits[10..12],
        &digits[12..14]
    );
    let ts: jiff::Timestamp = iso.parse().ok()?;
    Some(ts.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expiry_of_a_made_certificate_is_read_back() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["a.local".to_string()]).expect("params");
        params.not_after = rcgen::date_time_ymd(2031, 7, 9);
        let cert = params.self_signed(&key).expect("cert");
        let expected: jiff::Timestamp = "2031-07-09T00:00:00Z".parse().expect("time");
        assert_eq!(not_after(cert.der()), Some(expected.as_second()));
        params.not_after = rcgen::date_time_ymd(2051, 1, 2);
        let cert = params.self_signed(&key).expect("cert");
        let expected: jiff::Timestamp = "2051-01-02T00:00:00Z".parse().expect("time");
        assert_eq!(not_after(cert.der()), Some(expected.as_second()));
        assert_eq!(not_after(b"\x30\x03\x02\x01"), None);
        assert_eq!(not_after(b""), None);
    }
}
