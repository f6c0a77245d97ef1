//! A device's registers as its last poll read them, kept for those who answer
//! for the device without asking it again (the Modbus server's mirror).
//!
//! Built by the device's bus task after each successful poll and published
//! through [`super::DeviceMaps`]; read by anyone, changed by nobody. Pure: it
//! reads no device and knows no clock but the instant it is given.

use std::collections::BTreeMap;

use super::sunspec::{ModelBlock, END_ID, MARKER};
use crate::register::plan::{Image, Table};

/// One run of consecutive registers of one table.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    table: Table,
    addr: u16,
    words: Vec<u16>,
}

/// The registers of one poll, as sorted runs that do not overlap.
#[derive(Debug, Clone)]
pub struct PollImage {
    /// When the poll ended (monotonic).
    pub taken: tokio::time::Instant,
    /// When the poll ended, Unix ms.
    pub ts_ms: i64,
    runs: Vec<Run>,
}

impl PollImage {
    /// The registers of `image` (where two blocks hold one register, the
    /// first one's word, as [`Image::get`] finds it), then those of
    /// `discovered` the poll does not read (the Common model's strings), and
    /// for a SunSpec device (`chain` not empty) the marker before the first
    /// Common model, each model's ID and `L`, and the end marker after the
    /// last model, so that a SunSpec client can walk the device's own map.
    pub fn build(
        image: &Image,
        discovered: &Image,
        chain: &[ModelBlock],
        taken: tokio::time::Instant,
        ts_ms: i64,
    ) -> Self {
        let mut words: BTreeMap<(Table, u16), u16> = BTreeMap::new();
        for (span, block) in image.blocks().chain(discovered.blocks()) {
            for (i, w) in block.iter().enumerate() {
                let Some(addr) = span.addr.checked_add(i as u16) else {
                    break;
                };
                words.entry((span.table, addr)).or_insert(*w);
            }
        }
        let mut heads: Vec<(u16, u16)> = Vec::new();
        if let Some(first) = chain.first().filter(|b| b.id == 1) {
            if let Some(at) = first.addr.checked_sub(2) {
                heads.extend([(at, MARKER[0]), (at + 1, MARKER[1])]);
            }
        }
        for b in chain {
            heads.extend([(b.addr, b.id), (b.addr.wrapping_add(1), b.len)]);
        }
        if let Some(last) = chain.last() {
            let end = u32::from(last.addr) + 2 + u32::from(last.len);
            if end < u32::from(u16::MAX) {
                heads.extend([(end as u16, END_ID), (end as u16 + 1, 0)]);
            }
        }
        for (addr, w) in heads {
            words.entry((Table::Holding, addr)).or_insert(w);
        }
        let mut runs: Vec<Run> = Vec::new();
        for ((table, addr), w) in words {
            match runs.last_mut() {
                Some(r)
                    if r.table == table
                        && u32::from(r.addr) + r.words.len() as u32 == u32::from(addr) =>
                {
                    r.words.push(w)
                }
                _ => runs.push(Run {
                    table,
                    addr,
                    words: vec![w],
                }),
            }
        }
        Self { taken, ts_ms, runs }
    }

    /// `len` registers from `addr`, when the poll holds every one of them.
    pub fn get(&self, table: Table, addr: u16, len: u16) -> Option<&[u16]> {
        let at = self
            .runs
            .partition_point(|r| (r.table, r.addr) <= (table, addr))
            .checked_sub(1)?;
        let run = &self.runs[at];
        if run.table != table {
            return None;
        }
        let from = usize::from(addr - run.addr);
        run.words.get(from..from + usize::from(len))
    }

    /// Registers held, over every table.
    pub fn len(&self) -> usize {
        self.runs.iter().map(|r| r.words.len()).sum()
    }

    /// True when the poll held no register.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register::plan::Span;

    #[test]
    fn reads_span_blocks_and_stop_at_holes() {
        let mut img = Image::new();
        img.insert(Span::new(Table::Holding, 10, 3), vec![1, 2, 3]);
        img.insert(Span::new(Table::Holding, 13, 2), vec![4, 5]);
        img.insert(Span::new(Table::Holding, 12, 1), vec![99]);
        img.insert(Span::new(Table::Input, 10, 1), vec![7]);
        let p = PollImage::build(&img, &Image::new(), &[], tokio::time::Instant::now(), 0);
        assert_eq!(p.get(Table::Holding, 10, 5), Some(&[1, 2, 3, 4, 5][..]));
        assert_eq!(p.get(Table::Holding, 11, 2), Some(&[2, 3][..]));
        assert_eq!(p.get(Table::Holding, 14, 2), None);
        assert_eq!(p.get(Table::Holding, 9, 1), None);
        assert_eq!(p.get(Table::Input, 10, 1), Some(&[7][..]));
        assert_eq!(p.get(Table::Input, 11, 1), None);
        assert_eq!(p.len(), 6);
    }

    #[test]
    fn a_sunspec_chain_gets_its_marker_headers_and_end() {
        let chain = [
            ModelBlock {
                id: 1,
                addr: 40002,
                len: 2,
            },
            ModelBlock {
                id: 103,
                addr: 40006,
                len: 1,
            },
        ];
        let mut img = Image::new();
        img.insert(Span::new(Table::Holding, 40004, 2), vec![11, 12]);
        img.insert(Span::new(Table::Holding, 40008, 1), vec![13]);
        let p = PollImage::build(&img, &Image::new(), &chain, tokio::time::Instant::now(), 0);
        assert_eq!(
            p.get(Table::Holding, 40000, 11),
            Some(&[0x5375, 0x6E53, 1, 2, 11, 12, 103, 1, 13, 0xFFFF, 0][..])
        );
    }
}
