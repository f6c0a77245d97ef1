//! The Modbus server on real sockets, with the simulator as the devices:
//! mirror reads answer the last poll's registers without a request to the
//! device, writes are refused, registers the agent does not poll are refused
//! with 02, bad requests each get their exception (and bad headers a closed
//! connection), all counted on `/metrics`; forwarded writes are records of
//! the site's steering history.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::prom::Scrape;
use crate::common::site::{start, SmallSite, SUMMER_MORNING_MS};
use crate::steering_support::TestSite;

/// The small site without grid limits (nothing to steer), with the PV
/// inverter polled once a minute (so a test sees
/// exactly one poll), each device a unit id of its own on the server, a
/// one-second idle timeout and a request rate no test reaches.
pub fn server_site() -> TestSite {
    TestSite::small_own_units()
        .no_grid_limits()
        .key_of("dvc_pv", "poll_interval_ms", 60_000)
        .modbus_server_key("listen", vec!["127.0.0.1:0"])
        .modbus_server_key("idle_timeout_s", 1)
        .modbus_server_key("requests_per_s", 10_000)
        .modbus_server_key("burst", 1000)
}

/// A Modbus TCP client speaking raw frames.
pub struct Client {
    stream: TcpStream,
    transaction: u16,
}

impl Client {
    pub async fn connect(site: &SmallSite) -> Client {
        Client::connect_to(site.agent.modbus_addrs()[0]).await
    }

    pub async fn connect_to(addr: std::net::SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.expect("connect"),
            transaction: 0,
        }
    }

    /// The client's own address, as the server sees it.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.stream.local_addr().expect("a connected socket")
    }

    /// Sends `bytes` as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("send");
    }

    /// Sends a PDU to `unit`; returns the answer's PDU, `None` when the
    /// server closed the connection.
    pub async fn call(&mut self, unit: u8, pdu: &[u8]) -> Option<Vec<u8>> {
        self.transaction = self.transaction.wrapping_add(1);
        let mut f = self.transaction.to_be_bytes().to_vec();
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&((pdu.len() + 1) as u16).to_be_bytes());
        f.push(unit);
        f.extend_from_slice(pdu);
        self.send_raw(&f).await;
        let answer = self.answer().await?;
        assert_eq!(
            answer.0, self.transaction,
            "the answer carries the request's transaction"
        );
        assert_eq!(answer.1, unit, "the answer carries the request's unit");
        Some(answer.2)
    }

    /// The next answer: transaction, unit, PDU; `None` at end of stream.
    pub async fn answer(&mut self) -> Option<(u16, u8, Vec<u8>)> {
        let mut head = [0u8; 7];
        let read = tokio::time::timeout(Duration::from_secs(10), self.stream.read_exact(&mut head))
            .await
            .expect("an answer or a close within 10 s");
        read.ok()?;
        let len = u16::from_be_bytes([head[4], head[5]]) as usize;
        let mut pdu = vec![0u8; len - 1];
        self.stream.read_exact(&mut pdu).await.ok()?;
        Some((u16::from_be_bytes([head[0], head[1]]), head[6], pdu))
    }

    /// Holding registers once the unit answers them (its first poll done).
    pub async fn until(&mut self, unit: u8, addr: u16, count: u16) -> Vec<u16> {
        for _ in 0..100 {
            if let Ok(words) = self.read(unit, addr, count).await {
                return words;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("unit {unit} did not answer {count} registers at {addr} within 10 s");
    }

    /// Holding registers, or the exception code.
    pub async fn read(&mut self, unit: u8, addr: u16, count: u16) -> Result<Vec<u16>, u8> {
        self.read_fn(unit, 3, addr, count).await
    }

    pub async fn read_fn(
        &mut self,
        unit: u8,
        function: u8,
        addr: u16,
        count: u16,
    ) -> Result<Vec<u16>, u8> {
        let mut pdu = vec![function];
        pdu.extend_from_slice(&addr.to_be_bytes());
        pdu.extend_from_slice(&count.to_be_bytes());
        let a = self
            .call(unit, &pdu)
            .await
            .expect("the connection stays open");
        if a[0] == function | 0x80 {
            return Err(a[1]);
        }
        assert_eq!(a[0], function);
        assert_eq!(usize::from(a[1]), 2 * usize::from(count));
        Ok(a[2..]
            .chunks(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]))
            .collect())
    }

    /// Writes registers (function 16, or 6 for one); `Err` the exception.
    pub async fn write(&mut self, unit: u8, addr: u16, values: &[u16]) -> Result<(), u8> {
        let mut pdu = if values.len() == 1 {
            vec![6]
        } else {
            vec![0x10]
        };
        pdu.extend_from_slice(&addr.to_be_bytes());
        if values.len() != 1 {
            pdu.extend_from_slice(&(values.len() as u16).to_be_bytes());
            pdu.push((2 * values.len()) as u8);
        }
        for v in values {
            pdu.extend_from_slice(&v.to_be_bytes());
        }
        let a = self
            .call(unit, &pdu)
            .await
            .expect("the connection stays open");
        if a[0] & 0x80 != 0 {
            return Err(a[1]);
        }
        Ok(())
    }

    /// True once the server has closed the connection.
    pub async fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(10), self.stream.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

/// The demo site polled every `interval_ms` (`steering_support::demo_site`),
/// each device under a unit id of its own on the server: the PV inverters 11
/// and 12, the batteries 13 and 14, the grid meter 15.
pub fn demo_site_own_units(interval_ms: u64) -> String {
    own_units(crate::steering_support::demo_site(interval_ms))
}

/// The demo's five devices in `config` (the demo's references), each given
/// its own unit id on the server, 11 to 15.
pub fn own_units(mut config: String) -> String {
    for (r, u) in [
        ("dvc_pv_east", 11),
        ("dvc_pv_west", 12),
        ("dvc_bat_a", 13),
        ("dvc_bat_b", 14),
        ("dvc_grid", 15),
    ] {
        let at = format!("reference = \"{r}\"\n");
        assert!(config.contains(&at), "the config has {r}");
        config = config.replacen(&at, &format!("{at}modbus_server_unit_id = {u}\n"), 1);
    }
    config
}

pub fn requests(s: &Scrape, result: &str) -> f64 {
    s.samples
        .get(&format!(
            "sitegate_modbus_server_requests_total{{result=\"{result}\"}}"
        ))
        .copied()
        .unwrap_or(0.0)
}

/// A SunSpec `int16` scaled by a scale-factor word.
fn scaled(raw: u16, sf: u16) -> f64 {
    f64::from(raw as i16) * 10f64.powi(i32::from(sf as i16))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_reads_answer_the_last_poll_without_asking_the_device() {
    let site = start(&server_site().text(), 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut c = Client::connect(&site).await;
    let pv = site.sim.device("pv", 1).expect("the PV inverter");

    // The SunSpec map at 40000 as the device's own: marker, Common model.
    let head = c.until(1, 40000, 70).await;
    assert_eq!(
        head,
        pv.registers(40000, 70),
        "marker and Common model as the device has them"
    );

    // Walk the mirror's chain to the end marker: the device's own models.
    let mut at = 40002u16;
    let mut models = Vec::new();
    loop {
        let h = c.read(1, at, 2).await.expect("a model header");
        if h[0] == 0xFFFF {
            break;
        }
        models.push((h[0], at, h[1]));
        at += 2 + h[1];
    }
    let ids: Vec<u16> = models.iter().map(|m| m.0).collect();
    assert_eq!(ids, pv.model_ids(), "the mirror walks as the device does");

    // The measurement model's power, as the last poll read it: what the API shows.
    let (_, _, len) = *models.iter().find(|m| m.0 == 103).expect("model 103");
    let m103 = models.iter().find(|m| m.0 == 103).unwrap().1 + 2;
    let block = c.read(1, m103, len).await.expect("model 103 is polled");
    let (_, api_w) = site
        .latest("dvc_pv", "activePower")
        .await
        .expect("a PV power");
    // W at offset 12, W_SF at 13 (SunSpec model 103).
    let w = scaled(block[12], block[13]);
    assert!(
        (w - api_w).abs() <= 1e-9 * api_w.abs().max(1.0),
        "the mirror's W ({w}) is the poll's ({api_w})"
    );

    // A burst of mirror reads costs the device no request: the inverter is
    // polled once a minute, and its server counts nothing more meanwhile.
    let before = site.sim.request_count("pv").expect("pv server");
    for _ in 0..200 {
        c.read(1, m103, len).await.expect("a mirror read");
        c.read_fn(1, 3, 40000, 125).await.expect("a mirror read");
    }
    assert_eq!(
        site.sim.request_count("pv"),
        Some(before),
        "no request reached the device"
    );

    // Writes are refused (01, illegal function); nothing reaches the device.
    let writes = pv.write_count();
    assert_eq!(c.write(1, m103, &[1]).await, Err(0x01));
    assert_eq!(c.write(1, m103, &[1, 2]).await, Err(0x01));
    assert_eq!(pv.write_count(), writes);
    // A register the agent does not poll: 02. Input registers of a SunSpec
    // device: not polled either.
    assert_eq!(c.read(1, 100, 2).await, Err(0x02));
    assert_eq!(c.read_fn(1, 4, 40000, 2).await, Err(0x02));
    assert_eq!(site.sim.request_count("pv"), Some(before));

    // The other devices under the unit ids configured for them.
    let grid = site.sim.device("grid", 1).expect("the meter");
    let marker = c.read(3, 40000, 4).await.expect("the meter's mirror");
    assert_eq!(marker, grid.registers(40000, 4));
    c.read(2, 40000, 2).await.expect("the battery's mirror");

    let s = site.scrape().await;
    assert!(requests(&s, "ok") >= 405.0, "{:?}", requests(&s, "ok"));
    assert_eq!(requests(&s, "illegal_function"), 2.0);
    assert_eq!(requests(&s, "illegal_data_address"), 2.0);
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_their_exception_and_bad_frames_a_closed_connection() {
    let site = start(&server_site().text(), 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut c = Client::connect(&site).await;
    c.until(1, 40000, 2).await;

    // An unknown function: 01.
    assert_eq!(c.call(1, &[0x2b, 0x0e, 1, 0]).await, Some(vec![0xab, 0x01]));
    assert_eq!(c.call(1, &[0x01, 0, 0, 0, 1]).await, Some(vec![0x81, 0x01]));
    // More than 125 registers, none, or a short request: 03.
    assert_eq!(c.read(1, 40000, 126).await, Err(0x03));
    assert_eq!(
        c.call(1, &[3, 0x9c, 0x40, 0, 0]).await,
        Some(vec![0x83, 0x03])
    );
    assert_eq!(c.call(1, &[3, 0x9c, 0x40]).await, Some(vec![0x83, 0x03]));
    // Past the last register: 02.
    assert_eq!(c.read(1, 0xFFFF, 2).await, Err(0x02));
    // A unit id nobody answers for: 0x0B, gateway target failed to respond.
    assert_eq!(c.read(99, 40000, 2).await, Err(0x0B));
    assert_eq!(c.call(99, &[0x2b]).await, Some(vec![0xab, 0x0B]));
    // Still served after all of them.
    c.read(1, 40000, 2).await.expect("the connection serves on");

    // A protocol id that is not Modbus: closed.
    c.send_raw(&[0, 1, 0, 7, 0, 6, 1, 3, 0x9c, 0x40, 0, 1])
        .await;
    assert!(
        c.closed().await,
        "a foreign protocol id closes the connection"
    );
    // A length below 2: closed.
    let mut c = Client::connect(&site).await;
    c.send_raw(&[0, 1, 0, 0, 0, 1, 1]).await;
    assert!(c.closed().await, "a length of 1 closes the connection");
    // A client that says nothing for the idle timeout (1 s): closed.
    let mut c = Client::connect(&site).await;
    assert!(c.closed().await, "a silent client is closed");
    // One that starts a frame and never ends it: closed as well.
    let mut c = Client::connect(&site).await;
    c.send_raw(&[0, 1, 0, 0, 0, 6, 1, 3]).await;
    assert!(c.closed().await, "a trickling client is closed");

    let s = site.scrape().await;
    assert_eq!(requests(&s, "illegal_function"), 2.0);
    assert_eq!(requests(&s, "illegal_data_value"), 3.0);
    assert_eq!(requests(&s, "illegal_data_address"), 1.0);
    assert_eq!(requests(&s, "gateway_target_failed"), 2.0);
    let closed = |reason: &str| {
        s.samples
            .get(&format!(
                "sitegate_modbus_server_closed_total{{reason=\"{reason}\"}}"
            ))
            .copied()
    };
    assert_eq!(closed("malformed"), Some(2.0));
    assert_eq!(closed("idle"), Some(2.0));
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_outside_the_allowed_ranges_and_past_the_bounds_are_closed() {
    let text = server_site()
        .modbus_server_key("allow", vec!["10.0.0.0/8"])
        .text();
    let site = start(&text, 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut c = Client::connect(&site).await;
    c.send_raw(&[0, 1, 0, 0, 0, 6, 1, 3, 0x9c, 0x40, 0, 1])
        .await;
    assert!(c.closed().await, "loopback is not in 10.0.0.0/8");
    let s = site.scrape().await;
    assert_eq!(
        s.samples
            .get("sitegate_modbus_server_connections_total{result=\"refused_address\"}")
            .copied(),
        Some(1.0)
    );
    assert_eq!(requests(&s, "ok"), 0.0);
    site.stop().await;

    // Two connections per client at most, and 5 requests a second (burst 5).
    let text = server_site()
        .modbus_server_key("max_connections_per_client", 2)
        .modbus_server_key("requests_per_s", 5)
        .modbus_server_key("burst", 5)
        .text();
    let site = start(&text, 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut a = Client::connect(&site).await;
    let _b = Client::connect(&site).await;
    a.until(1, 40000, 2).await;
    let mut third = Client::connect(&site).await;
    assert!(
        third.closed().await,
        "a third connection from one address is closed"
    );
    let mut busy = 0;
    for _ in 0..20 {
        if a.read(1, 40000, 2).await == Err(0x06) {
            busy += 1;
        }
    }
    assert!(
        busy >= 10,
        "past the burst, requests are answered 06: {busy} of 20"
    );
    let s = site.scrape().await;
    assert_eq!(requests(&s, "server_busy"), f64::from(busy));
    assert_eq!(
        s.samples
            .get("sitegate_modbus_server_connections_total{result=\"refused_per_client\"}")
            .copied(),
        Some(1.0)
    );
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_reads_reach_the_device_once_and_are_bounded_per_client() {
    let text = server_site()
        .key_of("dvc_pv", "modbus_server_forward_reads", true)
        .text();
    let site = start(&text, 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut c = Client::connect(&site).await;
    c.until(1, 40000, 2).await;

    // Input registers are not polled: read from the device, once.
    let before = site.sim.request_count("pv").expect("pv server");
    assert_eq!(c.read_fn(1, 4, 40000, 2).await, Ok(vec![0x5375, 0x6E53]));
    assert_eq!(site.sim.request_count("pv"), Some(before + 1));
    // The same read again within the cache time: from the cache.
    assert_eq!(c.read_fn(1, 4, 40000, 2).await, Ok(vec![0x5375, 0x6E53]));
    assert_eq!(site.sim.request_count("pv"), Some(before + 1));
    // The device's own refusal is passed on.
    assert_eq!(c.read_fn(1, 4, 60000, 2).await, Err(0x02));
    assert_eq!(site.sim.request_count("pv"), Some(before + 2));
    // A device without forwarding: 02, and its server hears nothing.
    let grid_before = site.sim.request_count("grid").expect("grid server");
    assert_eq!(c.read_fn(3, 4, 40000, 2).await, Err(0x02));
    let grid_after = site.sim.request_count("grid").expect("grid server");
    // (the meter is polled every 200 ms meanwhile: at most a poll's requests)
    assert!(
        grid_after - grid_before <= 2,
        "{grid_before} -> {grid_after}"
    );

    // One forwarded read per client address at a time: while one waits on
    // a device that does not answer, another gets 06.
    assert!(site.sim.hold_reads("pv", true));
    let addr = site.agent.modbus_addrs()[0];
    let mut refused = false;
    for n in 0..20u16 {
        let held = tokio::spawn(async move {
            let mut a = Client::connect_to(addr).await;
            a.read_fn(1, 4, 40010 + n, 1).await
        });
        // A head start on the real sockets, for the held read to be forwarded to the
        // held pv server (this address's one forwarded read) before the next one
        // comes; on a loaded machine it may not be yet, hence the tries.
        tokio::time::sleep(Duration::from_millis(50)).await;
        if c.read_fn(1, 4, 40100 + n, 1).await == Err(0x06) {
            refused = true;
        }
        // The held read ends with the bus's timeout: 0x0B.
        assert_eq!(held.await.expect("the held read"), Err(0x0B));
        if refused {
            break;
        }
    }
    assert!(
        refused,
        "a second forwarded read of one client was not refused"
    );
    site.sim.hold_reads("pv", false);

    let s = site.scrape().await;
    let forwarded = |result: &str| {
        s.samples
            .get(&format!(
                "sitegate_modbus_server_forwarded_reads_total{{result=\"{result}\"}}"
            ))
            .copied()
            .unwrap_or(0.0)
    };
    assert_eq!(forwarded("device"), 1.0);
    assert_eq!(forwarded("cached"), 1.0);
    assert!(forwarded("busy") >= 1.0);
    assert!(forwarded("failed") >= 2.0);
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_writes_reach_the_device_but_never_what_steering_writes() {
    use sunspec::models::model121::Model121;
    let text = server_site()
        .key_of("dvc_pv", "modbus_server_forward_writes", true)
        .text();
    let site = start(&text, 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut c = Client::connect(&site).await;
    c.until(1, 40000, 2).await;
    let pv = site.sim.device("pv", 1).expect("the PV inverter");
    let mut at = 40002u16;
    let mut blocks = std::collections::HashMap::new();
    loop {
        let h = c.read(1, at, 2).await.expect("a model header");
        if h[0] == 0xFFFF {
            break;
        }
        blocks.insert(h[0], at);
        at += 2 + h[1];
    }

    // Model 123 is steering's: refused (02), nothing reaches the device.
    let writes = pv.write_count().0;
    let m123 = blocks[&123];
    assert_eq!(c.write(1, m123 + 5, &[5000]).await, Err(0x02));
    assert_eq!(
        c.write(1, m123 - 1, &[0, 0]).await,
        Err(0x02),
        "a range into it"
    );
    assert_eq!(pv.write_count().0, writes);

    // Model 121's WMax, written as it is: taken by the device.
    let wmax = blocks[&121] + 2 + Model121::W_MAX.offset;
    let now = pv.registers(wmax, 1);
    assert_eq!(c.write(1, wmax, &now).await, Ok(()));
    assert_eq!(pv.write_count().0, writes + 1);
    // A read-only register: the device's own refusal (02) comes back.
    assert_eq!(c.write(1, 40004, &[0x4142]).await, Err(0x02));
    assert_eq!(pv.write_count().0, writes + 2);
    // A device without forwarded writes: 01, as by default.
    assert_eq!(c.write(3, 40004, &[0x4142]).await, Err(0x01));

    let s = site.scrape().await;
    let forwarded = |result: &str| {
        s.samples
            .get(&format!(
                "sitegate_modbus_server_forwarded_writes_total{{result=\"{result}\"}}"
            ))
            .copied()
    };
    assert_eq!(forwarded("device"), Some(1.0));
    assert_eq!(forwarded("failed"), Some(1.0));
    assert_eq!(forwarded("steered"), Some(2.0));

    // One history record per write to the device, whatever its result; none
    // for the device that forwards nothing. Oldest first.
    let doc = crate::openapi_support::document();
    let mut checker = crate::openapi_support::client::Checker::new(&doc, &site.base);
    let mut records = Vec::new();
    for _ in 0..100 {
        let all = checker
            .get(
                "/sites/ste_test/steering/history?limit=100",
                Some(crate::common::site::READ_TOKEN),
                200,
            )
            .await;
        records = all
            .as_array()
            .expect("a list")
            .iter()
            .filter(|r| r["type"] == "forwardedWrite")
            .cloned()
            .collect();
        if records.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    records.reverse();
    let seen: Vec<_> = records
        .iter()
        .map(|r| {
            assert_eq!(r["source"], "modbus");
            assert_eq!(r["client"], c.local_addr().to_string());
            assert_eq!(r["deviceReference"], "dvc_pv");
            (
                r["register"].as_u64().expect("a register") as u16,
                r["values"].clone(),
                r["result"].as_str().expect("a result").to_string(),
                r["exception"].clone(),
            )
        })
        .collect();
    let e = |code: u8| serde_json::json!(code);
    assert_eq!(
        seen,
        vec![
            (m123 + 5, serde_json::json!([5000]), "steered".into(), e(2)),
            (m123 - 1, serde_json::json!([0, 0]), "steered".into(), e(2)),
            (
                wmax,
                serde_json::json!(now),
                "ok".into(),
                serde_json::Value::Null
            ),
            (40004, serde_json::json!([0x4142]), "failed".into(), e(2)),
        ]
    );
    let times: Vec<i64> = records
        .iter()
        .map(|r| r["time"].as_i64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    site.stop().await;
}
