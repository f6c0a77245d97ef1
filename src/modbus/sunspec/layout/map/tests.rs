use super::*;
use sunspec::models::model1::Model1;
use sunspec::models::model123::Model123;

fn small() -> (RegisterMap, Block<Model123>) {
    let mut b = RegisterMap::sunspec(40000);
    let c = b.model::<Model1>();
    b.set_str(c, &Model1::MN, "sitegate");
    let m = b.model::<Model123>();
    b.set(m, &Model123::W_MAX_LIM_PCT, ValueType::U16, 10000.0);
    b.set(m, &Model123::W_MAX_LIM_PCT_SF, ValueType::I16, -2.0);
    (b.finish(), m)
}

#[test]
fn lays_out_marker_headers_and_end() {
    let (map, m) = small();
    assert_eq!(map.read(40000, 4), Ok(vec![0x5375, 0x6E53, 1, 66]));
    assert_eq!(m.header(), 40070);
    assert_eq!(map.read(40070, 2), Ok(vec![123, 24]));
    assert_eq!(map.read(40096, 2), Ok(vec![0xFFFF, 0]));
    assert_eq!(map.read(40004, 1), Ok(vec![u16::from_be_bytes(*b"si")]));
}

#[test]
fn reads_enforce_limits_and_range() {
    let (map, _) = small();
    assert_eq!(map.read(39999, 1), Err(ExceptionCode::IllegalDataAddress));
    assert_eq!(map.read(40097, 2), Err(ExceptionCode::IllegalDataAddress));
    assert_eq!(map.read(40000, 0), Err(ExceptionCode::IllegalDataValue));
    assert_eq!(map.read(40000, 126), Err(ExceptionCode::IllegalDataValue));
    assert!(map.read(40000, 98).is_ok());
}

#[test]
fn writes_only_writable_points() {
    let (mut map, m) = small();
    let pct = m.addr(&Model123::W_MAX_LIM_PCT);
    assert_eq!(map.write(pct, &[5000]), Ok(()));
    assert_eq!(map.get(m, &Model123::W_MAX_LIM_PCT, ValueType::U16), 5000.0);
    let sf = m.addr(&Model123::W_MAX_LIM_PCT_SF);
    assert_eq!(map.write(sf, &[0]), Err(ExceptionCode::IllegalDataAddress));
    assert_eq!(
        map.write(40000, &[0]),
        Err(ExceptionCode::IllegalDataAddress)
    );
    assert_eq!(
        map.write(pct, &[0; 124]),
        Err(ExceptionCode::IllegalDataValue)
    );
    assert_eq!(
        map.get_scaled(
            m,
            &Model123::W_MAX_LIM_PCT,
            ValueType::U16,
            &Model123::W_MAX_LIM_PCT_SF
        ),
        50.0
    );
}

#[test]
fn saturates_instead_of_writing_sentinels() {
    let (mut map, m) = small();
    map.set(m, &Model123::OUT_PF_SET, ValueType::I16, -40000.0);
    assert_eq!(map.get(m, &Model123::OUT_PF_SET, ValueType::I16), -32767.0);
    map.unimpl(m, &Model123::V_AR_PCT_SF);
    assert_eq!(map.peek(m.addr(&Model123::V_AR_PCT_SF), 1), vec![0x8000]);
}

#[test]
fn overlap_covers_header_and_data() {
    let (_, m) = small();
    assert!(m.overlaps(40070, 1));
    assert!(m.overlaps(40095, 1));
    assert!(!m.overlaps(40096, 1));
    assert!(!m.overlaps(40060, 10));
    assert!(m.overlaps(40060, 11));
}
