//! Process metrics in the standard `process_*` names, read from `/proc/self`
//! (memory-backed files: reading them takes microseconds), plus the agent's
//! version and the bytes it caused to be written to storage (flash wear).

use super::{Collect, Encoder, Kind};

/// Linux reports CPU times in USER_HZ ticks, fixed at 100 per second for user space.
const USER_HZ: f64 = 100.0;

/// Resident memory, CPU time, open files, start time and build info.
pub struct ProcessCollector {
    start_epoch_s: f64,
}

impl ProcessCollector {
    pub fn new() -> Self {
        Self {
            start_epoch_s: crate::model::time::now_ms() as f64 / 1000.0,
        }
    }
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl Collect for ProcessCollector {
    fn collect(&self, out: &mut Encoder) {
        out.family(
            "sitegate_build_info",
            Kind::Gauge,
            "Always 1; the version in a label.",
        )
        .sample(&[("version", env!("CARGO_PKG_VERSION"))], 1.0);
        out.family(
            "process_start_time_seconds",
            Kind::Gauge,
            "When the agent started, seconds since the Unix epoch.",
        )
        .sample(&[], self.start_epoch_s);
        if let Some(rss) = resident_bytes() {
            out.family(
                "process_resident_memory_bytes",
                Kind::Gauge,
                "Resident memory size in bytes.",
            )
            .sample(&[], rss as f64);
        }
        if let Some(cpu) = cpu_seconds() {
            out.family(
                "process_cpu_seconds_total",
                Kind::Counter,
                "User and system CPU time spent, in seconds.",
            )
            .sample(&[], cpu);
        }
        if let Some(bytes) = write_bytes() {
            out.family(
                "sitegate_process_write_bytes_total",
                Kind::Counter,
                "Bytes this process caused to be written to storage (write_bytes of /proc/self/io): the wear on the flash.",
            )
            .sample(&[], bytes as f64);
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            out.family("process_open_fds", Kind::Gauge, "Open file descriptors.")
                .sample(&[], fds.count() as f64);
        }
    }
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `write_bytes` of `/proc/self/io`.
fn write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    parse_write_bytes(&io)
}

fn parse_write_bytes(io: &str) -> Option<u64> {
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))?
        .trim()
        .parse()
        .ok()
}

/// utime + stime of `/proc/self/stat`, in seconds.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_cpu_ticks(&stat).map(|t| t as f64 / USER_HZ)
}

/// Fields 14 and 15 (utime, stime), counted after the `)` that ends the command
/// name (which may itself hold spaces or parentheses).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        assert_eq!(
            parse_vm_rss("Name:\tx\nVmRSS:\t   10548 kB\nVmData: 1 kB\n"),
            Some(10548 * 1024)
        );
        let stat = "1234 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0";
        assert_eq!(parse_cpu_ticks(stat), Some(300));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        let io =
            "rchar: 10\nwchar: 20\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_write_bytes(io), Some(4096));
        assert_eq!(parse_write_bytes("rchar: 1\n"), None);
    }

    #[test]
    fn reports_this_process() {
        let mut e = Encoder::new();
        ProcessCollector::new().collect(&mut e);
        let text = e.finish();
        for name in [
            "process_resident_memory_bytes ",
            "process_cpu_seconds_total ",
            "process_open_fds ",
            "sitegate_process_write_bytes_total ",
            "sitegate_build_info{version=",
        ] {
            assert!(text.contains(name), "{name} missing:\n{text}");
        }
    }
}
