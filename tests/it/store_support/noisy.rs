//! Samples like a real site's, seeded and deterministic: every point moves
//! with measurement noise every second around a slowly moving level, and a
//! fifth of the devices read float registers (full float32 precision noise).
//! Shared by the store tests and `benches/store.rs`.
//!
//! Per device (13 properties, polled at 1 Hz with 0 to 30 ms of jitter):
//! power ±0.5 % of its rating around a level that moves over minutes,
//! reactive power likewise, volts ±0.3 V with one or two decimals, currents
//! ±0.5 % with two decimals, frequency ±0.01 Hz, SoC in 0.1 % steps, energy
//! counters growing by the integrated power, a temperature.

use sitegate::model::{DeviceId, Property, Sample};

/// The properties of each device, in the order they are polled.
pub const PROPERTIES: [Property; 13] = [
    Property::ActivePower,
    Property::ReactivePower,
    Property::Soc,
    Property::TotalEnergyProduced,
    Property::TotalEnergyConsumed,
    Property::Frequency,
    Property::VoltageL1,
    Property::VoltageL2,
    Property::VoltageL3,
    Property::CurrentL1,
    Property::CurrentL2,
    Property::CurrentL3,
    Property::Temperature,
];

/// xorshift64: small, seeded, the same on every machine.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    pub fn noise(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 * 2.0 - 1.0
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.noise() + 1.0) / 2.0
    }
}

/// One simulated device.
#[derive(Clone)]
struct Device {
    id: u16,
    float: bool,
    rating_w: f64,
    /// Seconds of the level's period, and its phase.
    period_s: f64,
    phase: f64,
    volt_decimals: i32,
    produced_wh: f64,
    consumed_wh: f64,
    soc: f64,
    rng: Rng,
}

/// A site of `devices` noisy devices, second by second from `t0_ms`.
pub struct NoisySite {
    devices: Vec<Device>,
    t0_ms: i64,
}

impl NoisySite {
    pub fn new(devices: usize, seed: u64, t0_ms: i64) -> Self {
        let mut rng = Rng::new(seed);
        let ratings = [5_000.0, 10_000.0, 25_000.0, 50_000.0, 100_000.0];
        let devices = (0..devices)
            .map(|i| Device {
                id: i as u16,
                float: i % 5 == 4,
                rating_w: ratings[(rng.unit() * ratings.len() as f64) as usize % ratings.len()],
                period_s: 600.0 + 1800.0 * rng.unit(),
                phase: std::f64::consts::TAU * rng.unit(),
                volt_decimals: 1 + (i % 2) as i32,
                produced_wh: 1e6 + 1e7 * rng.unit(),
                consumed_wh: 1e5 + 1e6 * rng.unit(),
                soc: 20.0 + 60.0 * rng.unit(),
                rng: Rng::new(seed ^ (i as u64 + 1) << 20),
            })
            .collect();
        Self { devices, t0_ms }
    }

    /// Properties stored per second: 13 a device.
    pub fn samples_per_second(&self) -> usize {
        self.devices.len() * PROPERTIES.len()
    }

    /// The poll of every device at second `s` (seconds must come in order).
    pub fn second(&mut self, s: i64) -> Vec<Sample> {
        let mut out = Vec::with_capacity(self.samples_per_second());
        for d in &mut self.devices {
            d.poll(self.t0_ms, s, &mut out);
        }
        out
    }
}

impl Device {
    fn poll(&mut self, t0_ms: i64, s: i64, out: &mut Vec<Sample>) {
        let r = &mut self.rng;
        let ts = t0_ms + s * 1000 + (r.unit() * 30.0) as i64;
        let slow = (s as f64 / self.period_s * std::f64::consts::TAU + self.phase).sin();
        let power = self.rating_w * (0.5 + 0.3 * slow) + 0.005 * self.rating_w * r.noise();
        let reactive = 0.1 * self.rating_w * slow + 0.005 * self.rating_w * r.noise();
        self.produced_wh += power.max(0.0) / 3600.0;
        self.consumed_wh += 0.01 * self.rating_w / 3600.0 * r.unit();
        self.soc = (self.soc + 0.002 * slow).clamp(0.0, 100.0);
        let volts: Vec<f64> = (0..3)
            .map(|_| 230.0 + 2.0 * slow + 0.3 * r.noise())
            .collect();
        let amps: Vec<f64> = volts
            .iter()
            .map(|v| power / 3.0 / v * (1.0 + 0.005 * r.noise()))
            .collect();
        let frequency = 50.0 + 0.02 * slow + 0.01 * r.noise();
        let temperature = 35.0 + 5.0 * slow + 0.1 * r.noise();
        let soc = (self.soc * 10.0).round() / 10.0;
        let values: [f64; 13] = if self.float {
            // A float register holds the reading with all its noise.
            let f = |x: f64| f64::from(x as f32);
            [
                f(power),
                f(reactive),
                f(soc),
                f(self.produced_wh),
                f(self.consumed_wh),
                f(frequency),
                f(volts[0]),
                f(volts[1]),
                f(volts[2]),
                f(amps[0]),
                f(amps[1]),
                f(amps[2]),
                f(temperature),
            ]
        } else {
            // Integer registers with scale factors: the decimals they keep.
            let dec = |x: f64, k: i32| (x * 10f64.powi(k)).round() / 10f64.powi(k);
            [
                dec(power, 0),
                dec(reactive, 0),
                soc,
                self.produced_wh.floor(),
                self.consumed_wh.floor(),
                dec(frequency, 2),
                dec(volts[0], self.volt_decimals),
                dec(volts[1], self.volt_decimals),
                dec(volts[2], self.volt_decimals),
                dec(amps[0], 2),
                dec(amps[1], 2),
                dec(amps[2], 2),
                dec(temperature, 1),
            ]
        };
        out.extend(
            PROPERTIES
                .iter()
                .zip(values)
                .map(|(&property, value)| Sample {
                    device: DeviceId(self.id),
                    property,
                    ts_ms: ts,
                    value,
                }),
        );
    }
}
