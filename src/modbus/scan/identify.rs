//! Recognising register-map profile devices during a scan: a unit that
//! answers but holds no SunSpec map is asked for the identification register
//! of every built-in profile that has one (`[identify]`); the first that
//! matches names the profile, and `scan` prints a `[[devices]]` block for it.
//! A profile with variants then has the registers its variants are told by
//! read too, and names the variant (or says why it cannot).
//!
//! Reads only, one request per candidate profile, each bounded by the port's
//! timeout; a refused read (exception) just means "not this one". Never writes.

use std::sync::Arc;

use crate::modbus::link::Port;
use crate::model::DeviceType;
use crate::profile::{self, Profile, BUILTIN};
use crate::register::plan::Image;

/// A unit recognised as a profile's device.
#[derive(Debug, Clone, PartialEq)]
pub struct Identified {
    pub unit: u8,
    /// The built-in profile's name (`abb-b2x`).
    pub profile: String,
    pub manufacturer: Option<String>,
    pub model: Option<String>,
    /// The type the profile is written for (its first `device_types` entry).
    pub device_type: Option<DeviceType>,
    /// What the identification register held, readably.
    pub evidence: String,
    /// The register read, as "holding 35168" or "input 11".
    pub register: String,
    /// The profile's variant the device shows, for a family.
    pub variant: Option<String>,
    /// Why a family's variant could not be told (the config must name it).
    pub variant_problem: Option<String>,
}

/// The built-in profiles that can be recognised, in name order.
pub fn candidates() -> Vec<Arc<Profile>> {
    BUILTIN
        .iter()
        .filter_map(|(name, text)| profile::parse(name, "built-in", text).ok())
        .filter(|p| p.identify.is_some())
        .map(Arc::new)
        .collect()
}

/// Asks `unit` for each candidate's identification register; the first
/// profile whose register matches.
pub async fn identify(
    port: &mut Port,
    unit: u8,
    candidates: &[Arc<Profile>],
) -> Option<Identified> {
    for p in candidates {
        let Some(id) = &p.identify else { continue };
        let span = id.span();
        let Ok(words) = port.read(unit, span).await else {
            continue;
        };
        if id.matches(&words) {
            let table = span.table.name();
            let mut found = Identified {
                unit,
                profile: p.name.clone(),
                manufacturer: p.manufacturer.clone(),
                model: p.model.clone(),
                device_type: p.device_types.first().copied(),
                evidence: id.read(&words).unwrap_or_default(),
                register: format!("{table} {}", span.addr),
                variant: None,
                variant_problem: None,
            };
            if !p.variants.is_empty() {
                let mut img = Image::new();
                for s in p.variant_spans() {
                    if let Ok(w) = port.read(unit, s).await {
                        img.insert(s, w);
                    }
                }
                match p.select_variant(&img) {
                    Ok(member) => {
                        found.model = member.model.clone();
                        found.variant = member.variant.map(|v| v.name);
                    }
                    Err(e) => found.variant_problem = Some(e.to_string()),
                }
            }
            return Some(found);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_identifiable_builtin_names_its_device_type() {
        let c = candidates();
        assert!(
            c.len() >= 3,
            "{:?}",
            c.iter().map(|p| &p.name).collect::<Vec<_>>()
        );
        for p in &c {
            assert!(!p.device_types.is_empty(), "{}", p.name);
        }
    }
}
