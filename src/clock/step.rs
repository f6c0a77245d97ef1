//! Finding steps of the wall clock: on every tick the wall clock is compared
//! with the monotonic clock; when their difference changes by the threshold
//! or more, the wall clock was stepped (NTP, an RTC read, an operator), in
//! the direction and by the size of the change. NTP slewing changes it by at
//! most 0.5 ms a second, far below any threshold.
//!
//! Pure arithmetic on the two readings: no clock is read here.

/// A step of the wall clock, found between two ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Its size, ms: positive forward, negative backward.
    pub size_ms: i64,
    /// The wall clock right after it, epoch ms.
    pub at_ms: i64,
}

impl Step {
    pub fn direction(&self) -> &'static str {
        if self.size_ms >= 0 {
            "forward"
        } else {
            "backward"
        }
    }
}

/// The wall clock's offset from the monotonic clock, as last seen.
#[derive(Clone, Copy, Debug)]
pub struct StepDetector {
    offset_ms: Option<i64>,
    threshold_ms: i64,
}

impl StepDetector {
    pub fn new(threshold_ms: u64) -> StepDetector {
        StepDetector {
            offset_ms: None,
            threshold_ms: i64::try_from(threshold_ms).unwrap_or(i64::MAX),
        }
    }

    /// One tick: the wall clock (epoch ms) and the monotonic clock (ms from
    /// any fixed start) read together. The first tick only sets the offset.
    pub fn observe(&mut self, wall_ms: i64, mono_ms: i64) -> Option<Step> {
        let offset = wall_ms - mono_ms;
        let before = self.offset_ms.replace(offset)?;
        let size_ms = offset - before;
        (size_ms.abs() >= self.threshold_ms).then_some(Step {
            size_ms,
            at_ms: wall_ms,
        })
    }
}

/// A step's size for people: `30 d 0 h 0 min 5.000 s`, shortened from the
/// largest unit present.
pub fn describe(size_ms: i64) -> String {
    let ms = size_ms.unsigned_abs();
    let (d, rest) = (ms / 86_400_000, ms % 86_400_000);
    let (h, rest) = (rest / 3_600_000, rest % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let s = format!("{}.{:03} s", rest / 1000, rest % 1000);
    if d > 0 {
        format!("{d} d {h} h {m} min {s}")
    } else if h > 0 {
        format!("{h} h {m} min {s}")
    } else if m > 0 {
        format!("{m} min {s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_found_in_both_directions_from_the_threshold() {
        let mut d = StepDetector::new(2000);
        assert_eq!(d.observe(1_000_000, 0), None);
        // A second later on both clocks, with a few ms of drift: no step.
        assert_eq!(d.observe(1_001_003, 1000), None);
        // 1.999 s more on the wall clock than on the monotonic one: no step.
        assert_eq!(d.observe(1_004_002, 2000), None);
        // 30 days back.
        let back = d.observe(1_005_002 - 2_592_000_000, 3000).expect("a step");
        assert_eq!(back.size_ms, -2_592_000_000);
        assert_eq!(back.direction(), "backward");
        // 5 s forward.
        let fwd = d.observe(1_011_002 - 2_592_000_000, 4000).expect("a step");
        assert_eq!(fwd.size_ms, 5000);
        assert_eq!(fwd.direction(), "forward");
    }

    #[test]
    fn sizes_read_from_the_largest_unit() {
        assert_eq!(describe(-2_592_005_000), "30 d 0 h 0 min 5.000 s");
        assert_eq!(describe(3_723_004), "1 h 2 min 3.004 s");
        assert_eq!(describe(65_000), "1 min 5.000 s");
        assert_eq!(describe(2500), "2.500 s");
    }
}
