//! The client's telemetry as 2030.5 mirrors: a MirrorUsagePoint for the
//! connection point (role flags 03) and one for the DER (49), each with a
//! MirrorMeterReading per quantity, and the readings posted to them each
//! post interval. mRIDs end in the IANA private enterprise number, as
//! CSIP-AUS asks.

use sha2::{Digest, Sha256};

use super::{href_of, page, Page};
use crate::csip::xml::write::hex;
use crate::csip::xml::{Doc, Writer, XmlError};

/// `roleFlags`: isMirror and isPremisesAggregationPoint.
pub const ROLE_SITE: u16 = 0x03;
/// `roleFlags`: isMirror, isDER and isSubmeter.
pub const ROLE_DER: u16 = 0x49;

/// One quantity a mirror reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Quantity {
    /// W, + import at the site, + production at the DER.
    ActivePower,
    /// var.
    ReactivePower,
    /// V, of phase 1, 2 or 3.
    Voltage(u8),
    /// Hz.
    Frequency,
    /// Wh held by the batteries.
    StoredEnergy,
}

impl Quantity {
    /// `(uom, kind, dataQualifier, phase, powerOfTenMultiplier)`.
    fn reading_type(self) -> (u8, u8, u8, u8, i8) {
        match self {
            Quantity::ActivePower => (38, 37, 2, 0, 0),
            Quantity::ReactivePower => (63, 37, 2, 0, 0),
            // Phases AN, BN, CN.
            Quantity::Voltage(p) => (29, 37, 2, [129, 65, 33][usize::from(p.clamp(1, 3) - 1)], -1),
            Quantity::Frequency => (33, 37, 2, 0, -2),
            // Energy, not an average: the amount at the reading's time.
            Quantity::StoredEnergy => (72, 12, 0, 0, 0),
        }
    }

    pub fn describe(self) -> String {
        match self {
            Quantity::ActivePower => "Average active power (W)".into(),
            Quantity::ReactivePower => "Average reactive power (var)".into(),
            Quantity::Voltage(p) => format!("Average voltage phase {p} (V)"),
            Quantity::Frequency => "Average frequency (Hz)".into(),
            Quantity::StoredEnergy => "Stored energy (Wh)".into(),
        }
    }
}

/// One mirror: the site's or the DER's.
#[derive(Clone, Debug, PartialEq)]
pub struct Mirror {
    pub role: u16,
    pub quantities: Vec<Quantity>,
}

/// An mRID of 32 hex digits: 24 from `seed`, then the PEN in 8 decimal
/// digits.
pub fn mrid(seed: &str, pen: u32) -> String {
    let hash = Sha256::digest(seed.as_bytes());
    format!("{}{:08}", hex::encode_upper(&hash[..12]), pen % 100_000_000)
}

/// A mirror's own mRID.
pub fn mirror_mrid(lfdi: &str, role: u16, pen: u32) -> String {
    mrid(&format!("{lfdi}/mup/{role:02X}"), pen)
}

/// A reading's mRID within its mirror.
pub fn reading_mrid(lfdi: &str, role: u16, q: Quantity, pen: u32) -> String {
    mrid(&format!("{lfdi}/mup/{role:02X}/{q:?}"), pen)
}

/// The MirrorUsagePoint the client POSTs, declaring its readings.
pub fn encode_mirror(m: &Mirror, lfdi: &str, pen: u32, ns: &str) -> String {
    let mut w = Writer::new("MirrorUsagePoint", ns);
    w.leaf("mRID", mirror_mrid(lfdi, m.role, pen))
        .leaf(
            "description",
            if m.role == ROLE_SITE {
                "Site measurement"
            } else {
                "DER measurement"
            },
        )
        .leaf("roleFlags", hex(u32::from(m.role), 2))
        .leaf("serviceCategoryKind", 0)
        .leaf("status", 1)
        .leaf("deviceLFDI", lfdi);
    for q in &m.quantities {
        let (uom, kind, qualifier, phase, power) = q.reading_type();
        w.open("MirrorMeterReading")
            .leaf("mRID", reading_mrid(lfdi, m.role, *q, pen))
            .leaf("description", q.describe())
            .open("ReadingType")
            .leaf("accumulationBehaviour", 12)
            .leaf("commodity", 1)
            .leaf("dataQualifier", qualifier)
            .leaf("flowDirection", 1)
            .leaf("kind", kind)
            .leaf("phase", phase)
            .leaf("powerOfTenMultiplier", power)
            .leaf("uom", uom)
            .close()
            .close();
    }
    w.finish()
}

/// One interval's value of one quantity, in its unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub quantity: Quantity,
    pub value: f64,
}

/// The readings of one interval `[start, start + duration)`, posted to a
/// mirror as one MirrorMeterReadingList.
pub fn encode_readings(
    role: u16,
    samples: &[Sample],
    start_s: i64,
    duration_s: u32,
    lfdi: &str,
    pen: u32,
    ns: &str,
) -> String {
    let mut w = Writer::new("MirrorMeterReadingList", ns);
    let end = start_s + i64::from(duration_s);
    for s in samples {
        let (_, _, _, _, power) = s.quantity.reading_type();
        let value = (s.value / 10f64.powi(i32::from(power))).round() as i64;
        w.open("MirrorMeterReading")
            .leaf("mRID", reading_mrid(lfdi, role, s.quantity, pen))
            .leaf("lastUpdateTime", end)
            .leaf("nextUpdateTime", end + i64::from(duration_s))
            .open("Reading")
            .open("timePeriod")
            .leaf("duration", duration_s)
            .leaf("start", start_s)
            .close()
            .leaf("value", value)
            .close()
            .close();
    }
    w.finish()
}

/// One mirror of the list.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    pub href: String,
    pub mrid: String,
    pub role: Option<u16>,
    pub device_lfdi: Option<String>,
    pub post_rate_s: Option<u32>,
}

pub fn mirror_list(text: &str) -> Result<Page<Listed>, XmlError> {
    let doc = Doc::parse(text)?;
    page(
        &doc.root("MirrorUsagePointList")?,
        "MirrorUsagePoint",
        |el| listed(el, href_of(el)?),
    )
}

fn listed(el: &crate::csip::xml::El<'_, '_>, href: String) -> Result<Listed, XmlError> {
    Ok(Listed {
        href,
        mrid: el.text_of("mRID").unwrap_or_default().to_string(),
        role: el
            .hex("roleFlags")?
            .map(|r| u16::try_from(r).unwrap_or(u16::MAX)),
        device_lfdi: el.text_of("deviceLFDI").map(str::to_string),
        post_rate_s: el.number("postRate")?,
    })
}

/// A single MirrorUsagePoint, as a GET of `href` (the Location a POST
/// answered) shows it.
pub fn mirror(text: &str, href: &str) -> Result<Listed, XmlError> {
    let doc = Doc::parse(text)?;
    let root = doc.root("MirrorUsagePoint")?;
    let href = root.href().unwrap_or_else(|| href.to_string());
    listed(&root, href)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csip::xml::write::CSIPAUS;

    const LFDI: &str = "854D10A201CA99E5E90D3C3E1F9BC1C3BD075F3B";

    #[test]
    fn mrids_are_32_hex_digits_ending_in_the_pen() {
        let m = mirror_mrid(LFDI, ROLE_SITE, 12_345);
        assert_eq!(m.len(), 32);
        assert!(m.ends_with("00012345"));
        assert!(m.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(m, mirror_mrid(LFDI, ROLE_DER, 12_345));
        assert_ne!(
            reading_mrid(LFDI, ROLE_SITE, Quantity::ActivePower, 1),
            reading_mrid(LFDI, ROLE_SITE, Quantity::ReactivePower, 1)
        );
    }

    #[test]
    fn a_mirror_declares_each_reading_type() {
        let m = Mirror {
            role: ROLE_DER,
            quantities: vec![
                Quantity::ActivePower,
                Quantity::Voltage(2),
                Quantity::StoredEnergy,
            ],
        };
        let text = encode_mirror(&m, LFDI, 7, CSIPAUS);
        let doc = Doc::parse(&text).unwrap();
        let root = doc.root("MirrorUsagePoint").unwrap();
        assert_eq!(root.hex("roleFlags").unwrap(), Some(0x49));
        assert_eq!(root.text_of("deviceLFDI"), Some(LFDI));
        let readings = root.children("MirrorMeterReading");
        assert_eq!(readings.len(), 3);
        let v = readings[1].child("ReadingType").unwrap();
        assert_eq!(v.number::<u8>("uom").unwrap(), Some(29));
        assert_eq!(v.number::<u8>("phase").unwrap(), Some(65));
        let e = readings[2].child("ReadingType").unwrap();
        assert_eq!(
            (
                e.number::<u8>("uom").unwrap(),
                e.number::<u8>("kind").unwrap()
            ),
            (Some(72), Some(12))
        );
    }

    #[test]
    fn readings_are_scaled_by_their_power_of_ten() {
        let samples = [
            Sample {
                quantity: Quantity::ActivePower,
                value: -4_321.4,
            },
            Sample {
                quantity: Quantity::Voltage(1),
                value: 230.46,
            },
            Sample {
                quantity: Quantity::Frequency,
                value: 49.987,
            },
        ];
        let text = encode_readings(ROLE_SITE, &samples, 1_700_000_040, 60, LFDI, 7, CSIPAUS);
        let doc = Doc::parse(&text).unwrap();
        let root = doc.root("MirrorMeterReadingList").unwrap();
        let values: Vec<i64> = root
            .children("MirrorMeterReading")
            .iter()
            .map(|m| m.child("Reading").unwrap().required("value").unwrap())
            .collect();
        assert_eq!(values, vec![-4_321, 2_305, 4_999]);
        let r = root.children("MirrorMeterReading")[0]
            .child("Reading")
            .unwrap();
        let period = r.child("timePeriod").unwrap();
        assert_eq!(period.required::<i64>("start").unwrap(), 1_700_000_040);
        assert_eq!(period.required::<u32>("duration").unwrap(), 60);
    }

    #[test]
    fn a_mirror_list_reads_roles_and_post_rates() {
        let l = mirror_list(r#"<MirrorUsagePointList all="1" results="1" pollRate="60">
          <MirrorUsagePoint href="/mup/3"><mRID>AB</mRID><roleFlags>49</roleFlags><deviceLFDI>x</deviceLFDI><postRate>300</postRate></MirrorUsagePoint>
          </MirrorUsagePointList>"#)
        .unwrap();
        assert_eq!(l.items[0].role, Some(0x49));
        assert_eq!(l.items[0].post_rate_s, Some(300));
    }
}
