//! A day (or any number of hours) of history written into the agent's
//! database before it starts: through the library (`StoreHandle::open` on the
//! agent's own storage config and device references, in the agent's device
//! order), an hour of a device at a time (bulk batches take the direct path
//! to chunks and rollups, as in `benches/store_growth.rs`), then closed.

use sitegate::config::StorageConfig;
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::StoreHandle;

const HOUR_S: i64 = 3600;

/// About the properties the agent reads from each kind of SunSpec device.
fn properties(kind: &str) -> &'static [Property] {
    use Property::*;
    match kind {
        "inverter" => &[
            ActivePower,
            ReactivePower,
            TotalEnergyProduced,
            Frequency,
            VoltageL1,
            VoltageL2,
            VoltageL3,
            CurrentL1,
            CurrentL2,
            CurrentL3,
            Temperature,
            OperatingState,
            ActivePowerLimit,
        ],
        "battery" => &[
            ActivePower,
            ReactivePower,
            TotalEnergyProduced,
            TotalEnergyConsumed,
            Frequency,
            VoltageL1,
            VoltageL2,
            VoltageL3,
            CurrentL1,
            CurrentL2,
            CurrentL3,
            Soc,
            MaxChargePower,
            MaxDischargePower,
            OperatingState,
        ],
        _ => &[
            ActivePower,
            ReactivePower,
            TotalEnergyProduced,
            TotalEnergyConsumed,
            Frequency,
            VoltageL1,
            VoltageL2,
            VoltageL3,
            CurrentL1,
            CurrentL2,
            CurrentL3,
        ],
    }
}

/// Whole watts, one-decimal volts and counters, slowly moving, so the chunks
/// compress as real data does.
fn value(device: usize, p: usize, second: i64) -> f64 {
    let phase = ((second + device as i64 * 97) as f64 / 900.0).sin();
    match p % 3 {
        0 => (3000.0 + 2500.0 * phase + ((second * 31 + p as i64) % 97) as f64).round(),
        1 => ((2300.0 + 30.0 * phase) + (second % 7) as f64).round() / 10.0,
        _ => (second / 60 + device as i64 * 1000) as f64,
    }
}

/// An hour of one device from `start_s` (epoch seconds).
fn hour(device: usize, kind: &str, start_s: i64) -> Vec<Sample> {
    let props = properties(kind);
    let mut out = Vec::with_capacity(props.len() * HOUR_S as usize);
    for (p, &property) in props.iter().enumerate() {
        for s in start_s..start_s + HOUR_S {
            out.push(Sample {
                device: DeviceId(device as u16),
                property,
                // A poll lands a few ms off the second.
                ts_ms: s * 1000 + (device as i64 * 7 + s * 13) % 40,
                value: value(device, p, s),
            });
        }
    }
    out
}

/// Writes `hours` of history ending a minute ago for the devices (reference,
/// kind) into the store `storage`, closes it, and returns the samples written.
pub fn prefill(
    rt: &tokio::runtime::Handle,
    storage: &StorageConfig,
    devices: &[(String, &'static str)],
    hours: i64,
) -> u64 {
    let refs = devices.iter().map(|(r, _)| r.clone()).collect();
    let store = StoreHandle::open(storage, refs).unwrap();
    let tx = store.sample_sender();
    let end_s = sitegate::model::time::now_ms() / 1000 - 60;
    let mut samples = 0u64;
    rt.block_on(async {
        for h in (1..=hours).rev() {
            for (d, (_, kind)) in devices.iter().enumerate() {
                let batch = hour(d, kind, end_s - h * HOUR_S);
                samples += batch.len() as u64;
                tx.send(batch).await.unwrap();
            }
            store.flush().await.unwrap();
        }
        store.close().await.unwrap();
    });
    samples
}
