use sunspec::models::{
    model1::Model1, model101::Model101, model102::Model102, model103::Model103, model111::Model111,
    model112::Model112, model113::Model113, model120::Model120, model121::Model121,
    model123::Model123, model124::Model124, model201::Model201, model202::Model202,
    model203::Model203, model204::Model204, model211::Model211, model212::Model212,
    model213::Model213, model214::Model214, model701::Model701, model702::Model702,
    model704::Model704, model713::Model713, model802::Model802,
};
use sunspec::{Group, Point, Value};

use super::*;

fn block(id: u16, len: u16) -> ModelBlock {
    ModelBlock {
        id,
        addr: 40002,
        len,
    }
}

/// Nothing read.
fn none(_: u16) -> Option<u16> {
    None
}

fn at<G: Group, T: Value>(w: &[u16], p: &Point<G, T>) -> Vec<u16> {
    w[usize::from(p.offset)..usize::from(p.offset + p.length)].to_vec()
}

#[test]
fn every_layout_parses_and_the_table_is_sorted() {
    for (id, s) in table::LAYOUTS {
        assert!(parse(s).is_some(), "model {id}: {s}");
    }
    assert!(table::LAYOUTS.windows(2).all(|w| w[0].0 < w[1].0));
}

#[test]
fn each_model_the_agent_maps_is_as_long_as_the_crate_says() {
    let lens = [
        (1, Model1::LEN),
        (101, Model101::LEN),
        (102, Model102::LEN),
        (103, Model103::LEN),
        (111, Model111::LEN),
        (112, Model112::LEN),
        (113, Model113::LEN),
        (120, Model120::LEN),
        (121, Model121::LEN),
        (123, Model123::LEN),
        (124, Model124::LEN),
        (201, Model201::LEN),
        (202, Model202::LEN),
        (203, Model203::LEN),
        (204, Model204::LEN),
        (211, Model211::LEN),
        (212, Model212::LEN),
        (213, Model213::LEN),
        (214, Model214::LEN),
        (701, Model701::LEN),
        (702, Model702::LEN),
        (704, Model704::LEN),
        (713, Model713::LEN),
        (802, Model802::LEN),
    ];
    for (id, len) in lens {
        assert_eq!(
            words(&block(id, len), &none).len(),
            usize::from(len),
            "{id}"
        );
        // A longer block than the definition: its end cannot be told. (The
        // crate's length of 704 leaves out its four groups of two.)
        let full = if id == 704 { len + 8 } else { len };
        assert_eq!(
            words(&block(id, full + 4), &none).len(),
            usize::from(full),
            "{id}"
        );
    }
}

#[test]
fn each_type_gets_its_own_word() {
    let w = words(&block(103, 50), &none);
    assert_eq!(at(&w, &Model103::W), [0x8000], "int16");
    assert_eq!(at(&w, &Model103::W_SF), [0x8000], "sunssf");
    assert_eq!(at(&w, &Model103::A), [0xFFFF], "uint16");
    assert_eq!(at(&w, &Model103::WH), [0, 0], "acc32: 0");
    assert_eq!(at(&w, &Model103::ST), [0xFFFF], "enum16");
    assert_eq!(at(&w, &Model103::EVT1), [0xFFFF, 0xFFFF], "bitfield32");
    let w = words(&block(113, 60), &none);
    assert_eq!(at(&w, &Model113::W), [0x7FC0, 0], "float32: NaN");
    let w = words(&block(203, 105), &none);
    assert_eq!(at(&w, &Model203::TOT_WH_EXP), [0, 0], "acc32");
    let w = words(&block(123, 24), &none);
    assert_eq!(
        [
            at(&w, &Model123::OUT_PF_SET_SF),
            at(&w, &Model123::V_AR_PCT_SF)
        ],
        [[0x8000], [0x8000]]
    );
    let w = words(&block(704, Model704::LEN), &none);
    assert_eq!(at(&w, &Model704::W_MAX_LIM_PCT), [0xFFFF]);
    // The Common model: strings all NUL, DA 0xFFFF, the pad 0; a device
    // with the older L = 65 has no pad.
    let w = words(&block(1, 66), &none);
    assert_eq!(at(&w, &Model1::MN), [0; 16]);
    assert_eq!(&w[64..], [0xFFFF, 0]);
    assert_eq!(words(&block(1, 65), &none).len(), 65);
}

#[test]
fn a_repeating_group_is_counted_from_its_count_point_or_the_length() {
    // 160: 8 fixed registers (N at data offset 6), 20 a module.
    assert_eq!(count_offsets(160), [6]);
    let w = words(&block(160, 8 + 3 * 20), &none);
    assert_eq!(w.len(), 68);
    assert_eq!(w[6], 3, "N not read: the count the length holds");
    assert_eq!(&w[8..10], [0xFFFF, 0], "module 1: ID, IDStr");
    assert_eq!(&w[28..30], [0xFFFF, 0], "module 2");
    // N read: it lays the modules out (a fourth would be past L).
    let w = words(&block(160, 68), &|o| (o == 6).then_some(4));
    assert_eq!(w.len(), 68);
    // A legacy group (count 0): as often as the length holds.
    let w = words(&block(126, 10 + 2 * 54), &none);
    assert_eq!(w.len(), 118);
}

#[test]
fn nested_groups_need_their_inner_count_read() {
    // 705: NPt at 3, NCrv at 4; 13 fixed registers, a curve 10 + 2 a point.
    assert_eq!(count_offsets(705), [3, 4]);
    let len = 13 + 2 * (10 + 2 * 4);
    // Nothing read: the curves cannot be told, the fixed part can.
    let w = words(&block(705, len), &none);
    assert_eq!(w.len(), 13);
    assert_eq!(w[3..5], [0xFFFF, 0xFFFF]);
    // NPt read: NCrv told from the length.
    let w = words(&block(705, len), &|o| (o == 3).then_some(4));
    assert_eq!(w.len(), usize::from(len));
    assert_eq!(w[4], 2);
    // Both read.
    let w = words(&block(705, len), &|o| {
        [4, 2].get(usize::from(o) - 3).copied()
    });
    assert_eq!(w.len(), usize::from(len));
    // A count past the length stops at the length.
    let w = words(&block(705, len), &|o| (o >= 3).then_some(60000));
    assert_eq!(w.len(), usize::from(len));
}

#[test]
fn a_model_without_a_definition_has_no_words() {
    assert!(words(&block(65000, 10), &none).is_empty());
    assert!(count_offsets(65000).is_empty());
    assert!(count_offsets(103).is_empty());
}
