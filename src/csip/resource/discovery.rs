//! The way from the server's DeviceCapability to the device's own resources:
//! DeviceCapability, Time, the EndDevice list and the device's EndDevice,
//! its Registration, the FunctionSetAssignments, and what the client writes
//! on the way (its EndDevice, CSIP-AUS's ConnectionPoint with the NMI).

use super::{href_of, page, Page};
use crate::csip::xml::{Doc, El, Writer, XmlError};

/// `dcap`: where the function sets are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceCapability {
    pub poll_rate_s: Option<u32>,
    pub time: Option<String>,
    pub end_devices: Option<String>,
    pub mirror_usage_points: Option<String>,
}

pub fn device_capability(text: &str) -> Result<DeviceCapability, XmlError> {
    let doc = Doc::parse(text)?;
    let root = doc.root("DeviceCapability")?;
    Ok(DeviceCapability {
        poll_rate_s: root.attr_number("pollRate")?,
        time: root.link("TimeLink")?,
        end_devices: root.link("EndDeviceListLink")?,
        mirror_usage_points: root.link("MirrorUsagePointListLink")?,
    })
}

/// `tm`: the server's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Time {
    /// Seconds since the epoch, UTC.
    pub current_s: i64,
    pub poll_rate_s: Option<u32>,
    /// 3 authoritative ... 7 intentionally uncoordinated.
    pub quality: Option<u8>,
}

pub fn time(text: &str) -> Result<Time, XmlError> {
    let doc = Doc::parse(text)?;
    let root = doc.root("Time")?;
    Ok(Time {
        current_s: root.required("currentTime")?,
        poll_rate_s: root.attr_number("pollRate")?,
        quality: root.number("quality")?,
    })
}

/// One EndDevice as a list or a GET shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndDevice {
    pub href: Option<String>,
    pub lfdi: Option<String>,
    pub sfdi: Option<u64>,
    pub registration: Option<String>,
    pub function_sets: Option<String>,
    pub ders: Option<String>,
    pub connection_point: Option<String>,
    pub post_rate_s: Option<u32>,
}

fn end_device_of(el: &El<'_, '_>) -> Result<EndDevice, XmlError> {
    Ok(EndDevice {
        href: el.href(),
        lfdi: el.text_of("lFDI").map(str::to_string),
        sfdi: el.number("sFDI")?,
        registration: el.link("RegistrationLink")?,
        function_sets: el.link("FunctionSetAssignmentsListLink")?,
        ders: el.link("DERListLink")?,
        connection_point: el.link("ConnectionPointLink")?,
        post_rate_s: el.number("postRate")?,
    })
}

pub fn end_device(text: &str) -> Result<EndDevice, XmlError> {
    let doc = Doc::parse(text)?;
    end_device_of(&doc.root("EndDevice")?)
}

pub fn end_device_list(text: &str) -> Result<Page<EndDevice>, XmlError> {
    let doc = Doc::parse(text)?;
    page(&doc.root("EndDeviceList")?, "EndDevice", end_device_of)
}

impl EndDevice {
    /// Whether this is the device with `lfdi` (any case) or `sfdi`.
    pub fn is(&self, lfdi: &str, sfdi: u64) -> bool {
        match &self.lfdi {
            Some(l) => l.eq_ignore_ascii_case(lfdi),
            None => self.sfdi == Some(sfdi),
        }
    }
}

/// The EndDevice the client registers in band.
pub fn encode_end_device(
    lfdi: &str,
    sfdi: u64,
    device_category: u32,
    now_s: i64,
    ns: &str,
) -> String {
    let mut w = Writer::new("EndDevice", ns);
    w.leaf(
        "deviceCategory",
        crate::csip::xml::write::hex(device_category, 2),
    )
    .leaf("lFDI", lfdi)
    .leaf("sFDI", sfdi)
    .leaf("changedTime", now_s);
    w.finish()
}

/// `rg`: the PIN the utility registered the device with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Registration {
    pub pin: u32,
    pub poll_rate_s: Option<u32>,
}

pub fn registration(text: &str) -> Result<Registration, XmlError> {
    let doc = Doc::parse(text)?;
    let root = doc.root("Registration")?;
    Ok(Registration {
        pin: root.required("pIN")?,
        poll_rate_s: root.attr_number("pollRate")?,
    })
}

/// CSIP-AUS's ConnectionPoint: the NMI of the site's connection.
pub fn encode_connection_point(nmi: &str, ns: &str) -> String {
    let mut w = Writer::new("csipaus:ConnectionPoint", ns);
    w.leaf("csipaus:connectionPointId", nmi);
    w.finish()
}

/// The NMI a ConnectionPoint holds, if any.
pub fn connection_point(text: &str) -> Result<Option<String>, XmlError> {
    let doc = Doc::parse(text)?;
    let root = doc.root("ConnectionPoint")?;
    Ok(root
        .text_of("connectionPointId")
        .filter(|t| !t.is_empty())
        .map(str::to_string))
}

/// One FunctionSetAssignments: where its DER programs are.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSet {
    pub href: String,
    pub programs: Option<String>,
}

pub fn function_sets(text: &str) -> Result<Page<FunctionSet>, XmlError> {
    let doc = Doc::parse(text)?;
    page(
        &doc.root("FunctionSetAssignmentsList")?,
        "FunctionSetAssignments",
        |el| {
            Ok(FunctionSet {
                href: href_of(el)?,
                programs: el.link("DERProgramListLink")?,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_capability_and_time_read_their_links_and_rates() {
        let d = device_capability(
            r#"<DeviceCapability xmlns="urn:ieee:std:2030.5:ns" href="/dcap" pollRate="60">
            <TimeLink href="/tm"/><EndDeviceListLink all="1" href="/edev"/><MirrorUsagePointListLink href="/mup" all="0"/></DeviceCapability>"#,
        )
        .unwrap();
        assert_eq!(d.poll_rate_s, Some(60));
        assert_eq!(d.time.as_deref(), Some("/tm"));
        assert_eq!(d.end_devices.as_deref(), Some("/edev"));
        assert_eq!(d.mirror_usage_points.as_deref(), Some("/mup"));
        let t = time("<Time><currentTime>1682475024</currentTime><dstOffset>3600</dstOffset><quality>5</quality></Time>").unwrap();
        assert_eq!((t.current_s, t.quality), (1_682_475_024, Some(5)));
    }

    #[test]
    fn an_end_device_list_finds_the_device_by_lfdi_in_any_case() {
        let list = end_device_list(
            r#"<EndDeviceList xmlns="urn:ieee:std:2030.5:ns" xmlns:csipaus="https://csipaus.org/ns" all="2" results="2" pollRate="60">
            <EndDevice href="/edev/0"><sFDI>1</sFDI></EndDevice>
            <EndDevice href="/edev/1"><DERListLink href="/edev/1/der"/><lFDI>854d10a201ca99e5e90d3c3e1f9bc1c3bd075f3b</lFDI><sFDI>357827241281</sFDI>
              <changedTime>1</changedTime><FunctionSetAssignmentsListLink href="/edev/1/fsa"/><RegistrationLink href="/edev/1/rg"/>
              <csipaus:ConnectionPointLink href="/edev/1/cp"/></EndDevice></EndDeviceList>"#,
        )
        .unwrap();
        assert_eq!((list.all, list.poll_rate_s), (2, Some(60)));
        let me = list
            .items
            .iter()
            .find(|e| e.is("854D10A201CA99E5E90D3C3E1F9BC1C3BD075F3B", 357_827_241_281))
            .unwrap();
        assert_eq!(me.connection_point.as_deref(), Some("/edev/1/cp"));
        assert_eq!(me.function_sets.as_deref(), Some("/edev/1/fsa"));
        assert!(!list.items[0].is("854D10A201CA99E5E90D3C3E1F9BC1C3BD075F3B", 357_827_241_281));
    }

    #[test]
    fn what_the_client_writes_reads_back() {
        let e = end_device(&encode_end_device(
            "AB",
            12,
            0x20_0000,
            5,
            crate::csip::xml::write::CSIPAUS,
        ))
        .unwrap();
        assert_eq!((e.lfdi.as_deref(), e.sfdi), (Some("AB"), Some(12)));
        let cp = encode_connection_point("4102345678", "https://csipaus.org/ns/v1.3");
        assert_eq!(
            connection_point(&cp).unwrap().as_deref(),
            Some("4102345678")
        );
        assert!(cp.contains("xmlns:csipaus=\"https://csipaus.org/ns/v1.3\""));
        assert_eq!(registration("<Registration><dateTimeRegistered>1</dateTimeRegistered><pIN>111115</pIN></Registration>").unwrap().pin, 111_115);
    }
}
