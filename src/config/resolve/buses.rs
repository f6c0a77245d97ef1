//! `[[buses]]` and `[polling]`: each bus's name and transport (TCP address or
//! serial line) and the polling settings every bus shares. Collects
//! problems; never stops early.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use super::super::problem::Problem;
use super::super::raw::{RawBus, RawRtu, MAX_STATIC_REFRESH_S};
use super::super::{BusConfig, PollingConfig, RtuConfig, Transport};
use super::check_identifier;

/// The buses that parsed, in file order, and whether each (by name) is TCP.
pub(super) fn resolve_buses(
    raw: Vec<Option<RawBus>>,
    problems: &mut Vec<Problem>,
) -> (Vec<BusConfig>, HashMap<String, bool>) {
    let mut bus_kinds = HashMap::new();
    let mut buses = Vec::new();
    for (i, bus) in raw.into_iter().enumerate() {
        let Some(bus) = bus else { continue };
        let path = format!("buses[{i}]");
        if let Some(b) = resolve_bus(&path, bus, problems) {
            if bus_kinds
                .insert(b.name.clone(), matches!(b.transport, Transport::Tcp { .. }))
                .is_some()
            {
                problems.push(Problem::new(
                    format!("{path}.name"),
                    format!("duplicate bus name {:?}", b.name),
                ));
            }
            buses.push(b);
        }
    }
    (buses, bus_kinds)
}

pub(super) fn check_polling(p: &PollingConfig, problems: &mut Vec<Problem>) {
    if p.min_backoff_ms == 0 || p.min_backoff_ms > p.max_backoff_ms {
        problems.push(Problem::new(
            "polling.min_backoff_ms",
            format!(
                "must be at least 1 and at most max_backoff_ms ({}), found {}",
                p.max_backoff_ms, p.min_backoff_ms
            ),
        ));
    }
    if p.coalesce_gap > 100 {
        problems.push(Problem::new(
            "polling.coalesce_gap",
            format!("must be at most 100 registers, found {}", p.coalesce_gap),
        ));
    }
    if !(1..=MAX_STATIC_REFRESH_S).contains(&p.static_refresh_s) {
        problems.push(Problem::new(
            "polling.static_refresh_s",
            format!(
                "must be 1 to {MAX_STATIC_REFRESH_S} s (a day), found {}",
                p.static_refresh_s
            ),
        ));
    }
}

fn resolve_bus(path: &str, bus: RawBus, problems: &mut Vec<Problem>) -> Option<BusConfig> {
    check_identifier(&format!("{path}.name"), &bus.name, problems);
    if bus.timeout_ms == 0 || bus.timeout_ms > 60_000 {
        problems.push(Problem::new(
            format!("{path}.timeout_ms"),
            format!("must be 1 to 60000, found {}", bus.timeout_ms),
        ));
    }
    let transport = match (bus.tcp, bus.rtu) {
        (Some(tcp), None) => parse_tcp(&format!("{path}.tcp"), &tcp, problems)?,
        (None, Some(rtu)) => Transport::Rtu(check_rtu(&format!("{path}.rtu"), rtu, problems)?),
        (Some(_), Some(_)) => {
            problems.push(Problem::new(path, "give either tcp or rtu, not both"));
            return None;
        }
        (None, None) => {
            problems.push(Problem::new(
                path,
                "missing transport: add tcp = \"host:port\" or rtu = { path = \"/dev/ttyUSB0\", ... }",
            ));
            return None;
        }
    };
    Some(BusConfig {
        name: bus.name,
        transport,
        timeout_ms: bus.timeout_ms,
    })
}

/// `host:port`, `host` (port 502), `[v6]:port`.
fn parse_tcp(path: &str, s: &str, problems: &mut Vec<Problem>) -> Option<Transport> {
    let bad = |problems: &mut Vec<Problem>, why: &str| {
        problems.push(Problem::new(
            path,
            format!("{s:?} is not a Modbus TCP address: {why}"),
        ));
        None
    };
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(Transport::Tcp {
            host: a.ip().to_string(),
            port: a.port(),
        });
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(Transport::Tcp {
            host: ip.to_string(),
            port: 502,
        });
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(p) => (h, p),
            Err(_) => return bad(problems, "the port must be a number from 0 to 65535"),
        },
        None => (s, 502),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if !host_ok {
        return bad(problems, "expected host:port, e.g. \"192.168.1.50:502\"");
    }
    Some(Transport::Tcp {
        host: host.to_string(),
        port,
    })
}

pub(super) fn check_rtu(path: &str, rtu: RawRtu, problems: &mut Vec<Problem>) -> Option<RtuConfig> {
    let before = problems.len();
    if rtu.path.as_os_str().is_empty() {
        problems.push(Problem::new(format!("{path}.path"), "must not be empty"));
    }
    if !(300..=1_000_000).contains(&rtu.baud) {
        problems.push(Problem::new(
            format!("{path}.baud"),
            format!("{} is not a serial speed (300 to 1000000)", rtu.baud),
        ));
    }
    if !(5..=8).contains(&rtu.data_bits) {
        problems.push(Problem::new(
            format!("{path}.data_bits"),
            format!("must be 5 to 8, found {}", rtu.data_bits),
        ));
    }
    if !(1..=2).contains(&rtu.stop_bits) {
        problems.push(Problem::new(
            format!("{path}.stop_bits"),
            format!("must be 1 or 2, found {}", rtu.stop_bits),
        ));
    }
    (problems.len() == before).then_some(RtuConfig {
        path: rtu.path,
        baud: rtu.baud,
        parity: rtu.parity,
        data_bits: rtu.data_bits,
        stop_bits: rtu.stop_bits,
    })
}
