//! Integers packed to the bits their spread needs, block by block: the
//! coding under a raw-sample chunk's times and values ([`codec`](super::codec)).
//!
//! A sequence is cut into blocks of at most [`BLOCK`] integers. Each block is
//! stored in one of two ways, whichever is shorter:
//!
//! - **levels**: its smallest value (as a step from the value before the
//!   block) and each value above it. Noise around a level costs the bits of
//!   its spread, half what steps between noisy values need.
//! - **steps**: its smallest step between neighbours (as a change from the
//!   smallest step of the last block stored this way) and each step above it.
//!   A counter or a clock costs the bits of how irregular its steps are: a
//!   steady one none.
//!
//! A block is one byte (the way, and the width in bits of what follows), a
//! zigzag varint (the reference), then its values at that width, least
//! significant bit first, padded to a whole byte. Arithmetic wraps, so every
//! `i64` sequence round-trips, however far apart its values.
//!
//! Pure: no SQLite. Decoders never panic on malformed input.

use super::codec::{put_varint, zigzag, Malformed, Reader};

/// Integers in one block at most.
pub const BLOCK: usize = 16;
/// The way bit of a block's first byte: set for steps.
const STEPS: u8 = 0x80;

/// What a sequence's next block is coded against: the value before it and
/// the last reference of a block coded by steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carry {
    pub prev: i64,
    pub step: i64,
}

impl Carry {
    pub fn new(prev: i64) -> Self {
        Self { prev, step: 0 }
    }
}

/// Bits needed for `n` (0 for 0).
fn width(n: u64) -> u32 {
    64 - n.leading_zeros()
}

fn varint_len(n: u64) -> usize {
    (width(n).max(1) as usize).div_ceil(7)
}

/// Appends one block of `xs` (1 to [`BLOCK`] values) and moves `carry` past it.
pub fn put_block(out: &mut Vec<u8>, xs: &[i64], carry: &mut Carry) {
    debug_assert!(!xs.is_empty() && xs.len() <= BLOCK);
    let Some(&last) = xs.last() else {
        return;
    };
    // Levels: above the smallest value.
    let lo = xs.iter().copied().min().unwrap_or(0);
    let level_ref = zigzag(lo.wrapping_sub(carry.prev));
    let level_w = width(
        xs.iter()
            .map(|&x| x.wrapping_sub(lo) as u64)
            .max()
            .unwrap_or(0),
    );
    // Steps: above the smallest step.
    let mut steps = [0i64; BLOCK];
    let mut before = carry.prev;
    for (s, &x) in steps.iter_mut().zip(xs) {
        *s = x.wrapping_sub(before);
        before = x;
    }
    let steps = &steps[..xs.len()];
    let step_lo = steps.iter().copied().min().unwrap_or(0);
    let step_ref = zigzag(step_lo.wrapping_sub(carry.step));
    let step_w = width(
        steps
            .iter()
            .map(|&s| s.wrapping_sub(step_lo) as u64)
            .max()
            .unwrap_or(0),
    );
    let cost = |reference: u64, w: u32| varint_len(reference) + (xs.len() * w as usize).div_ceil(8);
    let mut bits = Bits::new(out);
    if cost(step_ref, step_w) <= cost(level_ref, level_w) {
        bits.out.push(STEPS | step_w as u8);
        put_varint(bits.out, step_ref);
        for &s in steps {
            bits.put(s.wrapping_sub(step_lo) as u64, step_w);
        }
        carry.step = step_lo;
    } else {
        bits.out.push(level_w as u8);
        put_varint(bits.out, level_ref);
        for &x in xs {
            bits.put(x.wrapping_sub(lo) as u64, level_w);
        }
    }
    bits.finish();
    carry.prev = last;
}

/// Reads one block of `into.len()` values (1 to [`BLOCK`]) written by
/// [`put_block`] with the same `carry`.
pub fn read_block(
    r: &mut Reader<'_>,
    into: &mut [i64],
    carry: &mut Carry,
) -> Result<(), Malformed> {
    if into.is_empty() || into.len() > BLOCK {
        return Err(Malformed);
    }
    let head = r.byte()?;
    let w = u32::from(head & !STEPS);
    if w > 64 {
        return Err(Malformed);
    }
    let reference = r.signed()?;
    let mut bits = BitReader::new(r.take((into.len() * w as usize).div_ceil(8))?);
    if head & STEPS != 0 {
        let step_lo = carry.step.wrapping_add(reference);
        let mut x = carry.prev;
        for slot in into.iter_mut() {
            x = x.wrapping_add(step_lo).wrapping_add(bits.get(w) as i64);
            *slot = x;
        }
        carry.step = step_lo;
    } else {
        let lo = carry.prev.wrapping_add(reference);
        for slot in into.iter_mut() {
            *slot = lo.wrapping_add(bits.get(w) as i64);
        }
    }
    carry.prev = into[into.len() - 1];
    Ok(())
}

/// Appends values of up to 64 bits, least significant bit first.
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    acc: u128,
    n: u32,
}

impl<'a> Bits<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Self { out, acc: 0, n: 0 }
    }

    fn put(&mut self, v: u64, w: u32) {
        if w == 0 {
            return;
        }
        let v = if w == 64 { v } else { v & ((1u64 << w) - 1) };
        self.acc |= u128::from(v) << self.n;
        self.n += w;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// Pads the last byte.
    fn finish(self) {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
    }
}

/// Reads what [`Bits`] wrote, from bytes known to hold enough bits.
struct BitReader<'a> {
    bytes: &'a [u8],
    at: usize,
    acc: u128,
    n: u32,
}

impl<'a> BitReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            at: 0,
            acc: 0,
            n: 0,
        }
    }

    fn get(&mut self, w: u32) -> u64 {
        if w == 0 {
            return 0;
        }
        while self.n < w {
            // The caller took exactly the bytes the block's bits fill.
            let b = self.bytes.get(self.at).copied().unwrap_or(0);
            self.at += 1;
            self.acc |= u128::from(b) << self.n;
            self.n += 8;
        }
        let v = if w == 64 {
            self.acc as u64
        } else {
            (self.acc as u64) & ((1u64 << w) - 1)
        };
        self.acc >>= w;
        self.n -= w;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(xs: &[i64], start: i64) -> usize {
        let mut out = Vec::new();
        let mut carry = Carry::new(start);
        for block in xs.chunks(BLOCK) {
            put_block(&mut out, block, &mut carry);
        }
        let mut r = Reader::new(&out);
        let mut carry = Carry::new(start);
        let mut back = Vec::new();
        for block in xs.chunks(BLOCK) {
            let mut buf = [0i64; BLOCK];
            read_block(&mut r, &mut buf[..block.len()], &mut carry).expect("reads");
            back.extend_from_slice(&buf[..block.len()]);
        }
        assert_eq!(back, xs);
        assert!(r.take(1).is_err(), "every byte read");
        out.len()
    }

    #[test]
    fn extremes_round_trip() {
        round_trip(&[i64::MIN, i64::MAX, 0, -1, 1, i64::MIN, i64::MAX], 0);
        round_trip(&[i64::MAX; 20], i64::MIN);
        round_trip(&[0], 0);
        let wild: Vec<i64> = (0..100)
            .map(|i: i64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64))
            .collect();
        round_trip(&wild, 12345);
    }

    #[test]
    fn a_steady_clock_and_a_flat_value_cost_two_bytes_a_block() {
        let clock: Vec<i64> = (1..=160).map(|i| 1_000_000 + i * 1000).collect();
        // The first block says the step (1000: two varint bytes), the others
        // repeat it (one).
        assert_eq!(round_trip(&clock, 1_000_000), 3 + 9 * 2);
        assert_eq!(round_trip(&[42; 160], 0), 2 + 9 * 2);
    }

    #[test]
    fn noise_costs_the_bits_of_its_spread_and_a_counter_its_irregularity() {
        // Noise of spread 100 around a level: 7 bits a value, by levels.
        let noise: Vec<i64> = (0..160).map(|i| 5_000 + (i * 37) % 100).collect();
        let size = round_trip(&noise, 0);
        assert!(size <= 10 * (2 + 14) + 2, "{size}");
        // A counter that grows by 1 or 2: one bit a value, by steps.
        let mut total = 12_345_678;
        let counter: Vec<i64> = (0..160)
            .map(|i| {
                total += 1 + i % 2;
                total
            })
            .collect();
        let size = round_trip(&counter, 0);
        // The first block by levels (its start is far from 0: 4 bytes, 5
        // bits a value), then 1 + 1 + 2 bytes a block.
        assert_eq!(size, 15 + 9 * 4);
    }

    #[test]
    fn malformed_blocks_are_errors_not_panics() {
        let mut out = Vec::new();
        put_block(&mut out, &[1, 500, -3], &mut Carry::new(0));
        for cut in 0..out.len() {
            let mut buf = [0i64; 3];
            let mut r = Reader::new(&out[..cut]);
            assert!(read_block(&mut r, &mut buf, &mut Carry::new(0)).is_err());
        }
        let mut buf = [0i64; 2];
        assert!(read_block(&mut Reader::new(&[65, 0, 0]), &mut buf, &mut Carry::new(0)).is_err());
        assert!(read_block(&mut Reader::new(&[0, 0]), &mut [], &mut Carry::new(0)).is_err());
    }
}
