//! `sitegate scan`: finds SunSpec devices (and devices a built-in profile
//! recognises) on a Modbus TCP address or a serial line, says what they are,
//! and prints config blocks for them. Progress goes to stderr, the report and
//! the config to stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sitegate::config::{Parity, RtuConfig, Transport};
use sitegate::modbus::link::Port;
use sitegate::modbus::scan;

use super::{complain, say, EXIT_USAGE};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("line").required(true).args(["tcp", "rtu"])))]
pub struct ScanArgs {
    /// Modbus TCP address: HOST or HOST:PORT (port 502 by default).
    #[arg(long)]
    tcp: Option<String>,
    /// Serial device of an RS-485 line, e.g. /dev/ttyUSB0.
    #[arg(long)]
    rtu: Option<PathBuf>,
    #[arg(long, default_value_t = 9600)]
    baud: u32,
    /// none, even or odd.
    #[arg(long, default_value = "none")]
    parity: String,
    #[arg(long, default_value_t = 8)]
    data_bits: u8,
    #[arg(long, default_value_t = 1)]
    stop_bits: u8,
    /// Unit ids to ask: 1-247, 3 or 1,2,5-7.
    #[arg(long, default_value = "1-247")]
    units: String,
    /// How long each unit id gets to answer.
    #[arg(long, default_value_t = 500)]
    timeout_ms: u64,
    /// Site reference the printed devices belong to.
    #[arg(long, default_value = "ste_site")]
    site: String,
    /// Name of the printed bus; default: what was scanned
    /// (`tcp-192-168-1-20-502`, `rtu-ttyUSB0`).
    #[arg(long)]
    bus_name: Option<String>,
}

/// `HOST`, `HOST:PORT` or `[V6]:PORT`.
fn tcp_address(s: &str) -> Result<Transport, String> {
    let bad = || format!("--tcp {s:?}: expected HOST or HOST:PORT");
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once("]:").ok_or_else(bad)?;
        (h.to_string(), p.parse().map_err(|_| bad())?)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h.to_string(), p.parse().map_err(|_| bad())?),
            _ => (s.to_string(), 502),
        }
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok(Transport::Tcp { host, port })
}

fn transport(a: &ScanArgs) -> Result<Transport, String> {
    if let Some(t) = &a.tcp {
        return tcp_address(t);
    }
    let path = a.rtu.clone().ok_or("give --tcp or --rtu")?;
    let parity = match a.parity.as_str() {
        "none" => Parity::None,
        "even" => Parity::Even,
        "odd" => Parity::Odd,
        other => return Err(format!("--parity {other:?}: expected none, even or odd")),
    };
    if !(5..=8).contains(&a.data_bits) || !(1..=2).contains(&a.stop_bits) {
        return Err("--data-bits must be 5 to 8 and --stop-bits 1 or 2".into());
    }
    Ok(Transport::Rtu(RtuConfig {
        path,
        baud: a.baud,
        parity,
        data_bits: a.data_bits,
        stop_bits: a.stop_bits,
    }))
}

pub fn scan(args: ScanArgs) -> ExitCode {
    let (transport, units) = match (transport(&args), scan::parse_units(&args.units)) {
        (Ok(t), Ok(u)) => (t, u),
        (Err(e), _) | (_, Err(e)) => {
            complain(&e);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if !(1..=60_000).contains(&args.timeout_ms) {
        complain("--timeout-ms must be 1 to 60000");
        return ExitCode::from(EXIT_USAGE);
    }
    let mut port = Port::new(transport.clone(), Duration::from_millis(args.timeout_ms));
    super::run::block_on(async {
        let found = scan::scan_all(&mut port, &units, |p| match p {
            scan::Progress::Asking(u) => complain(&format!("asking unit {u} ...")),
            scan::Progress::Failed(u, e) => complain(&format!("  unit {u}: {e}")),
            scan::Progress::NotSunspec(u) => complain(&format!(
                "  unit {u}: answers, but {}, and no profile recognises it",
                sitegate::modbus::sunspec::DiscoveryError::NotSunspec
            )),
            scan::Progress::Identified(d) => complain(&format!(
                "  unit {}: no SunSpec map; recognised by profile {}{}",
                d.unit,
                d.profile,
                match (&d.variant, &d.variant_problem) {
                    (Some(v), _) => format!(", variant {v}"),
                    (None, Some(why)) => format!("; {why}"),
                    (None, None) => String::new(),
                }
            )),
        })
        .await;
        port.close().await;
        report(&args, &transport, &found)
    })
}

fn report(args: &ScanArgs, transport: &Transport, found: &scan::Scan) -> ExitCode {
    if found.is_empty() {
        complain("no SunSpec device answered, and no profile recognised a device");
        return ExitCode::FAILURE;
    }
    for f in &found.sunspec {
        for d in &f.devices {
            say(&format!(
                "# unit {} (map at {}): {}",
                f.unit,
                f.base,
                scan::describe(d)
            ));
        }
    }
    for d in &found.profiles {
        say(&format!(
            "# unit {}: {}",
            d.unit,
            scan::describe_identified(d)
        ));
    }
    say("");
    let bus = args
        .bus_name
        .clone()
        .unwrap_or_else(|| scan::bus_name_of(transport));
    say(&scan::snippet_all(
        &bus,
        transport,
        args.timeout_ms.max(1000),
        found,
        &args.site,
    ));
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_addresses() {
        let t = |host: &str, port| Transport::Tcp {
            host: host.into(),
            port,
        };
        assert_eq!(tcp_address("10.0.0.5").unwrap(), t("10.0.0.5", 502));
        assert_eq!(tcp_address("inv.local:1502").unwrap(), t("inv.local", 1502));
        assert_eq!(tcp_address("[::1]:5020").unwrap(), t("::1", 5020));
        assert!(tcp_address("host:port").is_err());
    }
}
