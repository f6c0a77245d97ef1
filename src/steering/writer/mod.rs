//! Device writers: how a [`Command`] becomes register writes on one device, per
//! protocol, and how the read-back is checked.
//!
//! Pure recipes: a writer says which registers to read first (scale factors,
//! references), which writes to make in which order, which registers to read
//! back afterwards and which words they must show. The actuator runs them
//! through the device's bus task. Nothing here does I/O.
//!
//! Layout: `controls` (which writer a device gets, from
//! [`crate::modbus::DeviceMap::controls`]), `sunspec` (models 123 and 124),
//! `der704` (model 704, for devices without 123/124), `profile` (an adapter over
//! the register-map profile recipes of [`crate::modbus::profile`]).

mod controls;
mod der704;
mod profile;
mod sunspec;

pub use controls::DeviceControls;
pub use der704::{Sunspec704Limit, Sunspec704Power};
pub use profile::{ProfileEss, ProfileLimit};
pub use sunspec::{Sunspec123, Sunspec124};

/// One write request: `values` from `addr` on (the profile recipes' type, so
/// their writes go into a plan as they are).
pub use crate::modbus::profile::RegisterWrite as RegWrite;

use super::decide::Command;
use crate::modbus::plan::{self, Span, Table};

/// The writes for one command, in order, and what the read-back must show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan {
    pub writes: Vec<RegWrite>,
    /// Holding registers read after the writes, in the same bus transaction.
    pub read_back: Vec<Span>,
    /// `(address, word)` pairs the read-back must hold.
    pub expect: Vec<(u16, u16)>,
}

impl WritePlan {
    /// A plan that reads back exactly the registers it writes and expects the
    /// last word written to each (adjacent registers are read together).
    pub fn echo(writes: Vec<RegWrite>) -> WritePlan {
        let mut expect: Vec<(u16, u16)> = Vec::new();
        for w in &writes {
            for (i, &word) in w.values.iter().enumerate() {
                let addr = w.addr.wrapping_add(i as u16);
                expect.retain(|&(a, _)| a != addr);
                expect.push((addr, word));
            }
        }
        let spans: Vec<Span> = writes
            .iter()
            .map(|w| Span::new(Table::Holding, w.addr, w.values.len() as u16))
            .collect();
        WritePlan {
            read_back: plan::plan(&spans, 0),
            writes,
            expect,
        }
    }
}

/// Why a command cannot be written to a device.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WriteError {
    #[error("the device has no {0}")]
    NoControl(&'static str),
    #[error("{what} is not available on the device ({detail})")]
    Missing { what: &'static str, detail: String },
    #[error("command {0:?} does not apply to this device")]
    WrongCommand(Command),
    #[error("{0}")]
    Encode(String),
}

/// Checks a read-back against a plan: `reads[i]` are the words read from
/// `plan.read_back[i]`. `Err` names the first register that differs.
pub fn verify(plan: &WritePlan, reads: &[Vec<u16>]) -> Result<(), String> {
    for &(addr, want) in &plan.expect {
        let got = plan
            .read_back
            .iter()
            .zip(reads)
            .find_map(|(span, words)| word_at(*span, words, addr));
        if got != Some(want) {
            return Err(format!(
                "read-back of register {addr} shows {} instead of {want}",
                got.map_or("nothing".to_string(), |g| g.to_string())
            ));
        }
    }
    Ok(())
}

/// The word at `addr` within a read of `span`.
pub(crate) fn word_at(span: Span, words: &[u16], addr: u16) -> Option<u16> {
    addr.checked_sub(span.addr)
        .filter(|i| *i < span.len)
        .and_then(|i| words.get(usize::from(i)))
        .copied()
}

#[cfg(test)]
mod tests;
