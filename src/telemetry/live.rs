//! The latest value of every property of every device, and each device's status.
//!
//! One `RwLock` per device keeps readers of one device from waiting on writers of
//! another; no lock is held across an await.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::config::DeviceConfig;
use crate::model::{DeviceId, Property, Sample};

/// A value and when it was measured (epoch ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    pub ts_ms: i64,
    pub value: f64,
}

/// What discovery learned about a device.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceInfo {
    pub manufacturer: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub version: Option<String>,
    /// SunSpec model ids in chain order (empty for register-map profiles).
    pub sunspec_models: Vec<u16>,
    /// Continuous power rating (W) the device reports.
    pub rated_power_w: Option<f64>,
    /// Energy capacity (Wh) the device reports.
    pub capacity_wh: Option<f64>,
    /// The SunSpec model `operatingState` is read from, which names its
    /// codes (`model::operating_state`); `None` for a profile or no state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_model: Option<u16>,
    /// A profile's names of its `operatingState` codes, by code (empty for
    /// SunSpec devices, whose model names them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state_names: Vec<(u16, String)>,
}

impl DeviceInfo {
    /// The name of operating state `code` (a polled value), where the
    /// device's model or profile names it.
    pub fn state_name(&self, code: f64) -> Option<std::borrow::Cow<'static, str>> {
        use std::borrow::Cow;
        if let Some(model) = self.state_model {
            return crate::model::operating_state::name(model, code).map(Cow::Borrowed);
        }
        let code = crate::model::operating_state::code(code)?;
        self.state_names
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, n)| Cow::Owned(n.clone()))
    }
}

/// The state kept per device is what a snapshot copies.
type DeviceState = DeviceSnapshot;

/// How far ahead of the wall clock a reading's timestamp may be and still be
/// served as the latest: beyond it, the reading was stamped by a clock that
/// has since stepped back (`docs/operations.md`, "Time").
pub const FUTURE_TOLERANCE_MS: i64 = 5_000;

/// A consistent copy of one device's state.
#[derive(Clone, Debug)]
pub struct DeviceSnapshot {
    pub properties: Vec<Property>,
    pub values: [Option<Reading>; Property::COUNT],
    pub online: bool,
    pub last_seen: Option<i64>,
    pub attempted: bool,
    pub last_error: Option<String>,
    pub info: DeviceInfo,
}

impl DeviceSnapshot {
    pub fn reading(&self, p: Property) -> Option<Reading> {
        self.values[p.index()]
    }

    pub fn offers(&self, p: Property) -> bool {
        self.properties.contains(&p)
    }
}

/// Every configured device with its live state, in config order. Devices
/// are only ever appended ([`Live::add`], a config change applied live):
/// a `DeviceId` stays valid for the life of the process.
#[derive(Debug)]
pub struct Live {
    table: RwLock<Table>,
}

#[derive(Debug)]
struct Table {
    /// Replaced whole when a device is added, so readers keep a consistent list.
    configs: Arc<Vec<DeviceConfig>>,
    states: Vec<Arc<RwLock<DeviceState>>>,
    by_reference: HashMap<String, DeviceId>,
}

/// One device's config, as [`Live::config`] lends it.
pub struct DeviceRef {
    list: Arc<Vec<DeviceConfig>>,
    index: usize,
}

impl std::ops::Deref for DeviceRef {
    type Target = DeviceConfig;
    fn deref(&self) -> &DeviceConfig {
        &self.list[self.index]
    }
}

/// Why a device cannot be added.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AddError {
    #[error("device {reference} is known already")]
    Known { reference: String },
    #[error("device {reference} has id {id}, the next is #{next}")]
    NotNext {
        reference: String,
        id: DeviceId,
        next: usize,
    },
}

// Lock poisoning only follows a panic while a writer held the lock; the state is
// plain data that stays consistent field by field, so we keep serving it.
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

fn fresh() -> Arc<RwLock<DeviceState>> {
    Arc::new(RwLock::new(DeviceState {
        properties: Vec::new(),
        values: [None; Property::COUNT],
        online: false,
        last_seen: None,
        attempted: false,
        last_error: None,
        info: DeviceInfo::default(),
    }))
}

impl Live {
    pub fn new(devices: &[DeviceConfig]) -> Self {
        let states = devices.iter().map(|_| fresh()).collect();
        let by_reference = devices
            .iter()
            .map(|d| (d.reference.clone(), d.id))
            .collect();
        Self {
            table: RwLock::new(Table {
                configs: Arc::new(devices.to_vec()),
                states,
                by_reference,
            }),
        }
    }

    /// Adds a device at run time: offline, never polled, with the next id.
    pub fn add(&self, device: DeviceConfig) -> Result<DeviceId, AddError> {
        let mut t = write(&self.table);
        if t.by_reference.contains_key(&device.reference) {
            return Err(AddError::Known {
                reference: device.reference,
            });
        }
        let next = t.configs.len();
        if device.id.index() != next {
            return Err(AddError::NotNext {
                reference: device.reference,
                id: device.id,
                next,
            });
        }
        let id = device.id;
        t.by_reference.insert(device.reference.clone(), id);
        let mut configs = (*t.configs).clone();
        configs.push(device);
        t.configs = Arc::new(configs);
        t.states.push(fresh());
        Ok(id)
    }

    /// The devices now, in id order.
    pub fn devices(&self) -> Arc<Vec<DeviceConfig>> {
        read(&self.table).configs.clone()
    }

    /// The config of a device this `Live` gave the id of.
    pub fn config(&self, id: DeviceId) -> DeviceRef {
        DeviceRef {
            list: read(&self.table).configs.clone(),
            index: id.index(),
        }
    }

    pub fn find(&self, reference: &str) -> Option<DeviceId> {
        read(&self.table).by_reference.get(reference).copied()
    }

    /// A device's state. Ids come from this `Live` (configs and devices
    /// are only appended): indexing cannot fail for them.
    fn state(&self, id: DeviceId) -> Arc<RwLock<DeviceState>> {
        read(&self.table).states[id.index()].clone()
    }

    pub fn snapshot(&self, id: DeviceId) -> DeviceSnapshot {
        self.inspect(id, DeviceSnapshot::clone)
    }

    /// Runs `f` on a device's state under its read lock, without copying
    /// it: for the paths that run for every poll or every control tick.
    /// `f` must not call back into this `Live` for the same device's writes.
    pub fn inspect<R>(&self, id: DeviceId, f: impl FnOnce(&DeviceSnapshot) -> R) -> R {
        let state = self.state(id);
        let s = read(&state);
        f(&s)
    }

    pub fn latest(&self, id: DeviceId, p: Property) -> Option<Reading> {
        read(&self.state(id)).values[p.index()]
    }

    /// Stores samples as the latest values and marks the device online. The
    /// latest is the last to arrive, not the one with the largest timestamp:
    /// after the wall clock stepped back, the next poll's samples are the
    /// latest although earlier samples carry later times. All samples must
    /// belong to `id` (one poll's, in the order read). Returns true when the
    /// device was offline before.
    pub fn record(&self, id: DeviceId, samples: &[Sample]) -> bool {
        let state = self.state(id);
        let mut s = write(&state);
        let was_offline = !s.online;
        for sample in samples {
            debug_assert_eq!(sample.device, id);
            s.values[sample.property.index()] = Some(Reading {
                ts_ms: sample.ts_ms,
                value: sample.value,
            });
        }
        if let Some(last) = samples.iter().map(|x| x.ts_ms).max() {
            s.last_seen = Some(last);
        }
        s.online = true;
        s.attempted = true;
        s.last_error = None;
        was_offline
    }

    /// Fills latest values from storage at start, without marking the device
    /// online: only a poll does that. A reading stamped more than
    /// [`FUTURE_TOLERANCE_MS`] ahead of now (by a clock that was wrong when it
    /// was taken) is not restored: it would pose as the latest until the
    /// clock caught up with it.
    pub fn restore(&self, id: DeviceId, property: Property, reading: Reading) {
        if reading.ts_ms > crate::model::time::now_ms() + FUTURE_TOLERANCE_MS {
            return;
        }
        let state = self.state(id);
        let mut s = write(&state);
        let slot = &mut s.values[property.index()];
        if slot.is_none_or(|r| r.ts_ms < reading.ts_ms) {
            *slot = Some(reading);
        }
        if !s.properties.contains(&property) {
            s.properties.push(property);
            s.properties.sort();
        }
        s.last_seen = Some(s.last_seen.map_or(reading.ts_ms, |t| t.max(reading.ts_ms)));
    }

    /// Returns true when anything changed.
    pub fn set_catalog(
        &self,
        id: DeviceId,
        mut properties: Vec<Property>,
        info: DeviceInfo,
    ) -> bool {
        properties.sort();
        properties.dedup();
        let state = self.state(id);
        let mut s = write(&state);
        let changed = s.properties != properties || s.info != info;
        s.properties = properties;
        s.info = info;
        changed
    }

    /// Returns true when the device was online before.
    pub fn mark_failed(&self, id: DeviceId, error: String) -> bool {
        let state = self.state(id);
        let mut s = write(&state);
        let was_online = s.online;
        s.online = false;
        s.attempted = true;
        s.last_error = Some(error);
        was_online
    }

    /// Returns true when the device was offline before.
    pub fn mark_online(&self, id: DeviceId, ts_ms: i64) -> bool {
        let state = self.state(id);
        let mut s = write(&state);
        let was_offline = !s.online;
        s.online = true;
        s.attempted = true;
        s.last_error = None;
        s.last_seen = Some(s.last_seen.map_or(ts_ms, |t| t.max(ts_ms)));
        was_offline
    }

    /// True once every device was polled at least once, with success or failure.
    pub fn all_attempted(&self) -> bool {
        read(&self.table).states.iter().all(|s| read(s).attempted)
    }

    /// References of devices not yet polled.
    pub fn not_attempted(&self) -> Vec<String> {
        let t = read(&self.table);
        t.states
            .iter()
            .zip(t.configs.iter())
            .filter(|(s, _)| !read(s).attempted)
            .map(|(_, c)| c.reference.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices() -> Vec<DeviceConfig> {
        let mut text = String::from(
            "gateway_id = \"t\"\n[http]\nauth = \"none\"\nlisten = [\"127.0.0.1:0\"]\n[[sites]]\nreference = \"ste_a\"\nname = \"A\"\n[[buses]]\nname = \"a\"\ntcp = \"127.0.0.1:1502\"\n",
        );
        for (i, r) in ["dvc_a", "dvc_b", "dvc_c"].iter().enumerate() {
            text += &format!(
                "[[devices]]\nreference = \"{r}\"\nname = \"{r}\"\ntype = \"meter\"\nsite = \"ste_a\"\nbus = \"a\"\nunit_id = {}\n",
                i + 1
            );
        }
        crate::config::parse(&text).expect("config").devices
    }

    #[test]
    fn devices_are_appended_with_the_next_id_only() {
        let all = devices();
        let live = Live::new(&all[..2]);
        let before = live.devices();
        assert_eq!(
            live.add(all[0].clone()),
            Err(AddError::Known {
                reference: "dvc_a".into()
            })
        );
        let mut skipping = all[2].clone();
        skipping.id = DeviceId(5);
        assert!(matches!(
            live.add(skipping),
            Err(AddError::NotNext { next: 2, .. })
        ));
        assert_eq!(live.add(all[2].clone()), Ok(DeviceId(2)));
        // A list taken before stays as it was; the new one has the device.
        assert_eq!(before.len(), 2);
        assert_eq!(live.devices().len(), 3);
        assert_eq!(live.find("dvc_c"), Some(DeviceId(2)));
        assert_eq!(live.config(DeviceId(2)).reference, "dvc_c");
        let s = live.snapshot(DeviceId(2));
        assert!(!s.online && !s.attempted);
        assert_eq!(live.not_attempted(), ["dvc_a", "dvc_b", "dvc_c"]);
        live.mark_online(DeviceId(2), 1);
        assert!(live.snapshot(DeviceId(2)).online);
    }
}
