//! Query timings for the store benchmark: a warm-up, then a fixed number of
//! samples of equal iteration counts, reported as the median time per
//! iteration with the fastest and slowest sample beside it.
//!
//! Only what `benches/store.rs` needs: no outlier analysis, no saved
//! history, no comparison with an earlier run. The comparison that matters,
//! against the naive way, is made in the same run by timing both.

use std::hint::black_box;
use std::time::Duration;
use tokio::time::Instant;

/// How long an operation runs before it is measured, and how long its
/// samples take together.
const WARM_UP: Duration = Duration::from_secs(1);
const MEASUREMENT: Duration = Duration::from_secs(5);
const SAMPLES: u32 = 20;

/// Per-iteration times of one measured operation.
pub struct Timing {
    pub median: Duration,
    pub fastest: Duration,
    pub slowest: Duration,
    pub iterations: u64,
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median {:.3} ms ({:.3} to {:.3} ms over {SAMPLES} samples of {} iterations)",
            ms(self.median),
            ms(self.fastest),
            ms(self.slowest),
            self.iterations
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Times `op`, prints `name` with the result, and returns it.
pub fn time<T>(name: &str, mut op: impl FnMut() -> T) -> Timing {
    let warm = Instant::now();
    let mut runs = 0u32;
    while warm.elapsed() < WARM_UP || runs == 0 {
        black_box(op());
        runs += 1;
    }
    let each = warm.elapsed() / runs;
    let per_sample = MEASUREMENT / SAMPLES;
    let iterations = (per_sample.as_nanos() / each.as_nanos().max(1)).max(1);
    let iterations = u32::try_from(iterations).unwrap_or(u32::MAX);
    let mut times: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iterations {
                black_box(op());
            }
            started.elapsed() / iterations
        })
        .collect();
    times.sort_unstable();
    let mid = times.len() / 2;
    let timing = Timing {
        // An even count: the mean of the middle two.
        median: (times[mid - 1] + times[mid]) / 2,
        fastest: times[0],
        slowest: times[times.len() - 1],
        iterations: u64::from(iterations),
    };
    println!("{name}: {timing}");
    timing
}
