//! The body of a raw-sample chunk: the times and values of one series
//! ([`chunks`](super::chunks) stores it with its first time and count).
//!
//! A chunk written now ([`PACKED`], migration `0011`) says first how its
//! values are kept as integers, then holds times and values in blocks of
//! [`BLOCK`] samples, each packed to the bits its spread needs
//! ([`blocks`](super::blocks)):
//!
//! - values: when every one is a decimal with at most [`MAX_DECIMALS`]
//!   places, as the integers `m` of a common `k` (`value = m / 10^k`); else
//!   when every one is exactly a float32, as its bits in the floats' order;
//!   else as a float64's bits in that order. So a noisy float32 reading costs
//!   the bits its noise spans, not 8 bytes, and every value is exact.
//! - times: the steps between samples (a steady poll costs nothing but the
//!   block's two bytes; jitter its bits).
//!
//! Each block of samples is its times' block, then its values' block. A
//! device's properties share their poll's times: a chunk whose times are
//! those of another chunk of the same compaction ([`SHARED`]) names that
//! chunk's id instead and holds its values' blocks only (`chunks.rs` finds
//! the times). The formats of earlier sitegates ([`DECIMAL`], [`VALUES`]:
//! varints per sample) are still read. Pure: no SQLite; decoding never
//! panics on malformed input.

use super::blocks::{put_block, read_block, Carry, BLOCK};
#[cfg(test)]
use super::codec::put_value;
use super::codec::{
    as_f32, decimal, f32_from_ordered, f32_ordered, f64_from_ordered, f64_ordered, mantissa,
    Malformed, Reader, MAX_DECIMALS, POW10,
};
use super::codec::{put_varint, zigzag};

/// Chunk formats (first byte of a chunk body). An earlier sitegate wrote
/// [`DECIMAL`] (mantissa steps as varints) or [`VALUES`] (each value on its
/// own); the current one writes [`PACKED`].
const DECIMAL: u8 = 1;
const VALUES: u8 = 2;
const PACKED: u8 = 3;
const SHARED: u8 = 4;
/// How a [`PACKED`] chunk keeps its values (its second byte): `0..=6` are
/// decimals with that many places.
const KIND_F32: u8 = 7;
const KIND_F64: u8 = 8;

/// How a chunk's values become integers and back.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Decimal(u8),
    F32,
    F64,
}

impl Kind {
    /// The first kind that keeps every value exactly.
    fn of(samples: &[(i64, f64)]) -> Kind {
        let k = samples
            .iter()
            .try_fold(0u8, |k, &(_, v)| decimal(v).map(|(_, kv)| k.max(kv)));
        if let Some(k) = k {
            if samples.iter().all(|&(_, v)| mantissa(v, k).is_some()) {
                return Kind::Decimal(k);
            }
        }
        if samples.iter().all(|&(_, v)| as_f32(v).is_some()) {
            return Kind::F32;
        }
        Kind::F64
    }

    fn byte(self) -> u8 {
        match self {
            Kind::Decimal(k) => k,
            Kind::F32 => KIND_F32,
            Kind::F64 => KIND_F64,
        }
    }

    fn from_byte(b: u8) -> Result<Kind, Malformed> {
        match b {
            KIND_F32 => Ok(Kind::F32),
            KIND_F64 => Ok(Kind::F64),
            k if k <= MAX_DECIMALS => Ok(Kind::Decimal(k)),
            _ => Err(Malformed),
        }
    }

    fn to_int(self, v: f64) -> i64 {
        match self {
            // `Kind::of` checked that each value has one.
            Kind::Decimal(k) => mantissa(v, k).unwrap_or_default(),
            Kind::F32 => f32_ordered(v as f32),
            Kind::F64 => f64_ordered(v),
        }
    }

    fn to_value(self, n: i64) -> Result<f64, Malformed> {
        match self {
            Kind::Decimal(k) => Ok(n as f64 / POW10[usize::from(k)]),
            Kind::F32 => f32_from_ordered(n).map(f64::from),
            Kind::F64 => Ok(f64_from_ordered(n)),
        }
    }
}

/// Encodes the samples of one series, `ts` strictly ascending, into a chunk
/// body. The first timestamp is not in the body (the chunk row's `start`
/// column holds it); nor is the count (`n`).
pub fn encode_chunk(samples: &[(i64, f64)]) -> Vec<u8> {
    let kind = Kind::of(samples);
    let mut out = Vec::with_capacity(samples.len() * 2 + 8);
    out.extend_from_slice(&[PACKED, kind.byte()]);
    let start = samples.first().map_or(0, |s| s.0);
    let (mut times, mut values) = (Carry::new(start), Carry::new(0));
    let mut buf = [0i64; BLOCK];
    for (b, block) in samples.chunks(BLOCK).enumerate() {
        // The first sample's time is the chunk's start: not stored.
        let skip = usize::from(b == 0);
        let ts = &block[skip..];
        if !ts.is_empty() {
            for (x, s) in buf.iter_mut().zip(ts) {
                *x = s.0;
            }
            put_block(&mut out, &buf[..ts.len()], &mut times);
        }
        for (x, s) in buf.iter_mut().zip(block) {
            *x = kind.to_int(s.1);
        }
        put_block(&mut out, &buf[..block.len()], &mut values);
    }
    out
}

/// Encodes the values of one series whose times are exactly those of the
/// chunk `times_of` (a chunk with its own times).
pub fn encode_shared(times_of: i64, samples: &[(i64, f64)]) -> Vec<u8> {
    let kind = Kind::of(samples);
    let mut out = Vec::with_capacity(samples.len() + 12);
    out.extend_from_slice(&[SHARED, kind.byte()]);
    put_varint(&mut out, zigzag(times_of));
    let mut values = Carry::new(0);
    let mut buf = [0i64; BLOCK];
    for block in samples.chunks(BLOCK) {
        for (x, s) in buf.iter_mut().zip(block) {
            *x = kind.to_int(s.1);
        }
        put_block(&mut out, &buf[..block.len()], &mut values);
    }
    out
}

/// The id of the chunk whose times a chunk body uses, when not its own.
pub fn times_of(body: &[u8]) -> Result<Option<i64>, Malformed> {
    let mut r = Reader::new(body);
    if r.byte()? != SHARED {
        return Ok(None);
    }
    r.byte()?;
    Ok(Some(r.signed()?))
}

/// Calls `f(ts, value)` for each sample of a chunk whose times (`times`,
/// from the chunk [`times_of`] names) are not in its body.
pub fn decode_shared(
    times: &[i64],
    body: &[u8],
    mut f: impl FnMut(i64, f64),
) -> Result<(), Malformed> {
    let mut r = Reader::new(body);
    if r.byte()? != SHARED {
        return Err(Malformed);
    }
    let kind = Kind::from_byte(r.byte()?)?;
    r.signed()?;
    let mut values = Carry::new(0);
    let mut xs = [0i64; BLOCK];
    for ts in times.chunks(BLOCK) {
        read_block(&mut r, &mut xs[..ts.len()], &mut values)?;
        for (&t, &x) in ts.iter().zip(&xs) {
            f(t, kind.to_value(x)?);
        }
    }
    Ok(())
}

/// Calls `f(ts, value)` for each of the `n` samples of a chunk that starts at
/// `start`, in time order. A chunk that uses another's times ([`times_of`])
/// is an error here: [`decode_shared`] reads it.
pub fn decode_chunk(
    start: i64,
    n: usize,
    body: &[u8],
    mut f: impl FnMut(i64, f64),
) -> Result<(), Malformed> {
    let mut r = Reader::new(body);
    match r.byte()? {
        PACKED => decode_packed(start, n, r, f),
        DECIMAL => {
            let k = r.byte()?;
            if k > MAX_DECIMALS {
                return Err(Malformed);
            }
            let p = POW10[usize::from(k)];
            let mut m = 0i64;
            decode_varints(
                start,
                n,
                r,
                |r| {
                    m = m.wrapping_add(r.signed()?);
                    Ok(m as f64 / p)
                },
                &mut f,
            )
        }
        VALUES => decode_varints(start, n, r, |r| r.value(), &mut f),
        _ => Err(Malformed),
    }
}

fn decode_packed(
    start: i64,
    n: usize,
    mut r: Reader<'_>,
    mut f: impl FnMut(i64, f64),
) -> Result<(), Malformed> {
    let kind = Kind::from_byte(r.byte()?)?;
    let (mut times, mut values) = (Carry::new(start), Carry::new(0));
    let (mut ts, mut xs) = ([0i64; BLOCK], [0i64; BLOCK]);
    let mut at = 0;
    while at < n {
        let len = (n - at).min(BLOCK);
        let skip = usize::from(at == 0);
        ts[0] = start;
        if len > skip {
            read_block(&mut r, &mut ts[skip..len], &mut times)?;
        }
        read_block(&mut r, &mut xs[..len], &mut values)?;
        for i in 0..len {
            f(ts[i], kind.to_value(xs[i])?);
        }
        at += len;
    }
    Ok(())
}

/// The earlier formats: per sample the change of the time step (after the
/// first), then the value.
fn decode_varints(
    start: i64,
    n: usize,
    mut r: Reader<'_>,
    mut value: impl FnMut(&mut Reader<'_>) -> Result<f64, Malformed>,
    f: &mut impl FnMut(i64, f64),
) -> Result<(), Malformed> {
    let (mut ts, mut step) = (start, 0i64);
    for i in 0..n {
        if i > 0 {
            step = step.wrapping_add(r.signed()?);
            ts = ts.wrapping_add(step);
        }
        f(ts, value(&mut r)?);
    }
    Ok(())
}

/// A chunk as an earlier sitegate encoded it ([`DECIMAL`] or [`VALUES`]): for
/// the tests of reading old databases.
#[cfg(test)]
pub fn encode_chunk_before_packing(samples: &[(i64, f64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(samples.len() * 4 + 2);
    let k = samples
        .iter()
        .try_fold(0u8, |k, &(_, v)| decimal(v).map(|(_, kv)| k.max(kv)));
    let mantissas: Option<Vec<i64>> =
        k.and_then(|k| samples.iter().map(|&(_, v)| mantissa(v, k)).collect());
    match (k, &mantissas) {
        (Some(k), Some(_)) => out.extend_from_slice(&[DECIMAL, k]),
        _ => out.push(VALUES),
    }
    let (mut prev_ts, mut prev_step, mut prev_m) = (samples.first().map_or(0, |s| s.0), 0i64, 0i64);
    for (i, &(ts, v)) in samples.iter().enumerate() {
        if i > 0 {
            let step = ts - prev_ts;
            put_varint(&mut out, zigzag(step - prev_step));
            prev_step = step;
            prev_ts = ts;
        }
        match &mantissas {
            Some(ms) => {
                put_varint(&mut out, zigzag(ms[i].wrapping_sub(prev_m)));
                prev_m = ms[i];
            }
            None => put_value(&mut out, v),
        }
    }
    out
}

#[cfg(test)]
mod tests;
