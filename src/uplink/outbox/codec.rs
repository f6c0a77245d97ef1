//! A compact, exact encoding of one device's samples for the outbox.
//!
//! A day offline at 20 devices and 1 Hz is about 1.7 million messages; as JSON
//! that is over a gigabyte, past the default 256 MiB cap. This encoding keeps a
//! typical sample at 4 to 6 bytes: one head byte (value kind in 3 bits, property in
//! 5), the time as a varint delta from the previous sample, and the value as a
//! varint integer, a varint decimal mantissa with 1 to 6 digits, or the raw f64.
//! Decoding gives back the exact f64 bits that were encoded (a decimal is only used
//! when it converts back to the same value).
//!
//! Pure: no I/O. It must stay backward compatible once released, since rows
//! written by one version are drained by the next.

use crate::model::{DeviceId, Property, Sample};

// Five bits of the head byte name the property.
const _: () = assert!(Property::COUNT <= 32);

const KIND_F64: u8 = 7;
/// Largest magnitude an f64 holds every integer up to.
const EXACT: f64 = 9_007_199_254_740_992.0;
const POW10: [f64; 7] = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6];

/// A first byte that names no property: the row's samples were stamped while
/// the wall clock was known not to be synchronised. (A row without it reads
/// as before; an older sitegate would take a row with it as corrupt.)
const CLOCK_UNSYNCHRONISED: u8 = 0x1f;
const _: () = assert!(Property::COUNT < CLOCK_UNSYNCHRONISED as usize);

/// Encodes samples (of one device) in order.
pub fn encode(samples: &[Sample]) -> Vec<u8> {
    encode_row(samples, false)
}

/// [`encode`], marked when the samples were stamped by a clock known not to be
/// synchronised.
pub fn encode_row(samples: &[Sample], clock_unsynchronised: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + samples.len() * 6);
    if clock_unsynchronised {
        out.push(CLOCK_UNSYNCHRONISED);
    }
    let mut prev_ts = 0i64;
    for s in samples {
        let (kind, mantissa) = classify(s.value);
        out.push((kind << 5) | s.property.index() as u8);
        put_varint(&mut out, zigzag(s.ts_ms.wrapping_sub(prev_ts)));
        prev_ts = s.ts_ms;
        match mantissa {
            Some(m) => put_varint(&mut out, zigzag(m)),
            None => out.extend_from_slice(&s.value.to_le_bytes()),
        }
    }
    out
}

/// Decodes what [`encode_row`] wrote: the samples and whether the row was
/// marked as stamped by an unsynchronised clock.
pub fn decode_row(device: DeviceId, bytes: &[u8]) -> Option<(Vec<Sample>, bool)> {
    match bytes.split_first() {
        Some((&CLOCK_UNSYNCHRONISED, rest)) => Some((decode(device, rest)?, true)),
        _ => Some((decode(device, bytes)?, false)),
    }
}

/// Decodes what [`encode`] wrote; `device` fills [`Sample::device`]. `None` when
/// the bytes are not a valid encoding (a corrupt row).
pub fn decode(device: DeviceId, mut bytes: &[u8]) -> Option<Vec<Sample>> {
    let mut samples = Vec::new();
    let mut ts = 0i64;
    while let Some((&head, rest)) = bytes.split_first() {
        bytes = rest;
        let property = *Property::ALL.get(usize::from(head & 0x1f))?;
        let kind = head >> 5;
        ts = ts.wrapping_add(unzigzag(take_varint(&mut bytes)?));
        let value = match kind {
            KIND_F64 => {
                let (raw, rest) = bytes.split_first_chunk::<8>()?;
                bytes = rest;
                f64::from_le_bytes(*raw)
            }
            digits => unzigzag(take_varint(&mut bytes)?) as f64 / POW10[usize::from(digits)],
        };
        samples.push(Sample {
            device,
            property,
            ts_ms: ts,
            value,
        });
    }
    Some(samples)
}

/// The shortest exact form of `v`: an integer, a decimal with 1 to 6 digits
/// (`kind` = digits), or none (raw f64).
fn classify(v: f64) -> (u8, Option<i64>) {
    for (digits, scale) in POW10.iter().enumerate() {
        let m = (v * scale).round();
        // `m` is integral and below 2^53, so `as i64` is exact.
        if m.abs() < EXACT && m / scale == v && (m != 0.0 || v.to_bits() == 0) {
            return (digits as u8, Some(m as i64));
        }
        if digits == 0 && v.fract() == 0.0 {
            break; // integral but too large (or -0.0): keep the raw bits
        }
    }
    (KIND_F64, None)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample(p: usize, ts_ms: i64, value: f64) -> Sample {
        Sample {
            device: DeviceId(3),
            property: Property::ALL[p],
            ts_ms,
            value,
        }
    }

    #[test]
    fn a_row_marks_an_unsynchronised_clock_with_one_byte() {
        let samples = [
            sample(0, 1_700_000_000_000, 5.5),
            sample(2, 1_700_000_001_000, -3.0),
        ];
        let plain = encode(&samples);
        let marked = encode_row(&samples, true);
        assert_eq!(marked.len(), plain.len() + 1);
        assert_eq!(
            decode_row(DeviceId(3), &plain),
            Some((samples.to_vec(), false))
        );
        assert_eq!(
            decode_row(DeviceId(3), &marked),
            Some((samples.to_vec(), true))
        );
        assert_eq!(decode_row(DeviceId(3), &[0x1f]), Some((vec![], true)));
    }

    fn roundtrip(samples: &[Sample]) -> Vec<u8> {
        let bytes = encode(samples);
        let back = decode(DeviceId(3), &bytes).expect("decodes");
        assert_eq!(back.len(), samples.len());
        for (a, b) in samples.iter().zip(&back) {
            assert_eq!((a.property, a.ts_ms), (b.property, b.ts_ms));
            assert_eq!(
                a.value.to_bits(),
                b.value.to_bits(),
                "{} vs {}",
                a.value,
                b.value
            );
        }
        bytes
    }

    #[test]
    fn typical_poll_is_small() {
        let ts = 1_719_474_475_595;
        let poll = [
            sample(0, ts, -4312.0),
            sample(2, ts, 65.5),
            sample(9, ts, 49.98),
            sample(10, ts, 230.4),
            sample(4, ts, 123_456_789.0),
        ];
        let bytes = roundtrip(&poll);
        assert!(bytes.len() <= 6 + 5 * 6, "{} bytes", bytes.len());
        assert_eq!(classify(65.5), (1, Some(655)));
        assert_eq!(classify(-4312.0), (0, Some(-4312)));
    }

    #[test]
    fn awkward_values_keep_their_bits() {
        let ts = 1000;
        roundtrip(&[
            sample(0, ts, -0.0),
            sample(1, ts, 0.1 + 0.2),
            sample(2, ts, f64::MAX),
            sample(3, ts, 1e300),
            sample(4, ts, f64::MIN_POSITIVE),
            sample(5, ts, 1e-7),
            sample(6, ts, f64::NAN),
            sample(7, ts - 5, f64::INFINITY),
            sample(8, i64::MIN, 1.0),
            sample(9, i64::MAX, 2.0),
        ]);
    }

    #[test]
    fn corrupt_rows_are_refused() {
        assert_eq!(decode(DeviceId(0), &[0x1e]), None); // no such property
        assert_eq!(decode(DeviceId(0), &[0x00, 0x80]), None); // truncated varint
        assert_eq!(decode(DeviceId(0), &[0xe0, 0x00, 1, 2]), None); // truncated f64
        assert_eq!(decode(DeviceId(0), &[]), Some(vec![]));
    }

    proptest! {
        #[test]
        fn any_samples_roundtrip(
            raw in proptest::collection::vec((0..Property::COUNT, any::<i64>(), any::<f64>()), 0..20),
            decimals in proptest::collection::vec((0..Property::COUNT, -1_000_000_000i64..1_000_000_000, 0u32..7), 0..20),
        ) {
            let mut samples: Vec<_> = raw.into_iter().map(|(p, ts, v)| sample(p, ts, v)).collect();
            samples.extend(decimals.into_iter().map(|(p, m, d)| sample(p, m, m as f64 / 10f64.powi(d as i32))));
            roundtrip(&samples);
        }
    }
}
