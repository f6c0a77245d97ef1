//! A SunSpec device's register image: a map laid out from the `sunspec`
//! crate's point definitions, plus the Modbus rules for reading and writing
//! it (a simulated device's, or the Modbus server's site device's).
//!
//! Every point is placed through the crate's constants (offset, length, writable),
//! so the layout comes from the official model definitions; values are encoded
//! with `crate::register::codec`. Pure data: no I/O, no clock, no physics. It must
//! not know what a device does with its registers.

use std::marker::PhantomData;

use sunspec::{FixedSize, Group, Model, Point, Value};
use tokio_modbus::ExceptionCode;

use crate::register::codec::{self, Absent, ValueType, WordOrder};

/// Most registers one read may ask for (Modbus function 3 and 4).
pub const MAX_READ: u16 = 125;
/// Most registers one write may carry (Modbus function 16).
pub const MAX_WRITE: u16 = 123;

/// Where one model's data starts (the register after its ID and L header),
/// typed by the model so that only that model's points can be used with it.
pub struct Block<M> {
    data: u16,
    model: PhantomData<fn() -> M>,
}

// Manual impls: a derive would require `M: Clone`, which model structs need not be.
impl<M> Clone for Block<M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M> Copy for Block<M> {}

impl<M: Group> Block<M> {
    /// Absolute address of a point of this model.
    pub fn addr<T: Value>(self, point: &Point<M, T>) -> u16 {
        self.data + point.offset
    }

    /// Address of the model's ID register.
    pub fn header(self) -> u16 {
        self.data - 2
    }

    /// Whether a write of `count` registers at `addr` touches this model (header
    /// included).
    pub fn overlaps(self, addr: u16, count: u16) -> bool {
        let (lo, hi) = (
            u32::from(self.header()),
            u32::from(self.data) + u32::from(M::LEN),
        );
        let (a, b) = (u32::from(addr), u32::from(addr) + u32::from(count));
        a < hi && lo < b
    }
}

/// One model in the chain: its id and the address of its ID register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelEntry {
    pub id: u16,
    pub addr: u16,
    pub len: u16,
}

/// A contiguous register image starting at `base`.
#[derive(Debug, Clone)]
pub struct RegisterMap {
    base: u16,
    words: Vec<u16>,
    writable: Vec<bool>,
    /// Registers that some point definition has given a value (or a "not
    /// implemented" value); used by tests to prove every point is laid out.
    declared: Vec<bool>,
    models: Vec<ModelEntry>,
}

impl RegisterMap {
    /// A SunSpec map: the "SunS" marker at `base`, models appended with
    /// [`MapBuilder::model`], the end marker added by [`MapBuilder::finish`].
    pub fn sunspec(base: u16) -> MapBuilder {
        let mut map = RegisterMap {
            base,
            words: Vec::new(),
            writable: Vec::new(),
            declared: Vec::new(),
            models: Vec::new(),
        };
        map.push(&sunspec::SUNS_IDENTIFIER);
        MapBuilder { map }
    }

    /// A map with no registers (devices that keep their own, e.g. profiles).
    pub fn empty() -> RegisterMap {
        RegisterMap {
            base: 0,
            words: Vec::new(),
            writable: Vec::new(),
            declared: Vec::new(),
            models: Vec::new(),
        }
    }

    fn push(&mut self, words: &[u16]) {
        self.words.extend_from_slice(words);
        self.writable.extend(words.iter().map(|_| false));
        self.declared.extend(words.iter().map(|_| true));
    }

    /// The models in chain order.
    pub fn models(&self) -> &[ModelEntry] {
        &self.models
    }

    /// Index of `addr` in the image, if the whole range `addr..addr+count` is mapped.
    fn index(&self, addr: u16, count: u16) -> Option<usize> {
        let start = usize::from(addr).checked_sub(usize::from(self.base))?;
        (start + usize::from(count) <= self.words.len()).then_some(start)
    }

    /// Raw registers for inspection; addresses outside the map are left out.
    pub fn peek(&self, addr: u16, count: u16) -> Vec<u16> {
        let lo = usize::from(addr).saturating_sub(usize::from(self.base));
        let hi = (usize::from(addr) + usize::from(count)).saturating_sub(usize::from(self.base));
        self.words
            .get(lo.min(self.words.len())..hi.min(self.words.len()))
            .map(<[u16]>::to_vec)
            .unwrap_or_default()
    }

    /// A Modbus read (function 3 or 4).
    pub fn read(&self, addr: u16, count: u16) -> Result<Vec<u16>, ExceptionCode> {
        if count == 0 || count > MAX_READ {
            return Err(ExceptionCode::IllegalDataValue);
        }
        let i = self
            .index(addr, count)
            .ok_or(ExceptionCode::IllegalDataAddress)?;
        Ok(self.words[i..i + usize::from(count)].to_vec())
    }

    /// Checks a Modbus write (function 6 or 16) without applying it: the count is
    /// within limits and every register is mapped and writable.
    pub fn check_write(&self, addr: u16, count: u16) -> Result<(), ExceptionCode> {
        if count == 0 || count > MAX_WRITE {
            return Err(ExceptionCode::IllegalDataValue);
        }
        let i = self
            .index(addr, count)
            .ok_or(ExceptionCode::IllegalDataAddress)?;
        if self.writable[i..i + usize::from(count)].iter().all(|&w| w) {
            Ok(())
        } else {
            Err(ExceptionCode::IllegalDataAddress)
        }
    }

    /// Applies a write that [`RegisterMap::check_write`] accepted.
    pub fn write(&mut self, addr: u16, values: &[u16]) -> Result<(), ExceptionCode> {
        let count = u16::try_from(values.len()).map_err(|_| ExceptionCode::IllegalDataValue)?;
        self.check_write(addr, count)?;
        let i = usize::from(addr - self.base);
        self.words[i..i + values.len()].copy_from_slice(values);
        Ok(())
    }

    /// Overwrites registers as they are, writable or not: the map's owner
    /// filling in a block it laid out raw. `None` when a register is outside
    /// the map.
    pub fn poke(&mut self, addr: u16, words: &[u16]) -> Option<()> {
        let count = u16::try_from(words.len()).ok()?;
        let i = self.index(addr, count)?;
        self.words[i..i + words.len()].copy_from_slice(words);
        Some(())
    }

    /// Stores the words of one point and records its writability.
    pub fn set_words<M: Group, T: Value>(&mut self, b: Block<M>, p: &Point<M, T>, words: &[u16]) {
        debug_assert_eq!(words.len(), usize::from(p.length), "point length");
        let i = usize::from(b.addr(p) - self.base);
        let n = words.len().min(usize::from(p.length));
        self.words[i..i + n].copy_from_slice(&words[..n]);
        self.writable[i..i + n].fill(p.writable);
        self.declared[i..i + n].fill(true);
    }

    /// Stores a raw (unscaled) number, saturated to the type's range minus its
    /// "not implemented" value, so a measurement never reads as absent.
    pub fn set<M: Group, T: Value>(
        &mut self,
        b: Block<M>,
        p: &Point<M, T>,
        ty: ValueType,
        raw: f64,
    ) {
        if !raw.is_finite() {
            tracing::warn!(
                addr = b.addr(p),
                raw,
                "not a number; register left unchanged"
            );
            return;
        }
        let (lo, hi) = usable_range(ty);
        match codec::encode(raw.clamp(lo, hi), ty, WordOrder::HighFirst) {
            Ok(words) => self.set_words(b, p, &words),
            Err(e) => tracing::warn!(addr = b.addr(p), error = %e, "cannot encode"),
        }
    }

    /// Stores `value` scaled by the scale factor held in the register of `sf`.
    pub fn set_scaled<M: Group, T: Value, S: Value>(
        &mut self,
        b: Block<M>,
        p: &Point<M, T>,
        ty: ValueType,
        value: f64,
        sf: &Point<M, S>,
    ) {
        let raw = codec::unapply_sf(value, self.sf(b, sf));
        self.set(b, p, ty, raw);
    }

    /// Stores a string, NUL-padded to the point's length.
    pub fn set_str<M: Group, T: Value>(&mut self, b: Block<M>, p: &Point<M, T>, s: &str) {
        self.set_words(b, p, &codec::encode_string(s, usize::from(p.length)));
    }

    /// Marks an optional point "not implemented" with its type's sentinel.
    pub fn unimpl<M: Group, X: FixedSize>(&mut self, b: Block<M>, p: &Point<M, Option<X>>) {
        self.set_words(b, p, &Option::<X>::None.encode());
    }

    /// Marks an optional accumulator "not implemented": accumulators use 0, not the
    /// unsigned maximum the crate's plain integer type would suggest.
    pub fn unimpl_acc<M: Group, X: FixedSize>(&mut self, b: Block<M>, p: &Point<M, Option<X>>) {
        self.set_words(b, p, &vec![0; usize::from(p.length)]);
    }

    /// The raw number in a point's registers (no sentinel handling).
    pub fn get<M: Group, T: Value>(&self, b: Block<M>, p: &Point<M, T>, ty: ValueType) -> f64 {
        let i = usize::from(b.addr(p) - self.base);
        let words = self
            .words
            .get(i..i + usize::from(ty.words()))
            .unwrap_or(&[]);
        codec::decode(words, ty, WordOrder::HighFirst, Absent::Never).unwrap_or(0.0)
    }

    /// A point's value scaled by the scale factor in the register of `sf`.
    pub fn get_scaled<M: Group, T: Value, S: Value>(
        &self,
        b: Block<M>,
        p: &Point<M, T>,
        ty: ValueType,
        sf: &Point<M, S>,
    ) -> f64 {
        codec::apply_sf(self.get(b, p, ty), self.sf(b, sf))
    }

    /// The scale factor held in a `sunssf` point; 0 when not implemented.
    fn sf<M: Group, S: Value>(&self, b: Block<M>, sf: &Point<M, S>) -> i32 {
        let i = usize::from(b.addr(sf) - self.base);
        self.words
            .get(i)
            .and_then(|&w| codec::decode_sf(w))
            .unwrap_or(0)
    }

    /// Addresses inside model blocks that no point definition has laid out.
    #[cfg(test)]
    pub fn undeclared(&self) -> Vec<u16> {
        (0..self.words.len())
            .filter(|&i| !self.declared[i])
            .map(|i| self.base + i as u16)
            .collect()
    }
}

/// Raw range a type can hold without producing its SunSpec "not implemented" value.
fn usable_range(ty: ValueType) -> (f64, f64) {
    match ty {
        ValueType::U16 => (0.0, f64::from(u16::MAX - 1)),
        ValueType::I16 => (-f64::from(i16::MAX), f64::from(i16::MAX)),
        ValueType::U32 => (0.0, f64::from(u32::MAX - 1)),
        ValueType::I32 => (-f64::from(i32::MAX), f64::from(i32::MAX)),
        // 2^53: beyond it f64 no longer holds every integer.
        ValueType::U64 => (0.0, 9_007_199_254_740_992.0),
        ValueType::I64 => (-9_007_199_254_740_992.0, 9_007_199_254_740_992.0),
        ValueType::F32 => (f64::from(f32::MIN), f64::from(f32::MAX)),
    }
}

/// Lays out a SunSpec map model by model; dereferences to the map for setting
/// points while building.
pub struct MapBuilder {
    map: RegisterMap,
}

impl MapBuilder {
    /// Appends a model block (ID, L = the definition's length, data) and returns
    /// where its data starts. Registers start undeclared and zero.
    pub fn model<M: Model>(&mut self) -> Block<M> {
        let addr = self.map.base + self.map.words.len() as u16;
        self.map.push(&[M::ID, M::LEN]);
        let n = usize::from(M::LEN);
        let m = &mut self.map;
        m.words.resize(m.words.len() + n, 0);
        m.writable.resize(m.writable.len() + n, false);
        m.declared.resize(m.declared.len() + n, false);
        m.models.push(ModelEntry {
            id: M::ID,
            addr,
            len: M::LEN,
        });
        Block {
            data: addr + 2,
            model: PhantomData,
        }
    }

    /// Appends a block the agent has no definition for (a vendor model, or a
    /// model with repeating groups): ID, L and `len` zero registers, all declared.
    pub fn raw_model(&mut self, id: u16, len: u16) {
        let addr = self.map.base + self.map.words.len() as u16;
        self.map.push(&[id, len]);
        self.map.push(&vec![0; usize::from(len)]);
        self.map.models.push(ModelEntry { id, addr, len });
    }

    /// Declares the model's trailing `Pad` register (models 1 and 120 end with one;
    /// the crate generates no constant for pads). Value 0, read-only.
    pub fn pad_tail<M: Model>(&mut self, b: Block<M>) {
        let i = usize::from(b.data - self.map.base) + usize::from(M::LEN) - 1;
        self.map.words[i] = 0;
        self.map.declared[i] = true;
    }

    /// Appends the end marker (0xFFFF, L = 0).
    pub fn finish(mut self) -> RegisterMap {
        self.map.push(&[0xFFFF, 0x0000]);
        self.map
    }
}

impl std::ops::Deref for MapBuilder {
    type Target = RegisterMap;
    fn deref(&self) -> &RegisterMap {
        &self.map
    }
}

impl std::ops::DerefMut for MapBuilder {
    fn deref_mut(&mut self) -> &mut RegisterMap {
        &mut self.map
    }
}

#[cfg(test)]
mod tests;
