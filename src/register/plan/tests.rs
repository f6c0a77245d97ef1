use proptest::prelude::*;

use super::*;

fn h(addr: u16, len: u16) -> Span {
    Span::new(Table::Holding, addr, len)
}

fn check(spans: &[Span], gap: u16, expected: &[Span]) {
    assert_eq!(plan(spans, gap), expected, "spans {spans:?} gap {gap}");
}

#[test]
fn adjacent_spans_join() {
    check(&[h(10, 2), h(12, 1), h(13, 4)], 0, &[h(10, 7)]);
}

#[test]
fn gaps_join_only_up_to_max_gap() {
    check(&[h(0, 1), h(5, 1)], 4, &[h(0, 6)]);
    check(&[h(0, 1), h(6, 1)], 4, &[h(0, 1), h(6, 1)]);
}

#[test]
fn never_past_125_registers() {
    check(&[h(0, 100), h(100, 30)], 0, &[h(0, 100), h(100, 30)]);
    check(&[h(0, 100), h(100, 25)], 0, &[h(0, 125)]);
}

#[test]
fn tables_do_not_mix() {
    let i = |a, l| Span::new(Table::Input, a, l);
    check(&[h(0, 2), i(2, 2)], 10, &[h(0, 2), i(2, 2)]);
}

#[test]
fn overlaps_and_duplicates_collapse() {
    check(&[h(0, 10), h(2, 3), h(0, 10)], 0, &[h(0, 10)]);
}

#[test]
fn long_spans_are_chunked() {
    check(&[h(0, 300)], 0, &[h(0, 125), h(125, 125), h(250, 50)]);
}

#[test]
fn image_finds_values_inside_blocks() {
    let mut img = Image::new();
    img.insert(h(100, 4), vec![1, 2, 3, 4]);
    assert_eq!(img.get(Table::Holding, 101, 2), Some(&[2, 3][..]));
    assert_eq!(img.get(Table::Holding, 103, 2), None);
    assert_eq!(img.get(Table::Input, 101, 1), None);
}

#[test]
fn an_extract_answers_for_its_spans_only_and_the_first_image_wins() {
    let mut img = Image::new();
    img.insert(h(100, 6), vec![1, 2, 3, 4, 5, 6]);
    let kept = img.extract(&[h(101, 1), h(104, 2), h(200, 1)]);
    assert_eq!(kept.get(Table::Holding, 101, 1), Some(&[2][..]));
    assert_eq!(kept.get(Table::Holding, 104, 2), Some(&[5, 6][..]));
    assert_eq!(kept.get(Table::Holding, 102, 1), None, "not extracted");
    assert_eq!(kept.get(Table::Holding, 200, 1), None, "never read");
    let mut layered = kept;
    let mut later = Image::new();
    later.insert(h(100, 6), vec![9; 6]);
    layered.append(later);
    assert_eq!(layered.get(Table::Holding, 101, 1), Some(&[2][..]));
    assert_eq!(layered.get(Table::Holding, 102, 1), Some(&[9][..]));
}

/// The fewest requests any valid plan can have, by dynamic programming over the
/// sorted, de-overlapped spans: best[i] = min over j of best[j] + 1 where spans
/// j..i fit in one request.
fn minimum(spans: &[Span], gap: u16) -> usize {
    let mut s: Vec<Span> = spans.to_vec();
    s.sort();
    let n = s.len();
    let mut best = vec![usize::MAX; n + 1];
    best[0] = 0;
    for i in 1..=n {
        for j in 0..i {
            let group = &s[j..i];
            let start = u32::from(group[0].addr);
            let end = group.iter().map(|x| x.end()).max().unwrap();
            let gaps_ok = group.windows(2).all(|w| {
                let reach = s[j..]
                    .iter()
                    .take_while(|x| x.addr <= w[0].addr)
                    .map(|x| x.end())
                    .max()
                    .unwrap();
                u32::from(w[1].addr) <= reach + u32::from(gap)
            });
            if end - start <= u32::from(MAX_READ) && gaps_ok && best[j] != usize::MAX {
                best[i] = best[i].min(best[j] + 1);
            }
        }
    }
    best[n]
}

proptest! {
    #[test]
    fn plan_is_minimal_and_covers_everything(
        raw in prop::collection::vec((0u16..600, 1u16..20), 1..40),
        gap in 0u16..10,
    ) {
        let spans: Vec<Span> = raw.iter().map(|&(a, l)| h(a, l)).collect();
        let p = plan(&spans, gap);
        for s in &spans {
            prop_assert!(p.iter().any(|r| r.addr <= s.addr && s.end() <= r.end()), "{s:?} not covered by {p:?}");
        }
        for r in &p {
            prop_assert!(r.len <= MAX_READ);
        }
        prop_assert_eq!(p.len(), minimum(&spans, gap));
    }
}

proptest! {
    /// SunSpec plans read through any gap (every register from the first
    /// model to the end marker exists): points of one or two registers over
    /// a map of a few hundred registers from 40000, any subset of them (a
    /// device's mix of measurement and control models, its static points
    /// left out), are read in the fewest requests of at most 125.
    #[test]
    fn plans_through_any_gap_are_minimal(
        raw in prop::collection::vec((0u16..400, 1u16..=2), 1..60),
    ) {
        let spans: Vec<Span> = raw.iter().map(|&(a, l)| h(40_000 + a, l)).collect();
        let p = plan(&spans, u16::MAX);
        for s in &spans {
            prop_assert!(p.iter().any(|r| r.addr <= s.addr && s.end() <= r.end()), "{s:?} not covered by {p:?}");
        }
        for r in &p {
            prop_assert!(r.len <= MAX_READ);
        }
        prop_assert_eq!(p.len(), minimum(&spans, u16::MAX));
    }
}

#[test]
fn an_inverters_measurements_and_limit_are_one_request_without_the_scale_factor() {
    // 103 at 40070 (A..St, with their scale factors) and 123's WMaxLimPct
    // and WMaxLim_Ena (40187, 40191): 119 registers. With WMaxLimPct_SF
    // (40205), 133: two requests.
    let mut spans: Vec<Span> = (40073..=40108).map(|a| h(a, 1)).collect();
    spans.extend([h(40187, 1), h(40191, 1)]);
    check(&spans, u16::MAX, &[h(40073, 119)]);
    spans.push(h(40205, 1));
    assert_eq!(plan(&spans, u16::MAX).len(), 2);
}

#[test]
fn refused_requests_split_down_to_nothing() {
    let needed = [h(0, 2), h(10, 1), h(11, 1), h(40, 3)];
    let coalesced = h(0, 43);
    let step1 = split_refused(coalesced, &needed);
    assert_eq!(step1, [h(0, 2), h(10, 2), h(40, 3)], "the gaps go first");
    assert_eq!(split_refused(h(10, 2), &needed), [h(10, 1), h(11, 1)]);
    assert_eq!(split_refused(h(10, 1), &needed), []);
    // A request that is itself needed but overlaps others still shrinks.
    assert_eq!(split_refused(h(0, 4), &[h(0, 4), h(1, 1)]), [h(1, 1)]);
}
