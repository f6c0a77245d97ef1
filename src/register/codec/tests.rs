use super::*;

fn check(words: &[u16], ty: ValueType, order: WordOrder, absent: Absent, expected: Option<f64>) {
    assert_eq!(
        decode(words, ty, order, absent),
        expected,
        "{words:04x?} as {ty:?} {order:?} {absent:?}"
    );
}

use Absent::*;
use ValueType::*;
use WordOrder::*;

#[test]
fn integer_types_decode_with_sign() {
    check(&[0xFFFE], U16, HighFirst, Never, Some(65534.0));
    check(&[0xFFFE], I16, HighFirst, Never, Some(-2.0));
    check(&[0x0001, 0x0002], U32, HighFirst, Never, Some(65538.0));
    check(&[0xFFFF, 0xFFFE], I32, HighFirst, Never, Some(-2.0));
    check(
        &[0, 0, 0x0001, 0x0000],
        U64,
        HighFirst,
        Never,
        Some(65536.0),
    );
    check(
        &[0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF],
        I64,
        HighFirst,
        Never,
        Some(-1.0),
    );
}

#[test]
fn word_order_swaps_registers_not_bytes() {
    check(&[0x0002, 0x0001], U32, LowFirst, Never, Some(65538.0));
    check(
        &[0x1234, 0x5678],
        U32,
        HighFirst,
        Never,
        Some(f64::from(0x1234_5678u32)),
    );
    check(
        &[0x5678, 0x1234],
        U32,
        LowFirst,
        Never,
        Some(f64::from(0x1234_5678u32)),
    );
    // 1.5f32 = 0x3FC00000
    check(&[0x3FC0, 0x0000], F32, HighFirst, Never, Some(1.5));
    check(&[0x0000, 0x3FC0], F32, LowFirst, Never, Some(1.5));
    check(
        &[0x0004, 0x0003, 0x0002, 0x0001],
        U64,
        LowFirst,
        Never,
        Some(0x0001_0002_0003_0004u64 as f64),
    );
}

#[test]
fn sunspec_sentinels_are_absent() {
    check(&[0x8000], I16, HighFirst, SunspecNumber, None);
    check(&[0xFFFF], U16, HighFirst, SunspecNumber, None);
    check(&[0x8000, 0x0000], I32, HighFirst, SunspecNumber, None);
    check(&[0xFFFF, 0xFFFF], U32, HighFirst, SunspecNumber, None);
    check(&[0x7FC0, 0x0000], F32, HighFirst, SunspecNumber, None);
    check(&[0x0000, 0x0000], U32, HighFirst, SunspecAccumulator, None);
    // Outside SunSpec the same raw values are values.
    check(&[0x8000], I16, HighFirst, Never, Some(-32768.0));
    check(&[0x0000, 0x0000], U32, HighFirst, SunspecNumber, Some(0.0));
    // An accumulator's MAX is a value.
    check(
        &[0xFFFF, 0xFFFF],
        U32,
        HighFirst,
        SunspecAccumulator,
        Some(4_294_967_295.0),
    );
}

#[test]
fn several_raw_patterns_are_absent() {
    let temp = Absent::RawAny(Sentinels::new(&[0xFFFF, 0x7FFF]).unwrap());
    // GoodWe's battery temperature: -1 and 0x7FFF mean "no value".
    check(&[0xFFFF], I16, HighFirst, temp, None);
    check(&[0x7FFF], I16, HighFirst, temp, None);
    check(&[0xFFFE], I16, HighFirst, temp, Some(-2.0));
    check(&[0x00F5], I16, HighFirst, temp, Some(245.0));
    assert!(Sentinels::new(&[]).is_none());
    assert!(Sentinels::new(&[1, 2, 3, 4, 5]).is_none());
}

#[test]
fn short_input_is_absent() {
    check(&[0x0001], U32, HighFirst, Never, None);
    check(&[], U16, HighFirst, Never, None);
}

#[test]
fn scale_factors() {
    assert_eq!(decode_sf(0xFFFF), Some(-1));
    assert_eq!(decode_sf(2), Some(2));
    assert_eq!(decode_sf(0x8000), None);
    assert_eq!(decode_sf(11), None);
    assert_eq!(apply_sf(2450.0, -1), 245.0);
    assert_eq!(apply_sf(5001.0, -2), 50.01);
    assert_eq!(apply_sf(12.0, 3), 12_000.0);
    assert_eq!(unapply_sf(50.01, -2), 5001.0);
}

#[test]
fn encode_round_trips() {
    for (v, ty) in [
        (-2.0, I16),
        (65535.0, U16),
        (-70000.0, I32),
        (4e9, U32),
        (1.5, F32),
        (-5e15, I64),
        (9e15, U64),
    ] {
        for order in [HighFirst, LowFirst] {
            let words = encode(v, ty, order).unwrap();
            assert_eq!(words.len(), ty.words() as usize);
            assert_eq!(
                decode(&words, ty, order, Never),
                Some(v),
                "{v} {ty:?} {order:?}"
            );
        }
    }
    // -50.00 % at SF -2 is 0xEC78 as two's complement.
    assert_eq!(encode(-5000.0, I16, HighFirst).unwrap(), vec![0xEC78]);
}

#[test]
fn encode_refuses_what_does_not_fit() {
    assert!(encode(65536.0, U16, HighFirst).is_err());
    assert!(encode(-1.0, U16, HighFirst).is_err());
    assert!(encode(40000.0, I16, HighFirst).is_err());
    assert!(encode(f64::NAN, I16, HighFirst).is_err());
}

#[test]
fn strings() {
    let w = encode_string("SunS", 2);
    assert_eq!(w, vec![0x5375, 0x6E53]);
    assert_eq!(
        decode_string(&encode_string("Fronius", 16)),
        Some("Fronius".to_string())
    );
    assert_eq!(decode_string(&[0, 0, 0]), None);
}
