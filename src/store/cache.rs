//! How large the writer's page cache is, from the site's size. A page cache
//! keeps every page it touched until it is full, so after the agent has run a
//! while its size is the writer's share of the RSS, whatever the site. The
//! pages worth keeping are the staging ring of one compaction interval (a
//! compaction reads it back; the commits before it wrote it) and the upper
//! pages of the tables. Past that, a larger cache keeps mostly the chunk and
//! rollup pages compactions appended, which the writer reads again only when
//! retention deletes them. Pure: no I/O, no SQLite.

use crate::config::capacity::PROPERTIES_PER_DEVICE;

/// Bytes a sample takes in the staging ring (packed slots; docs/store.md,
/// "Flash wear").
const STAGED_BYTES_PER_SAMPLE: f64 = 3.2;
/// The cache's bounds, KiB. 8,000 is what the writer had at every size before.
pub const WRITER_CACHE_MIN_KIB: u64 = 2048;
pub const WRITER_CACHE_MAX_KIB: u64 = 8000;

/// KiB of pages the writer caches: the staging ring that `devices` polled at
/// 1 Hz fill in `compact_interval_s`, within the bounds. 20 devices: 2 MiB
/// (the ring is 0.5 MB); 100: 2.4 MiB; 320 and more: 8,000 KiB.
pub fn writer_cache_kib(devices: usize, compact_interval_s: u64) -> u64 {
    let ring = devices as f64
        * PROPERTIES_PER_DEVICE
        * compact_interval_s as f64
        * STAGED_BYTES_PER_SAMPLE;
    ((ring / 1024.0) as u64).clamp(WRITER_CACHE_MIN_KIB, WRITER_CACHE_MAX_KIB)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreHandle;

    #[test]
    fn the_cache_follows_the_ring_within_its_bounds() {
        assert_eq!(writer_cache_kib(0, 600), WRITER_CACHE_MIN_KIB);
        assert_eq!(writer_cache_kib(20, 600), WRITER_CACHE_MIN_KIB);
        assert_eq!(writer_cache_kib(100, 600), 2437);
        assert_eq!(writer_cache_kib(200, 600), 4875);
        assert_eq!(writer_cache_kib(1000, 600), WRITER_CACHE_MAX_KIB);
        // A shorter interval stages less: a smaller cache for the same site.
        assert_eq!(writer_cache_kib(200, 60), WRITER_CACHE_MIN_KIB);
        let mut last = 0;
        for devices in (0..2000).step_by(7) {
            let kib = writer_cache_kib(devices, 600);
            assert!(kib >= last, "{devices} devices: {kib} < {last}");
            last = kib;
        }
    }

    /// The store's writer connection runs with the size for its devices.
    #[tokio::test]
    async fn the_writer_connection_has_the_size_for_its_devices() {
        for (devices, kib) in [
            (20, WRITER_CACHE_MIN_KIB),
            (200, 4875),
            (1000, WRITER_CACHE_MAX_KIB),
        ] {
            let dir = tempfile::tempdir().expect("temp dir");
            let config = crate::config::StorageConfig {
                path: dir.path().join("c.db"),
                compact_interval_s: 600,
                ..crate::config::StorageConfig::default()
            };
            let names = (0..devices).map(|i| format!("dvc_{i}")).collect();
            let store = StoreHandle::open(&config, names).expect("store");
            let size: i64 = store
                .execute(|c| {
                    c.query_row("PRAGMA cache_size", [], |r| r.get(0))
                        .map_err(crate::store::StoreError::from)
                })
                .await
                .expect("cache_size");
            // Negative: KiB, not pages.
            assert_eq!(size, -(kib as i64), "{devices} devices");
            store.close().await.expect("close");
        }
    }
}
