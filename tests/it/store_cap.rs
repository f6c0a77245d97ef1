//! The size cap holds at scale: 1,000 noisy devices (13 properties each,
//! 1 Hz, a fifth on float registers) under the least `max_size_mb` such a
//! site may have (`config/size_floor.rs`: 27), driven faster than real
//! time. Neither the pages in use nor the file ever pass the cap, through
//! every compaction and the deletions around them, and a 1 s series of the
//! last five minutes stays complete throughout.

use crate::store_support::noisy::NoisySite;
use crate::store_support::{config, T0};
use sitegate::model::Property;
use sitegate::store::{sample_counts, Aggregation, SeriesQuery, StoreError, StoreHandle};

const DEVICES: usize = 1000;
/// The floor `check-config` gives a site of 1,000 devices at 1 Hz.
const CAP_MB: u64 = 27;
const SECONDS: i64 = 600;
/// How often the last five minutes are checked, in simulated seconds.
const CHECK_EVERY_S: i64 = 10;

async fn last_five_minutes(store: &StoreHandle, device: &str, s: i64) -> usize {
    let q = SeriesQuery {
        property: Property::ActivePower,
        start_ms: T0 + (s - 299) * 1000,
        end_ms: T0 + (s + 1) * 1000,
        width_ms: 1000,
        aggregation: Aggregation::Last,
    };
    store.time_series(device, q).await.expect("query").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_cap_holds_at_1000_devices_and_keeps_the_last_five_minutes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = sitegate::config::StorageConfig {
        max_size_mb: CAP_MB,
        ..config(dir.path())
    };
    let cap = CAP_MB << 20;
    let refs: Vec<String> = (0..DEVICES).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&cfg, refs).expect("store opens");
    let tx = store.sample_sender();
    let mut site = NoisySite::new(DEVICES, 16, T0);
    let mut most = 0u64;
    let mut most_file = 0u64;
    for s in 0..SECONDS {
        tx.send(site.second(s)).await.expect("send");
        store.flush().await.expect("flush");
        let used = store.used_bytes().await.expect("used");
        most = most.max(used);
        let file = std::fs::metadata(&cfg.path).expect("file").len();
        most_file = most_file.max(file);
        assert!(
            used <= cap && file <= cap,
            "second {s}: {used} bytes in use, a file of {file} bytes, under a cap of {cap}"
        );
        if s >= 299 && (s + 1) % CHECK_EVERY_S == 0 {
            // An integer device and a float one.
            for device in ["dvc_3", "dvc_4"] {
                let n = last_five_minutes(&store, device, s).await;
                assert_eq!(n, 300, "second {s}: {device}'s last five minutes");
            }
        }
    }
    let counts = store
        .read(|c| Ok::<_, StoreError>(sample_counts(c)?))
        .await
        .expect("counts");
    let sent = (SECONDS as usize * site.samples_per_second()) as u64;
    println!(
        "cap {cap} B: at most {most} B in use ({:.1} %), file at most {most_file} B; {} of {sent} samples kept",
        100.0 * most as f64 / cap as f64,
        counts.staged + counts.at_rest
    );
    assert!(counts.staged + counts.at_rest < sent, "{counts:?}: evicted");
    store.close().await.expect("close");
}
