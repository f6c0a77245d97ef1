//! What the client says of its DER: where the DER's resources are (the DER
//! list), and the DERCapability, DERSettings and DERStatus it PUTs there,
//! written in the schema's order with CSIP-AUS's mode bitmaps last.

use super::{href_of, page, Page};
use crate::csip::xml::write::hex;
use crate::csip::xml::{Doc, Writer, XmlError};

/// One DER of the list: where its resources are.
#[derive(Clone, Debug, PartialEq)]
pub struct DerLinks {
    pub href: String,
    pub capability: Option<String>,
    pub settings: Option<String>,
    pub status: Option<String>,
}

pub fn der_list(text: &str) -> Result<Page<DerLinks>, XmlError> {
    let doc = Doc::parse(text)?;
    page(&doc.root("DERList")?, "DER", |el| {
        Ok(DerLinks {
            href: href_of(el)?,
            capability: el.link("DERCapabilityLink")?,
            settings: el.link("DERSettingsLink")?,
            status: el.link("DERStatusLink")?,
        })
    })
}

/// 2030.5's DERControlType bits the client supports.
pub mod modes {
    pub const CHARGE: u32 = 1 << 0;
    pub const DISCHARGE: u32 = 1 << 1;
    pub const CONNECT: u32 = 1 << 2;
    pub const ENERGIZE: u32 = 1 << 3;
    pub const MAX_LIM_W: u32 = 1 << 20;
    /// CSIP-AUS's DOE modes: export, import, generation, load limits.
    pub const DOE_ALL: u32 = 0b1111;
    /// CSIP-AUS v1.3's storage modes: `opModStorageTargetW`.
    pub const VPP_STORAGE_TARGET: u32 = 1 << 0;
}

/// DERType: PV, PV with storage, storage.
pub fn der_type(pv: bool, storage: bool) -> u8 {
    match (pv, storage) {
        (true, true) => 83,
        (false, true) => 80,
        _ => 4,
    }
}

/// A power as a 2030.5 value and power of ten: the smallest multiplier at
/// which the whole value fits `limit` (Int16: 32,767; UInt16: 65,535).
pub fn scaled(w: f64, limit: f64) -> (i64, i8) {
    let mut m = 0i8;
    let mut v = w.round();
    while v.abs() > limit && m < 9 {
        m += 1;
        v = (w / 10f64.powi(i32::from(m))).round();
    }
    (v as i64, m)
}

fn power(w: &mut Writer, name: &'static str, watts: Option<f64>, limit: f64) {
    if let Some(x) = watts {
        let (value, multiplier) = scaled(x, limit);
        w.open(name)
            .leaf("multiplier", multiplier)
            .leaf("value", value)
            .close();
    }
}

const INT16: f64 = 32_767.0;
const UINT16: f64 = 65_535.0;

/// The ratings of the site's DER (its inverters and batteries together).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capability {
    pub modes_supported: u32,
    pub doe_modes_supported: u32,
    /// Written only where the server speaks CSIP-AUS's storage extension.
    pub vpp_modes_supported: Option<u32>,
    pub der_type: u8,
    pub max_w: f64,
    pub max_va: Option<f64>,
    pub max_charge_w: Option<f64>,
    pub max_discharge_w: Option<f64>,
    pub max_wh: Option<f64>,
}

pub fn encode_capability(c: &Capability, ns: &str) -> String {
    let mut w = Writer::new("DERCapability", ns);
    w.leaf("modesSupported", hex(c.modes_supported, 8));
    power(&mut w, "rtgMaxChargeRateW", c.max_charge_w, INT16);
    power(&mut w, "rtgMaxDischargeRateW", c.max_discharge_w, INT16);
    power(&mut w, "rtgMaxVA", c.max_va, UINT16);
    power(&mut w, "rtgMaxW", Some(c.max_w), INT16);
    power(&mut w, "rtgMaxWh", c.max_wh, UINT16);
    w.leaf("type", c.der_type);
    w.leaf("csipaus:doeModesSupported", hex(c.doe_modes_supported, 8));
    w.maybe(
        "csipaus:vppModesSupported",
        c.vpp_modes_supported.map(|v| hex(v, 8)),
    );
    w.finish()
}

/// The settings in force: the DER's limits and the ramp the utility set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub modes_enabled: u32,
    pub doe_modes_enabled: u32,
    pub vpp_modes_enabled: Option<u32>,
    /// As the DefaultDERControl last said (hundredths of a percent per s).
    pub set_grad_w: u16,
    pub max_w: f64,
    pub max_va: Option<f64>,
    pub max_charge_w: Option<f64>,
    pub max_discharge_w: Option<f64>,
    pub max_wh: Option<f64>,
    pub updated_s: i64,
}

pub fn encode_settings(s: &Settings, ns: &str) -> String {
    let mut w = Writer::new("DERSettings", ns);
    w.leaf("modesEnabled", hex(s.modes_enabled, 8));
    w.leaf("setGradW", s.set_grad_w);
    power(&mut w, "setMaxChargeRateW", s.max_charge_w, INT16);
    power(&mut w, "setMaxDischargeRateW", s.max_discharge_w, INT16);
    power(&mut w, "setMaxVA", s.max_va, UINT16);
    power(&mut w, "setMaxW", Some(s.max_w), INT16);
    power(&mut w, "setMaxWh", s.max_wh, UINT16);
    w.leaf("updatedTime", s.updated_s);
    w.leaf("csipaus:doeModesEnabled", hex(s.doe_modes_enabled, 8));
    w.maybe(
        "csipaus:vppModesEnabled",
        s.vpp_modes_enabled.map(|v| hex(v, 8)),
    );
    w.finish()
}

/// ConnectStatusType bits.
pub mod connect {
    pub const CONNECTED: u8 = 1 << 0;
    pub const AVAILABLE: u8 = 1 << 1;
    pub const OPERATING: u8 = 1 << 2;
}

/// What the DER is doing now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// [`connect`] bits.
    pub gen_connect: u8,
    /// 1 off, 2 operational.
    pub operational_mode: u8,
    /// The batteries' mean state of charge, %.
    pub soc_pct: Option<f64>,
    /// 0 charging, 1 discharging, 2 holding.
    pub storage_mode: Option<u8>,
    /// [`connect`] bits of the storage, where there is any.
    pub stor_connect: Option<u8>,
    pub reading_s: i64,
}

pub fn encode_status(s: &Status, ns: &str) -> String {
    let mut w = Writer::new("DERStatus", ns);
    let t = s.reading_s;
    let status = |w: &mut Writer, name: &'static str, value: String| {
        w.open(name)
            .leaf("dateTime", t)
            .leaf("value", value)
            .close();
    };
    status(&mut w, "genConnectStatus", hex(u32::from(s.gen_connect), 2));
    status(
        &mut w,
        "operationalModeStatus",
        s.operational_mode.to_string(),
    );
    w.leaf("readingTime", t);
    if let Some(soc) = s.soc_pct {
        // PerCent: hundredths.
        status(
            &mut w,
            "stateOfChargeStatus",
            ((soc * 100.0).round() as i64).clamp(0, 10_000).to_string(),
        );
    }
    if let Some(m) = s.storage_mode {
        status(&mut w, "storageModeStatus", m.to_string());
    }
    if let Some(c) = s.stor_connect {
        status(&mut w, "storConnectStatus", hex(u32::from(c), 2));
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csip::xml::write::CSIPAUS;

    #[test]
    fn powers_take_the_smallest_multiplier_that_fits() {
        assert_eq!(scaled(5_000.0, INT16), (5_000, 0));
        assert_eq!(scaled(32_767.0, INT16), (32_767, 0));
        assert_eq!(scaled(40_000.0, INT16), (4_000, 1));
        assert_eq!(scaled(40_000.0, UINT16), (40_000, 0));
        assert_eq!(scaled(-250_000.0, INT16), (-25_000, 1));
        assert_eq!(scaled(5_000_000.0, INT16), (5_000, 3));
    }

    #[test]
    fn capability_settings_and_status_read_back_as_written() {
        let c = Capability {
            modes_supported: modes::CHARGE | modes::DISCHARGE | modes::CONNECT,
            doe_modes_supported: modes::DOE_ALL,
            vpp_modes_supported: None,
            der_type: der_type(true, true),
            max_w: 40_000.0,
            max_va: Some(40_000.0),
            max_charge_w: Some(10_000.0),
            max_discharge_w: Some(10_000.0),
            max_wh: Some(20_000.0),
        };
        let text = encode_capability(&c, CSIPAUS);
        let doc = Doc::parse(&text).unwrap();
        let root = doc.root("DERCapability").unwrap();
        assert_eq!(root.hex("modesSupported").unwrap(), Some(0b111));
        assert_eq!(root.hex("doeModesSupported").unwrap(), Some(0b1111));
        let w = root.child("rtgMaxW").unwrap();
        assert_eq!(
            w.required::<i64>("value").unwrap()
                * 10i64.pow(w.required::<u32>("multiplier").unwrap()),
            40_000
        );
        assert_eq!(root.number::<u8>("type").unwrap(), Some(83));
        assert!(root.child("vppModesSupported").is_none());

        let s = Settings {
            set_grad_w: 27,
            max_w: 40_000.0,
            doe_modes_enabled: modes::DOE_ALL,
            vpp_modes_enabled: Some(modes::VPP_STORAGE_TARGET),
            updated_s: 7,
            ..Settings::default()
        };
        let doc_text = encode_settings(&s, CSIPAUS);
        let doc = Doc::parse(&doc_text).unwrap();
        let root = doc.root("DERSettings").unwrap();
        assert_eq!(root.number::<u16>("setGradW").unwrap(), Some(27));
        assert_eq!(root.hex("vppModesEnabled").unwrap(), Some(1));

        let st = Status {
            gen_connect: connect::CONNECTED | connect::AVAILABLE | connect::OPERATING,
            operational_mode: 2,
            soc_pct: Some(55.5),
            storage_mode: Some(2),
            stor_connect: Some(connect::CONNECTED),
            reading_s: 9,
        };
        let doc_text = encode_status(&st, CSIPAUS);
        let doc = Doc::parse(&doc_text).unwrap();
        let root = doc.root("DERStatus").unwrap();
        assert_eq!(
            root.child("genConnectStatus")
                .unwrap()
                .hex("value")
                .unwrap(),
            Some(7)
        );
        assert_eq!(
            root.child("stateOfChargeStatus")
                .unwrap()
                .required::<u32>("value")
                .unwrap(),
            5_550
        );
        assert_eq!(root.number::<i64>("readingTime").unwrap(), Some(9));
    }
}
