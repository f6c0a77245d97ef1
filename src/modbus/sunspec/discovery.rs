//! Finding the SunSpec map and walking its model chain.

use super::{ModelBlock, END_ID, MARKER};
use crate::modbus::error::ModbusError;
use crate::modbus::reader::RegisterReader;
use crate::register::plan::{Span, Table};

/// Base addresses tried, in this order (SunSpec; pysunspec2 does the same).
pub const BASES: [u16; 3] = [40000, 0, 50000];

/// Longest chain we follow; real devices have a handful of models.
const MAX_MODELS: usize = 64;

#[derive(Debug, Clone, thiserror::Error)]
pub enum DiscoveryError {
    #[error("no SunSpec marker \"SunS\" at 40000, 0 or 50000")]
    NotSunspec,
    #[error("the SunSpec model chain is malformed: {0}")]
    BadChain(String),
    #[error(transparent)]
    Modbus(#[from] ModbusError),
}

/// The base address holding "SunS".
pub async fn find_base<R: RegisterReader>(r: &mut R) -> Result<u16, DiscoveryError> {
    for base in BASES {
        match r.read(Span::new(Table::Holding, base, 2)).await {
            Ok(words) if words == MARKER => return Ok(base),
            Ok(_) => continue,
            // An exception means "nothing here": try the next base. A broken
            // link means we cannot tell.
            Err(e) if e.breaks_link() => return Err(e.into()),
            Err(_) => continue,
        }
    }
    Err(DiscoveryError::NotSunspec)
}

/// Walks the chain from `base + 2` until the end model, skipping by each block's
/// own `L`. Unknown models are listed like known ones; mapping decides later.
pub async fn walk_chain<R: RegisterReader>(
    r: &mut R,
    base: u16,
) -> Result<Vec<ModelBlock>, DiscoveryError> {
    let mut blocks = Vec::new();
    let mut addr = u32::from(base) + 2;
    loop {
        if blocks.len() >= MAX_MODELS {
            return Err(DiscoveryError::BadChain(format!(
                "more than {MAX_MODELS} models"
            )));
        }
        let at = u16::try_from(addr)
            .map_err(|_| DiscoveryError::BadChain("chain runs past register 65535".into()))?;
        // ID and L in one read; some devices do not answer L after the end
        // model, so fall back to reading the ID alone.
        let header = match r.read(Span::new(Table::Holding, at, 2)).await {
            Ok(h) => h,
            Err(e) if e.breaks_link() => return Err(e.into()),
            Err(_) => r.read(Span::new(Table::Holding, at, 1)).await?,
        };
        let id = header[0];
        if id == END_ID {
            break;
        }
        let Some(&len) = header.get(1) else {
            return Err(DiscoveryError::BadChain(format!(
                "model {id} at {at} has no length register"
            )));
        };
        if blocks.is_empty() && id != 1 {
            return Err(DiscoveryError::BadChain(format!(
                "the first model at {at} is {id}, not the Common model 1"
            )));
        }
        blocks.push(ModelBlock { id, addr: at, len });
        addr += 2 + u32::from(len);
    }
    if blocks.is_empty() {
        return Err(DiscoveryError::BadChain(
            "no models before the end marker".into(),
        ));
    }
    Ok(blocks)
}

/// Finds the base and walks the chain.
pub async fn discover<R: RegisterReader>(r: &mut R) -> Result<Vec<ModelBlock>, DiscoveryError> {
    let base = find_base(r).await?;
    walk_chain(r, base).await
}

/// Splits a chain into logical devices: every Common model (1) starts one
/// (SunSpec allows aggregating devices behind one map, e.g. an inverter and its
/// meter).
pub fn logical_devices(chain: &[ModelBlock]) -> Vec<Vec<ModelBlock>> {
    let mut out: Vec<Vec<ModelBlock>> = Vec::new();
    for b in chain {
        match out.last_mut() {
            Some(dev) if b.id != 1 => dev.push(*b),
            _ => out.push(vec![*b]),
        }
    }
    out
}

/// Model ids that say what a logical device is.
pub fn kind_of(models: &[u16]) -> Option<crate::model::DeviceType> {
    use crate::model::DeviceType;
    let has = |f: fn(u16) -> bool| models.iter().any(|&m| f(m));
    if has(|m| matches!(m, 124 | 802 | 713)) {
        Some(DeviceType::Battery)
    } else if has(|m| matches!(m, 101..=103 | 111..=113 | 701)) {
        Some(DeviceType::Inverter)
    } else if has(|m| matches!(m, 201..=204 | 211..=214)) {
        Some(DeviceType::Meter)
    } else {
        None
    }
}

/// The logical device of `chain` a device of type `t` is read from: the first
/// whose models say it is one, else the first.
pub fn select(chain: Vec<ModelBlock>, t: crate::model::DeviceType) -> Vec<ModelBlock> {
    let mut devices = logical_devices(&chain);
    if devices.len() <= 1 {
        return chain;
    }
    let ids = |d: &Vec<ModelBlock>| d.iter().map(|b| b.id).collect::<Vec<_>>();
    let at = devices
        .iter()
        .position(|d| kind_of(&ids(d)) == Some(t))
        .unwrap_or(0);
    devices.swap_remove(at)
}
