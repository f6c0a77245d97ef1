//! A day (or any number of hours) of history written into the agent's
//! database before it starts, as an agent that ran that long would have left
//! it: through the library (`StoreHandle::open` on the agent's own storage
//! config and device references, in the agent's device order), every series
//! at 1 Hz in time order, in commits of [`BLOCK_S`] seconds of every device
//! (fewer samples per series than the direct path takes, so they are staged
//! as a polling agent's are), compacted every `storage.compact_interval_s`
//! of data and whenever the staged samples reach the writer's own bound, as
//! the agent's writer does; values from `noisy.rs` (or its calm ones).

use tokio::time::Instant;

use sitegate::config::StorageConfig;
use sitegate::model::{DeviceId, Sample};
use sitegate::store::StoreHandle;

use super::noisy::Series;

const HOUR_S: i64 = 3600;
/// Seconds of every device per commit.
const BLOCK_S: i64 = 10;

/// What a prefill wrote.
pub struct Prefill {
    pub samples: u64,
    pub took_s: f64,
    /// Raw chunks at rest, and per series.
    pub chunks: u64,
    pub chunks_per_series: f64,
}

/// Writes `hours` of history ending a minute ago for the devices (reference,
/// kind) into the store `storage`, closes it, and says what it wrote.
pub fn prefill(
    rt: &tokio::runtime::Handle,
    storage: &StorageConfig,
    devices: &[(String, &'static str)],
    hours: i64,
    calm: bool,
) -> Prefill {
    let t0 = Instant::now();
    let refs = devices.iter().map(|(r, _)| r.clone()).collect();
    let store = StoreHandle::open(storage, refs).unwrap();
    let tx = store.sample_sender();
    let end_s = sitegate::model::time::now_ms() / 1000 - 60;
    let start_s = end_s - hours * HOUR_S;
    let compact_every = storage.compact_interval_s as i64;
    let mut series: Vec<Series> = devices
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| Series::new(kind, i, calm))
        .collect();
    let mut samples = 0u64;
    let mut values = Vec::new();
    rt.block_on(async {
        let mut block = start_s;
        while block < end_s {
            let until = (block + BLOCK_S).min(end_s);
            let mut batch = Vec::new();
            for (d, s) in series.iter_mut().enumerate() {
                let props = s.properties();
                for second in block..until {
                    values.clear();
                    s.values(second, &mut values);
                    // A poll lands a few ms off the second.
                    let ts_ms = second * 1000 + (d as i64 * 7 + second * 13) % 40;
                    batch.extend(props.iter().zip(&values).map(|(&property, &value)| Sample {
                        device: DeviceId(d as u16),
                        property,
                        ts_ms,
                        value,
                    }));
                }
            }
            samples += batch.len() as u64;
            tx.send(batch).await.unwrap();
            store.flush().await.unwrap();
            if (until - start_s) % compact_every == 0 {
                store.compact().await.unwrap();
            }
            block = until;
        }
        store.close().await.unwrap();
    });
    let conn = rusqlite::Connection::open(&storage.path).unwrap();
    let count =
        |sql: &str| -> u64 { conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap() as u64 };
    let chunks = count("SELECT count(*) FROM raw_chunk");
    let n_series = count("SELECT count(*) FROM series").max(1);
    Prefill {
        samples,
        took_s: t0.elapsed().as_secs_f64(),
        chunks,
        chunks_per_series: chunks as f64 / n_series as f64,
    }
}
