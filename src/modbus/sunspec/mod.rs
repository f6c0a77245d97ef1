//! SunSpec: discovery of the model chain, nameplate information, the map from
//! known models to the property vocabulary, and every model's "not
//! implemented" words (`unimplemented.rs`).
//!
//! Point offsets come from the `sunspec` crate's constants, which are generated
//! from the official model definitions; this module adds what the crate does not
//! carry: which raw values mean "not implemented" per point type, the mapping to
//! properties and signs, and reads coalesced across models.

mod discovery;
mod info;
pub mod layout;
mod map;
mod static_points;
pub mod unimplemented;

pub use discovery::{
    discover, find_base, kind_of, logical_devices, select, walk_chain, DiscoveryError, BASES,
};
pub use info::{rating_spans, ratings, read_info, read_info_with, Ratings};
pub use map::points_for;
pub use static_points::{model_at, static_spans};

/// One model block in a device's chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelBlock {
    pub id: u16,
    /// Address of the block's ID register.
    pub addr: u16,
    /// `L`: registers after the two header registers.
    pub len: u16,
}

impl ModelBlock {
    /// Absolute address of a point at data offset `offset`.
    pub const fn point(&self, offset: u16) -> u16 {
        self.addr + 2 + offset
    }

    /// The data offset of register `addr`, when it lies in this block's
    /// data (after its two header registers).
    pub fn data_offset(&self, addr: u16) -> Option<u16> {
        let off = addr.checked_sub(self.addr)?.checked_sub(2)?;
        (off < self.len).then_some(off)
    }

    /// True when register `addr` is this block's, its header included.
    pub fn covers(&self, addr: u16) -> bool {
        addr >= self.addr && u32::from(addr) < u32::from(self.addr) + 2 + u32::from(self.len)
    }

    /// True when the block holds `words` registers from data offset `offset`
    /// (devices may report a shorter `L` than the definition).
    pub const fn holds(&self, offset: u16, words: u16) -> bool {
        offset as u32 + words as u32 <= self.len as u32
    }
}

/// The "SunS" marker.
pub const MARKER: [u16; 2] = [0x5375, 0x6E53];
/// The end-of-chain model id.
pub const END_ID: u16 = 0xFFFF;
