//! The Modbus server as an RTU slave on a serial line, over a pseudo-terminal
//! pair: the agent opens the pty's slave end as its `[modbus_server] serial`
//! line, the test plays the RTU master on the other end. A mirror read
//! answers the device's registers, the site device answers, a frame with a
//! bad CRC gets no answer and is counted, and so do a frame for a unit id
//! the server does not serve and a broadcast. A request that arrives in
//! pieces is answered, and so is one that follows another slave's answer
//! without a silence.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_serial::{SerialPort, SerialStream};

use crate::common::site::{start, SmallSite, SUMMER_MORNING_MS};
use crate::modbus_server::server_site;
use crate::steering_support::table;
use sitegate::modbus::rtu::frame::{answer_len, crc16, seal};

/// The RTU master on the pty's master end.
struct Master {
    port: SerialStream,
}

impl Master {
    /// Sends `frame` as it is (with whatever CRC it carries).
    async fn send(&mut self, frame: &[u8]) {
        self.port.write_all(frame).await.expect("send");
        self.port.flush().await.expect("flush");
    }

    /// The next answer frame, its CRC checked: unit, PDU.
    async fn answer(&mut self) -> (u8, Vec<u8>) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        let read = async {
            loop {
                if let Some(n) = answer_len(&buf) {
                    if buf.len() >= n {
                        return buf[..n].to_vec();
                    }
                }
                let n = self.port.read(&mut chunk).await.expect("read");
                buf.extend_from_slice(&chunk[..n]);
            }
        };
        let frame = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("an answer within 10 s");
        let (body, crc) = frame.split_at(frame.len() - 2);
        assert_eq!(
            u16::from_le_bytes([crc[0], crc[1]]),
            crc16(body),
            "the answer's CRC checks: {frame:02x?}"
        );
        (body[0], body[1..].to_vec())
    }

    /// Reads holding registers: the words, or the exception code.
    async fn read(&mut self, unit: u8, addr: u16, count: u16) -> Result<Vec<u16>, u8> {
        self.send(&read_frame(unit, addr, count)).await;
        let (from, pdu) = self.answer().await;
        assert_eq!(from, unit, "the answer comes from the unit asked");
        if pdu[0] & 0x80 != 0 {
            assert_eq!(pdu[0], 0x83);
            return Err(pdu[1]);
        }
        assert_eq!(usize::from(pdu[1]), 2 * usize::from(count), "{pdu:02x?}");
        Ok(pdu[2..]
            .chunks(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]))
            .collect())
    }

    /// Reads until the unit answers (its first poll, its map built).
    async fn until(&mut self, unit: u8, addr: u16, count: u16) -> Vec<u16> {
        for _ in 0..100 {
            if let Ok(words) = self.read(unit, addr, count).await {
                return words;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("unit {unit} did not answer {count} registers at {addr} within 10 s");
    }
}

fn read_frame(unit: u8, addr: u16, count: u16) -> Vec<u8> {
    let mut b = vec![unit, 3];
    b.extend_from_slice(&addr.to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    seal(b)
}

/// `sitegate_modbus_server_rtu_frames_total{result}`.
async fn frames(site: &SmallSite, result: &str) -> f64 {
    site.scrape()
        .await
        .samples
        .get(&format!(
            "sitegate_modbus_server_rtu_frames_total{{result=\"{result}\"}}"
        ))
        .copied()
        .unwrap_or(0.0)
}

/// Waits until the server has counted `n` frames of `result` (it has taken
/// the line's silence as the frame's end, and dropped it).
async fn counted(site: &SmallSite, result: &str, n: f64) {
    crate::common::wait_for(result, Duration::from_secs(10), || async {
        (frames(site, result).await == n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rtu_master_reads_the_mirror_and_the_site_and_bad_frames_get_no_answer() {
    let (port, slave) = SerialStream::pair().expect("pty pair");
    let path = slave.name().expect("pty slave path");
    let text = server_site()
        .modbus_server_key(
            "serial",
            table([
                ("path", path.into()),
                ("baud", 19_200.into()),
                ("parity", "none".into()),
                ("stop_bits", 1.into()),
            ]),
        )
        .text();
    let site = start(&text, 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let mut m = Master { port };
    let pv = site.sim.device("pv", 1).expect("the PV inverter");

    // The inverter's mirror: marker and Common model as the device has them;
    // a write is refused as over TCP (01).
    let head = m.until(1, 40000, 70).await;
    assert_eq!(head, pv.registers(40000, 70));
    m.send(&seal(vec![1, 6, 0x9C, 0x40, 0, 1])).await;
    assert_eq!(m.answer().await, (1, vec![0x86, 0x01]));

    // The site device (unit 200): the SunSpec marker and the Common model's
    // header.
    assert_eq!(m.until(200, 40000, 2).await, vec![0x5375, 0x6E53]);
    assert_eq!(m.read(200, 40002, 2).await, Ok(vec![1, 66]));

    // A frame with a bad CRC: dropped and counted, no answer (the next
    // answer on the line is the next request's).
    let grid = site.sim.device("grid", 1).expect("the meter");
    let mut bad = read_frame(1, 40000, 2);
    let last = bad.len() - 1;
    bad[last] ^= 0xFF;
    m.send(&bad).await;
    counted(&site, "bad_crc", 1.0).await;
    assert_eq!(m.read(3, 40000, 4).await, Ok(grid.registers(40000, 4)));

    // A unit id the server does not serve: left to that slave.
    m.send(&read_frame(77, 40000, 2)).await;
    counted(&site, "other_unit", 1.0).await;
    // A broadcast write: neither done nor answered.
    m.send(&seal(vec![0, 6, 0x9C, 0x40, 0, 1])).await;
    counted(&site, "broadcast", 1.0).await;
    let bat = m.read(2, 40000, 2).await.expect("the battery's mirror");
    assert_eq!(bat, vec![0x5375, 0x6E53]);

    // A request in two pieces 10 ms apart, as a USB adapter may hand it on
    // (a silence of 19 characters at 19,200 baud, 8N1, inside the frame):
    // answered. The server waits `PIECES_WAIT` (40 ms) for a rest; the
    // margin is for this test's own sleep on a loaded machine.
    let request = read_frame(3, 40000, 4);
    m.send(&request[..3]).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    m.send(&request[3..]).await;
    let (from, pdu) = m.answer().await;
    assert_eq!((from, pdu[0], pdu[1]), (3, 3, 8), "{pdu:02x?}");
    // Another slave's answer, then at once the master's next request: the
    // request is found after it and answered; the answer before it is
    // counted with the frames that did not check.
    let mut line = seal(vec![77, 3, 2, 0, 5]);
    line.extend_from_slice(&read_frame(3, 40000, 4));
    m.send(&line).await;
    let (from, pdu) = m.answer().await;
    assert_eq!((from, pdu[0], pdu[1]), (3, 3, 8), "{pdu:02x?}");
    counted(&site, "bad_crc", 2.0).await;

    let answered = frames(&site, "answered").await;
    assert!(answered >= 6.0, "{answered}");
    let s = site.scrape().await;
    assert!(crate::modbus_server::requests(&s, "ok") >= 5.0);
    drop(slave);
    site.stop().await;
}
