//! Whole SunSpec models through the Modbus server, without forwarded reads:
//! every mirrored device of the demo's site (`config/demo.toml`) and of the
//! noisy simulator's (integer and float models, a DER battery) answers a
//! read of any span inside its models, registers it never read as their
//! points' "not implemented" values, and keeps 02 outside them. The
//! project's own client walks every model register by register and in
//! whole spans; pysunspec2 (`tests/py/walk_sunspec.py`) scans and reads
//! every model, where python3 has it (`SITEGATE_REQUIRE_PYSUNSPEC=1` makes
//! it required), and the layout table stays what its definitions say.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ::sunspec::models::{model1::Model1, model123::Model123, model124::Model124};
use ::sunspec::{Group, Point, Value};
use sitegate::agent::Agent;
use sitegate::config::{parse, Served, Transport};
use sitegate::modbus::link::{Port, UnitReader};
use sitegate::modbus::sunspec::{self, unimplemented, ModelBlock};
use sitegate::modbus::{ModbusError, PollImage};
use sitegate::model::DeviceId;
use sitegate::register::plan::{Span, Table};
use sitegate::sim::{SimSite, SimSiteSpec};
use tokio_modbus::ExceptionCode;

use crate::common::wait_for;
use crate::steering_support::{kw, table, Kind, TestSite};

/// 11:00 UTC on 2026-06-21: the sun is high.
const SUMMER_MORNING_MS: i64 = 1_782_039_600_000;

/// The `[modbus_server]` keys: the server on loopback, its bounds far from
/// what the walks need (pysunspec2 opens a connection a unit, and the
/// server may see the last one close after the next one opens).
fn server() -> [(&'static str, toml::Value); 4] {
    [
        ("listen", vec!["127.0.0.1:0"].into()),
        ("requests_per_s", 100_000.into()),
        ("burst", 100_000.into()),
        ("max_connections_per_client", 16.into()),
    ]
}

/// A device on the server.
struct Unit {
    /// Its unit id on the server.
    served: u8,
    id: DeviceId,
    /// Its bus (the simulator's server) and unit id there.
    bus: String,
    unit: u8,
}

/// A simulated site and the agent on it, its devices on the server.
struct Rig {
    sim: SimSite,
    agent: Agent,
    units: Vec<Unit>,
    _dir: tempfile::TempDir,
}

/// The demo's site as `sitegate demo` runs it, each device under a unit id
/// of its own (11 to 15).
fn demo_text() -> String {
    let t = include_str!("../../config/demo.toml").replacen(
        "listen = [\"127.0.0.1:8080\"]",
        "listen = [\"127.0.0.1:0\"]",
        1,
    );
    let server = table([("modbus_server", table(server()))]);
    crate::modbus_server::own_units(t) + "\n" + &toml::to_string(&server).expect("TOML")
}

/// The noisy simulator's devices: two sites on one bus, units 1 to 7 (8 kW
/// but the meters), polled every second.
fn noisy_text() -> String {
    use Kind::{Battery, Inverter, Meter};
    let sites = [
        ("ste_a", "A", &[Inverter, Inverter, Battery, Meter][..]),
        ("ste_b", "B", &[Inverter, Inverter, Meter][..]),
    ];
    let mut site = TestSite::bare("ste_a", "A")
        .poll_interval_ms(1000)
        .noisy(11);
    for (key, value) in server() {
        site = site.section_key(&["modbus_server"], key, value);
    }
    let mut i = 0;
    for (reference, name, kinds) in sites {
        site = site.site(reference, name);
        for kind in kinds {
            site = site
                .device("sim", &format!("dvc_{i}"), *kind)
                .name(&format!("d{i}"))
                .unit_id(i + 1);
            if *kind != Meter {
                site = site.key("rated_power", kw(8.0));
            }
            i += 1;
        }
    }
    site.text()
}

impl Rig {
    /// The simulator and the agent on `text`; with `float_every`, that
    /// share of the inverters and meters on the float models.
    async fn start(text: &str, float_every: Option<u32>) -> Rig {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = parse(text).expect("the test config is valid");
        config.storage.path = dir.path().join("sitegate.db");
        let mut spec = SimSiteSpec::from_config(&config, 1.0);
        spec.start = Some(SUMMER_MORNING_MS);
        if let (Some(n), Some(noise)) = (float_every, spec.noise.as_mut()) {
            noise.float_every = n;
        }
        let sim = SimSite::start(spec).await.expect("the simulator starts");
        sim.point_config_at_servers(&mut config);
        let server = config.modbus_server.as_ref().expect("a Modbus server");
        let units: Vec<Unit> = server
            .units
            .iter()
            .filter_map(|u| match &u.served {
                Served::Device(id) => {
                    let d = &config.devices[id.index()];
                    Some(Unit {
                        served: u.unit_id,
                        id: *id,
                        bus: d.bus.clone(),
                        unit: d.unit_id,
                    })
                }
                Served::Site(_) => None,
            })
            .collect();
        assert_eq!(units.len(), config.devices.len(), "every device served");
        let agent = Agent::start(config).await.expect("the agent starts");
        let maps = agent.device_maps().clone();
        let ids: Vec<DeviceId> = units.iter().map(|u| u.id).collect();
        wait_for("every device polled once", Duration::from_secs(30), || {
            let (maps, ids) = (maps.clone(), ids.clone());
            async move { ids.iter().all(|id| maps.image(*id).is_some()).then_some(()) }
        })
        .await;
        Rig {
            sim,
            agent,
            units,
            _dir: dir,
        }
    }

    fn port(&self) -> Port {
        let addr = self.agent.modbus_addrs()[0];
        Port::new(
            Transport::Tcp {
                host: addr.ip().to_string(),
                port: addr.port(),
            },
            Duration::from_secs(5),
        )
    }

    async fn stop(self) {
        self.agent.shutdown().await;
        self.sim.shutdown().await;
    }
}

fn holding(addr: u16, len: u16) -> Span {
    Span::new(Table::Holding, addr, len)
}

fn illegal_address<T: std::fmt::Debug>(r: Result<T, ModbusError>) -> bool {
    matches!(
        r,
        Err(ModbusError::Exception(ExceptionCode::IllegalDataAddress))
    )
}

/// The registers of point `p` of `block`.
fn span_of<G: Group, T: Value>(block: &ModelBlock, p: &Point<G, T>) -> Span {
    holding(block.point(p.offset), p.length)
}

/// Walks every mirrored device of `rig` with the project's own client: the
/// chain as the device's, every model read register by register and in
/// spans of at most 125 (each word the same both ways, for the models'
/// unpolled registers), the specific spans of the issue, and 02 outside
/// every model. Returns the registers read in all.
async fn walk_every_device(rig: &Rig) -> usize {
    let mut port = rig.port();
    let mut registers = 0;
    for u in &rig.units {
        let served = &u.served;
        let device = rig.sim.device(&u.bus, u.unit).expect("a simulated device");
        let image = rig.agent.device_maps().image(u.id).expect("a poll");
        let mut r = UnitReader {
            port: &mut port,
            unit: *served,
        };
        let chain = sunspec::discover(&mut r)
            .await
            .unwrap_or_else(|e| panic!("unit {served}: the mirror's chain: {e}"));
        let ids: Vec<u16> = chain.iter().map(|b| b.id).collect();
        assert_eq!(
            ids,
            device.model_ids(),
            "unit {served}: the device's models"
        );
        for b in &chain {
            let whole = u32::from(b.len) + 2;
            let mut spans = Vec::new();
            let mut off = 0u32;
            while off < whole {
                let n = (whole - off).min(125) as u16;
                spans.push(holding(b.addr + off as u16, n));
                off += u32::from(n);
            }
            let mut words = Vec::new();
            for s in &spans {
                let w = r.port.read(*served, *s).await.unwrap_or_else(|e| {
                    panic!("unit {served}: model {} at {} ({s:?}): {e}", b.id, b.addr)
                });
                words.extend(w);
            }
            assert_eq!(&words[..2], [b.id, b.len], "unit {served}: the header");
            // Register by register: every one answers.
            for a in 0..whole as u16 {
                r.port
                    .read(*served, holding(b.addr + a, 1))
                    .await
                    .unwrap_or_else(|e| {
                        panic!("unit {served}: model {} register {}: {e}", b.id, b.addr + a)
                    });
            }
            registers += words.len();
            let dev = device.registers(b.addr, whole as u16);
            check_model(*served, b, &words, &dev, &image);
        }
        // Outside every model: before the marker, past the end marker, far
        // away; and a read that runs past the end marker.
        let last = chain.last().expect("a model");
        let end = last.addr + 2 + last.len;
        for s in [
            holding(39998, 2),
            holding(end + 2, 1),
            holding(100, 2),
            holding(end, 3),
        ] {
            assert!(
                illegal_address(r.port.read(*served, s).await),
                "unit {served}: {s:?} is outside every model"
            );
        }
    }
    port.close().await;
    registers
}

/// What a model's words must hold: the device's strings (read at
/// discovery) in the Common model and its pad, model 123's last two scale
/// factors (sunssf: 0x8000) and its static `WMaxLimPct_SF`, model 124's
/// `InOutWRte_SF`; and in every model, each register the agent never read
/// its point's "not implemented" word (the Common model's `DA` on a device
/// whose discovery did not read it, 0xFFFF).
fn check_model(unit: u8, b: &ModelBlock, words: &[u16], device: &[u16], image: &PollImage) {
    let data = |s: Span| &words[usize::from(s.addr - b.addr)..usize::from(s.end() as u16 - b.addr)];
    let dev = |s: Span| &device[usize::from(s.addr - b.addr)..usize::from(s.end() as u16 - b.addr)];
    match b.id {
        1 => {
            for p in [&Model1::MN, &Model1::MD, &Model1::SN] {
                let s = span_of(b, p);
                assert_eq!(data(s), dev(s), "unit {unit}: the Common model's strings");
            }
            if b.len >= 66 {
                // The pad after DA (the crate's model 1 has none).
                assert_eq!(words[2 + 65], 0, "unit {unit}: the pad");
            }
        }
        123 => {
            let sfs = [
                span_of(b, &Model123::OUT_PF_SET_SF),
                span_of(b, &Model123::V_AR_PCT_SF),
            ];
            for s in sfs {
                assert_eq!(data(s), [0x8000], "unit {unit}: 123's {s:?}, sunssf");
            }
            // The limit steering writes is as the device has it.
            let lim = span_of(b, &Model123::W_MAX_LIM_PCT_SF);
            assert_eq!(
                data(lim),
                dev(lim),
                "unit {unit}: WMaxLimPct_SF, a static point"
            );
        }
        124 => {
            let sf = span_of(b, &Model124::IN_OUT_W_RTE_SF);
            assert_eq!(
                data(sf),
                dev(sf),
                "unit {unit}: InOutWRte_SF, a static point"
            );
        }
        _ => {}
    }
    // Every register the poll never read holds its point's "not
    // implemented" word; the others a word of the device's (which moves:
    // not compared).
    let first = b.addr + 2;
    let read = |o: u16| image.get(Table::Holding, first + o, 1).map(|w| w[0]);
    let ni = unimplemented::words(b, &read);
    assert_eq!(
        ni.len(),
        usize::from(b.len),
        "unit {unit}: model {} laid out",
        b.id
    );
    let unread: Vec<u16> = (0..b.len).filter(|&o| read(o).is_none()).collect();
    for &o in &unread {
        assert_eq!(
            words[usize::from(o) + 2],
            ni[usize::from(o)],
            "unit {unit}: model {} register {} (data offset {o}), never read",
            b.id,
            first + o
        );
    }
    assert!(
        b.id == 1 || unread.len() < usize::from(b.len),
        "unit {unit}: model {} has registers the poll read",
        b.id
    );
}

/// The mean time of a read of model 123 whole (filled out: the poll reads
/// 6 of its 26 registers) and of model 103 whole (polled), on the first
/// inverter, over loopback, `n` reads each.
async fn read_times(rig: &Rig, n: u32) -> (Duration, Duration) {
    let mut port = rig.port();
    let unit = rig.units[0].served;
    let chain = sunspec::discover(&mut UnitReader {
        port: &mut port,
        unit,
    })
    .await
    .expect("the chain");
    let whole = |id: u16| {
        let b = chain.iter().find(|b| b.id == id).expect("the model");
        holding(b.addr, b.len + 2)
    };
    let mut times = Vec::new();
    for s in [whole(123), whole(103)] {
        let t = tokio::time::Instant::now();
        for _ in 0..n {
            port.read(unit, s).await.expect("a whole model");
        }
        times.push(t.elapsed() / n);
    }
    port.close().await;
    (times[0], times[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_model_of_every_mirrored_device_reads_whole_and_register_by_register() {
    let started = tokio::time::Instant::now();
    let demo = Rig::start(&demo_text(), None).await;
    let n = walk_every_device(&demo).await;
    assert!(n > 5 * 68, "{n} registers");
    let (filled, polled) = read_times(&demo, 500).await;
    #[allow(clippy::print_stderr, reason = "what a filled-out read costs")]
    {
        eprintln!("modbus_server_models: model 123 whole (filled) {filled:?} a read, 103 whole (polled) {polled:?}");
    }
    demo.stop().await;
    let noisy = Rig::start(&noisy_text(), Some(2)).await;
    let m = walk_every_device(&noisy).await;
    assert!(m > 7 * 68, "{m} registers");
    noisy.stop().await;
    #[allow(clippy::print_stderr, reason = "the test says what it read")]
    {
        eprintln!(
            "modbus_server_models: {n} + {m} registers walked in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
}

/// python3 with pysunspec2, or a skip notice (a failure with
/// `SITEGATE_REQUIRE_PYSUNSPEC=1`).
fn pysunspec() -> Option<PathBuf> {
    let ok = Command::new("python3")
        .args(["-c", "import sunspec2"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            !crate::common::required("PYSUNSPEC"),
            "SITEGATE_REQUIRE_PYSUNSPEC=1 but python3 cannot import sunspec2 (pip install pysunspec2)"
        );
        #[allow(clippy::print_stderr, reason = "a test run should say what it skipped")]
        {
            eprintln!("pysunspec2 not installed: a modbus_server_models test is skipped");
        }
        return None;
    }
    Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py"))
}

/// pysunspec2's walk of every unit of `rig`: (unit, models read as
/// `[id, addr, L, implemented points, errors]`).
async fn pysunspec_walk(py: &Path, rig: &Rig) -> Vec<(u8, Vec<serde_json::Value>)> {
    let addr = rig.agent.modbus_addrs()[0];
    let mut args = vec![
        py.join("walk_sunspec.py").display().to_string(),
        addr.ip().to_string(),
        addr.port().to_string(),
    ];
    args.extend(rig.units.iter().map(|u| u.served.to_string()));
    let out = tokio::task::spawn_blocking(move || Command::new("python3").args(&args).output())
        .await
        .expect("the walk's thread")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut walked = Vec::new();
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let unit = v["unit"].as_u64().expect("a unit") as u8;
        assert!(
            v.get("exception").is_none(),
            "pysunspec2 on unit {unit}: {}",
            v["exception"]
        );
        let models = v["models"].as_array().expect("models").clone();
        let read: Vec<String> = models
            .iter()
            .map(|m| format!("{}: {}", m[0], m[3]))
            .collect();
        #[allow(clippy::print_stderr, reason = "what pysunspec2 read")]
        {
            eprintln!("pysunspec2, unit {unit}: implemented points by model {read:?}");
        }
        walked.push((unit, models));
    }
    assert!(
        out.status.success(),
        "walk_sunspec.py: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    walked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pysunspec2_scans_and_reads_every_model_of_every_mirrored_device() {
    let Some(py) = pysunspec() else {
        return;
    };
    let started = tokio::time::Instant::now();
    for (text, floats) in [(demo_text(), None), (noisy_text(), Some(2))] {
        let rig = Rig::start(&text, floats).await;
        let walked = pysunspec_walk(&py, &rig).await;
        assert_eq!(walked.len(), rig.units.len(), "one line a unit");
        for ((unit, models), u) in walked.iter().zip(&rig.units) {
            assert_eq!(*unit, u.served);
            let device = rig.sim.device(&u.bus, u.unit).expect("a device");
            let ids: Vec<u64> = models.iter().map(|m| m[0].as_u64().unwrap_or(0)).collect();
            let want: Vec<u64> = device.model_ids().into_iter().map(u64::from).collect();
            assert_eq!(
                ids, want,
                "unit {unit}: pysunspec2 found the device's models"
            );
            for m in models {
                assert!(
                    m[3].as_u64().unwrap_or(0) > 0,
                    "unit {unit}: model {} has implemented points: {m}",
                    m[0]
                );
                if m[4] != "" {
                    #[allow(clippy::print_stderr, reason = "what pysunspec2 noted")]
                    {
                        eprintln!("pysunspec2, unit {unit}, model {}: {}", m[0], m[4]);
                    }
                }
            }
        }
        rig.stop().await;
    }
    #[allow(clippy::print_stderr, reason = "the test says how long the walks took")]
    {
        eprintln!(
            "modbus_server_models: pysunspec2 walked both sites in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn the_layout_table_is_what_pysunspec2s_definitions_say() {
    let Some(py) = pysunspec() else {
        return;
    };
    let out = Command::new("python3")
        .arg(py.join("sunspec_layouts.py"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/modbus/sunspec/unimplemented/table.rs"),
    )
    .expect("the table");
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "src/modbus/sunspec/unimplemented/table.rs differs from the definitions: \
         python3 tests/py/sunspec_layouts.py > src/modbus/sunspec/unimplemented/table.rs"
    );
}
