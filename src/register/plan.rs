//! Read planning: which Modbus requests fetch a set of register ranges with the
//! fewest round trips.
//!
//! Pure. A range is never split over two requests; neighbours are joined when
//! the unused registers between them are at most `max_gap` and the joined request
//! stays within the 125-register limit.

/// Holding (function 3) or input (function 4) registers, or discrete inputs
/// (function 2: one bit each, read as words of 0 or 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    #[default]
    Holding,
    Input,
    DiscreteInput,
}

impl Table {
    /// The name used in config files.
    pub const fn name(self) -> &'static str {
        match self {
            Table::Holding => "holding",
            Table::Input => "input",
            Table::DiscreteInput => "discrete_input",
        }
    }
}

/// Most registers one read request may ask for (Modbus application protocol).
pub const MAX_READ: u16 = 125;

/// Registers a poll needs: `len` registers from `addr` in `table`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub table: Table,
    pub addr: u16,
    pub len: u16,
}

impl Span {
    pub const fn new(table: Table, addr: u16, len: u16) -> Self {
        Self { table, addr, len }
    }

    /// One past the last register, widened so that ranges ending at 65535 work.
    pub const fn end(self) -> u32 {
        self.addr as u32 + self.len as u32
    }
}

/// One read request of a plan.
pub type Request = Span;

/// Greedy left-to-right join, which is optimal here: each request of the greedy
/// plan ends at or after the end of the same-numbered request of any valid plan,
/// so no valid plan needs fewer.
///
/// Spans longer than [`MAX_READ`] are read on their own in consecutive chunks.
pub fn plan(spans: &[Span], max_gap: u16) -> Vec<Request> {
    let mut sorted: Vec<Span> = spans.iter().copied().filter(|s| s.len > 0).collect();
    sorted.sort();
    let mut out: Vec<Request> = Vec::new();
    for s in sorted {
        if let Some(last) = out.last_mut() {
            let joined_end = last.end().max(s.end());
            let fits = s.table == last.table
                && u32::from(s.addr) <= last.end() + u32::from(max_gap)
                && joined_end - u32::from(last.addr) <= u32::from(MAX_READ);
            if fits {
                last.len = (joined_end - u32::from(last.addr)) as u16;
                continue;
            }
            // Fully covered by the previous request (overlapping spans).
            if s.table == last.table && s.end() <= last.end() {
                continue;
            }
        }
        let mut addr = s.addr;
        let mut left = s.len;
        while left > 0 {
            let n = left.min(MAX_READ);
            out.push(Span::new(s.table, addr, n));
            addr = addr.wrapping_add(n);
            left -= n;
        }
    }
    out
}

/// Registers read by a plan, for looking up values after a poll.
#[derive(Debug, Default, Clone)]
pub struct Image {
    blocks: Vec<(Span, Vec<u16>)>,
}

impl Image {
    pub fn new() -> Self {
        Self::default()
    }

    /// An image of one block: `words` of holding registers from `addr`.
    pub fn holding(addr: u16, words: &[u16]) -> Image {
        let len = u16::try_from(words.len()).unwrap_or(u16::MAX);
        Image {
            blocks: vec![(Span::new(Table::Holding, addr, len), words.to_vec())],
        }
    }

    pub fn insert(&mut self, request: Span, words: Vec<u16>) {
        self.blocks.push((request, words));
    }

    /// Moves the blocks of `later` behind this image's own: where both hold a
    /// register, this image's word is the one [`Image::get`] finds.
    pub fn append(&mut self, later: Image) {
        self.blocks.extend(later.blocks);
    }

    /// An image of exactly `spans`, each as this image holds it (a span it
    /// does not hold whole is left out), so that the result answers for
    /// those registers and no others.
    pub fn extract(&self, spans: &[Span]) -> Image {
        let blocks = spans
            .iter()
            .filter_map(|s| Some((*s, self.get(s.table, s.addr, s.len)?.to_vec())))
            .collect();
        Image { blocks }
    }

    /// The blocks in the order [`Image::get`] searches them: where two hold
    /// a register, the first one's word is the image's.
    pub fn blocks(&self) -> impl Iterator<Item = (Span, &[u16])> {
        self.blocks.iter().map(|(s, w)| (*s, w.as_slice()))
    }

    /// True when the image holds no register.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// `len` registers from `addr`, when one block holds them all.
    pub fn get(&self, table: Table, addr: u16, len: u16) -> Option<&[u16]> {
        let end = u32::from(addr) + u32::from(len);
        self.blocks.iter().find_map(|(span, words)| {
            let inside = span.table == table && span.addr <= addr && end <= span.end();
            inside
                .then(|| {
                    let from = usize::from(addr - span.addr);
                    words.get(from..from + usize::from(len))
                })
                .flatten()
        })
    }
}

#[cfg(test)]
mod tests;

/// The requests that replace `refused` after the device answered it with
/// "illegal data address": first the `needed` spans inside it without the gaps
/// it read through; if it had no gaps, each needed span on its own; a single
/// needed span that is refused is dropped (its points stay without values).
/// Every returned request is strictly smaller than `refused`, so repeated
/// refusals end.
pub fn split_refused(refused: Request, needed: &[Span]) -> Vec<Request> {
    let mut inside: Vec<Span> = needed
        .iter()
        .filter(|s| {
            s.len > 0
                && s.table == refused.table
                && s.addr >= refused.addr
                && s.end() <= refused.end()
        })
        .copied()
        .collect();
    let gapless = plan(&inside, 0);
    if gapless.as_slice() != [refused] {
        return gapless;
    }
    inside.sort();
    inside.dedup();
    inside.retain(|s| *s != refused);
    inside
}
