//! Noisy mode as plain functions (`docs/devices.md`, "Noisy mode"): a seeded
//! random source (splitmix64), the measurement noise of one device for one
//! real second ([`Jitter`]) and a site's load level that walks on its own
//! ([`LoadWalk`]).
//!
//! Deterministic: every value is a function of a seed and the real second it
//! is drawn for. No registers, no clock, no I/O; the devices and the physics
//! task call these. Calm devices hold [`Jitter::CALM`], which changes nothing.

/// Measurement noise, each drawn uniformly within ± its amplitude.
pub mod amplitude {
    /// Inverter and battery power: a share of the rating (while they run).
    /// Meter power: a share of the reading (a class 0.5 meter).
    pub const POWER: f64 = 0.005;
    /// Voltage, V.
    pub const VOLTS: f64 = 0.3;
    /// Current: a share of the reading.
    pub const CURRENT: f64 = 0.005;
    /// Frequency, Hz.
    pub const HZ: f64 = 0.01;
    /// Temperature, °C.
    pub const CELSIUS: f64 = 0.2;
    /// State of charge: shown in steps of this many %, one step either way.
    pub const SOC_STEP: f64 = 0.1;
}

/// The load walk: per real second the level moves by a normal draw of this
/// standard deviation (a share of the load) ...
pub const WALK_SIGMA: f64 = 0.01;
/// ... and is pulled back toward the daily profile with this time constant, s.
pub const WALK_TAU_S: f64 = 120.0;
/// The chance per second of a step (a machine switched on or off) ...
pub const STEP_CHANCE: f64 = 1.0 / 90.0;
/// ... of this share of the load either way.
pub const STEP_SHARE: (f64, f64) = (0.05, 0.20);
/// The level stays within this range (the load within 0.5 to 1.6 times its
/// profile), so a meter's scale factor always holds it.
pub const LEVEL_RANGE: (f64, f64) = (-0.5, 0.6);

/// Which point a noise draw is for: each point of a device draws its own.
pub mod channel {
    pub const W: u64 = 1;
    pub const VAR: u64 = 2;
    pub const HZ: u64 = 3;
    pub const TEMP: u64 = 4;
    pub const SOC: u64 = 5;
    pub const DC_V: u64 = 6;
    /// Voltages: this plus the phase (0 to 2), line-to-line 3 to 5, the
    /// averages 6 and 7.
    pub const V: u64 = 16;
    /// Phase currents: this plus the phase (0 to 2); the total at 3.
    pub const A: u64 = 32;
    /// Phase powers: this plus the phase (0 to 2).
    pub const W_PHASE: u64 = 48;
}

/// splitmix64's output function on `x`: every input bit reaches every output
/// bit, so neighbouring inputs (seconds, channels) give unrelated outputs.
pub const fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Two values into one well-mixed value.
pub const fn combine(a: u64, b: u64) -> u64 {
    mix(a ^ mix(b))
}

/// A device's own seed: the site's seed, its server's name and its unit id.
pub fn device_seed(seed: u64, server: &str, unit_id: u8) -> u64 {
    let name = server
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| combine(h, u64::from(b)));
    combine(combine(seed, name), u64::from(unit_id))
}

/// [0, 1) from 64 random bits.
fn unit_of(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// splitmix64: a small, fast generator with a fixed sequence per seed.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        let out = mix(self.state);
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        out
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        unit_of(self.next_u64())
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// One device's measurement noise for one real second: the same within the
/// second, fresh in the next. [`Jitter::CALM`] adds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jitter {
    seed: Option<u64>,
    draw: u64,
}

impl Jitter {
    pub const CALM: Jitter = Jitter {
        seed: None,
        draw: 0,
    };

    /// The noise of the device seeded `seed` (see [`device_seed`]).
    pub const fn seeded(seed: u64) -> Jitter {
        Jitter {
            seed: Some(seed),
            draw: seed,
        }
    }

    pub const fn is_calm(&self) -> bool {
        self.seed.is_none()
    }

    /// The noise of the real second `second` (since the site started).
    pub fn at_second(self, second: i64) -> Jitter {
        match self.seed {
            None => self,
            Some(seed) => Jitter {
                seed: Some(seed),
                draw: combine(seed, second as u64),
            },
        }
    }

    /// The noise of the real second `real_s` falls in.
    pub fn at(self, real_s: f64) -> Jitter {
        self.at_second(real_s.floor() as i64)
    }

    /// Uniform in [-1, 1) for `channel`; 0 when calm.
    pub fn unit(&self, channel: u64) -> f64 {
        if self.is_calm() {
            return 0.0;
        }
        2.0 * unit_of(combine(self.draw, channel)) - 1.0
    }

    /// An inverter's or a battery's power `w` rated `rated_w`: ± 0.5 % of the
    /// rating while it runs, never across zero (0 stays 0).
    pub fn power(&self, channel: u64, w: f64, rated_w: f64) -> f64 {
        let noisy = w + amplitude::POWER * rated_w.abs() * self.unit(channel);
        if w > 0.0 {
            noisy.max(0.0)
        } else if w < 0.0 {
            noisy.min(0.0)
        } else {
            0.0
        }
    }

    /// A reading with noise of `share` of itself (meter power, currents).
    pub fn share(&self, channel: u64, value: f64, share: f64) -> f64 {
        value * (1.0 + share * self.unit(channel))
    }

    /// Noise of ± `amplitude` around `value` (volts, hertz, degrees).
    pub fn plus(&self, channel: u64, value: f64, amplitude: f64) -> f64 {
        value + amplitude * self.unit(channel)
    }

    /// A state of charge as a battery reports it: in 0.1 % steps, one step
    /// either way or none; within 0 to 100 %. Calm: as it is.
    pub fn soc(&self, soc: f64) -> f64 {
        if self.is_calm() {
            return soc;
        }
        let step = amplitude::SOC_STEP;
        let off = ((self.unit(channel::SOC) + 1.0) * 1.5).floor().min(2.0) - 1.0;
        ((soc / step).round() * step + off * step).clamp(0.0, 100.0)
    }
}

/// A site's load beside its daily profile: a factor around 1 that walks
/// every real second (normal moves of [`WALK_SIGMA`], pulled back with
/// [`WALK_TAU_S`]) and now and then steps by 5 to 20 % ([`STEP_CHANCE`]),
/// whatever the devices do.
#[derive(Clone, Debug)]
pub struct LoadWalk {
    rng: Rng,
    level: f64,
    second: Option<i64>,
}

/// Most steps one call catches up on (a physics task that stalled for longer
/// goes on from where the walk is).
const MAX_CATCH_UP: i64 = 3600;

impl LoadWalk {
    pub fn new(seed: u64) -> LoadWalk {
        LoadWalk {
            rng: Rng::new(seed),
            level: 0.0,
            second: None,
        }
    }

    /// The level now: the load is its profile times `1 + level`.
    pub fn level(&self) -> f64 {
        self.level
    }

    /// The factor on the profile at the real second `second`: one move per
    /// second since the last call (none at the first).
    pub fn factor_at(&mut self, second: i64) -> f64 {
        let steps = match self.second {
            None => 0,
            Some(last) => (second - last).clamp(0, MAX_CATCH_UP),
        };
        if self.second.is_none_or(|last| second > last) {
            self.second = Some(second);
        }
        for _ in 0..steps {
            self.step();
        }
        1.0 + self.level
    }

    /// One second of the walk.
    pub fn step(&mut self) {
        let mut level = self.level - self.level / WALK_TAU_S + WALK_SIGMA * self.rng.normal();
        if self.rng.unit() < STEP_CHANCE {
            let (lo, hi) = STEP_SHARE;
            let size = lo + (hi - lo) * self.rng.unit();
            level += if self.rng.unit() < 0.5 { size } else { -size };
        }
        self.level = level.clamp(LEVEL_RANGE.0, LEVEL_RANGE.1);
    }
}

#[cfg(test)]
mod tests;
