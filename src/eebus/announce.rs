//! The node's mDNS announcement (`_ship._tcp`, SHIP §7), so that a control
//! box finds the controller by itself: the SHIP ID as the instance, the SKI,
//! brand, model, serial and the category "energy management system" in the
//! TXT record, and the addresses the node listens on (every interface's
//! but the loopback's when it listens on all of them).
//!
//! The announcement lasts as long as the value; dropping it withdraws it.
//! Makes no connection: the box dials the announced address.

use std::net::{IpAddr, SocketAddr};

use eebus::mdns::Mdns;
use eebus::ship::{DeviceCategory, ShipTxtRecord, Ski};

use crate::config::EebusConfig;

/// A running announcement.
pub struct Announcement {
    _mdns: Mdns,
}

/// The addresses to announce for a node listening on `listen`.
fn addresses(listen: SocketAddr) -> Result<Vec<IpAddr>, String> {
    if !listen.ip().is_unspecified() {
        return Ok(vec![listen.ip()]);
    }
    let all = if_addrs::get_if_addrs().map_err(|e| format!("the interfaces: {e}"))?;
    let mut out: Vec<IpAddr> = all
        .iter()
        .filter(|i| !i.is_loopback())
        .map(|i| i.ip())
        .filter(|ip| listen.is_ipv4() == ip.is_ipv4() || listen.is_ipv6())
        .collect();
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(format!("no interface but the loopback carries {listen}"));
    }
    Ok(out)
}

/// Announces the node of `c`, with `ski`, listening on `listen` (the
/// listener's bound address).
pub fn announce(c: &EebusConfig, ski: Ski, listen: SocketAddr) -> Result<Announcement, String> {
    let id = super::identity::ship_id(c);
    let record = ShipTxtRecord::new(id.clone(), ski)
        .with_brand(&c.brand)
        .with_model(&c.model)
        .with_serial(&c.serial)
        .with_device_type("EnergyManagementSystem")
        .with_categories([DeviceCategory::EnergyManagementSystem]);
    let addresses = addresses(listen)?;
    let mut mdns = Mdns::new().map_err(|e| format!("the mDNS responder: {e}"))?;
    mdns.announce(id.as_str(), &record, listen.port(), &addresses)
        .map_err(|e| format!("the announcement: {e}"))?;
    Ok(Announcement { _mdns: mdns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_on_one_address_announces_that_address() {
        let a: SocketAddr = "192.0.2.7:4712".parse().expect("addr");
        assert_eq!(addresses(a), Ok(vec![a.ip()]));
    }
}
