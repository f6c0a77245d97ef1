//! The static points of one device as last read (`Statics`), and the newest
//! read shared by the bus task and the actuator (`Kept`): what `statics.rs`
//! reads and `DeviceMap` holds.
//!
//! It keeps and replaces; it must not read a device nor decide which
//! registers are static.

use std::sync::{Arc, RwLock};

use tokio::time::{Duration, Instant};

use super::sunspec::Ratings;
use crate::register::plan::{Image, Span};

/// The static points of a device as read once.
#[derive(Debug)]
pub struct Statics {
    /// Exactly the static spans the device answered, as read.
    pub image: Image,
    /// The ratings in `image` (SunSpec's `WMax`, `WRtg`, ...).
    pub ratings: Ratings,
    /// When they were read.
    pub read_at: Instant,
    /// 0 for the read at discovery, one more for each read since.
    pub generation: u64,
}

impl Statics {
    /// True once `every` has passed since they were read.
    pub fn due(&self, now: Instant, every: Duration) -> bool {
        now.saturating_duration_since(self.read_at) >= every
    }

    /// True when `polled` (a poll's image) holds one of `spans` with other
    /// words than the kept image: the device changed a static point. A span
    /// the kept read lacks (the device refused it alone) tells nothing.
    pub fn moved(&self, spans: &[Span], polled: &Image) -> bool {
        spans.iter().any(|s| {
            let (now, kept) = (
                polled.get(s.table, s.addr, s.len),
                self.image.get(s.table, s.addr, s.len),
            );
            now.is_some() && kept.is_some() && now != kept
        })
    }
}

/// The newest [`Statics`] of one device map, shared by the bus task that
/// polls the device and the actuator that steers it.
#[derive(Debug)]
pub struct Kept {
    current: RwLock<Arc<Statics>>,
}

impl Kept {
    pub fn new(image: Image, ratings: Ratings) -> Kept {
        Kept {
            current: RwLock::new(Arc::new(Statics {
                image,
                ratings,
                read_at: Instant::now(),
                generation: 0,
            })),
        }
    }

    /// The newest read.
    pub fn get(&self) -> Arc<Statics> {
        // A poisoned lock still holds a whole Arc: keep using it.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps a new read; returns it.
    pub fn replace(&self, image: Image, ratings: Ratings) -> Arc<Statics> {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let next = Arc::new(Statics {
            image,
            ratings,
            read_at: Instant::now(),
            generation: current.generation + 1,
        });
        *current = next.clone();
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register::plan::Table;

    fn img(addr: u16, words: &[u16]) -> Image {
        Image::holding(addr, words)
    }

    #[test]
    fn a_poll_that_reads_a_static_point_through_tells_a_change() {
        let sf = Span::new(Table::Holding, 12, 1);
        let kept = Kept::new(img(12, &[0xFFFE]), Ratings::default());
        let s = kept.get();
        // The poll read 10..14: the scale factor as kept, then changed.
        assert!(!s.moved(&[sf], &img(10, &[1, 2, 0xFFFE, 4])));
        assert!(s.moved(&[sf], &img(10, &[1, 2, 0xFFFF, 4])));
        // A poll that does not read it tells nothing, nor a point the kept
        // read lacks.
        assert!(!s.moved(&[sf], &img(20, &[7])));
        let other = Span::new(Table::Holding, 11, 1);
        assert!(!s.moved(&[other], &img(10, &[1, 2, 0xFFFE, 4])));
        let next = kept.replace(img(12, &[0xFFFF]), Ratings::default());
        assert_eq!(next.generation, 1);
        assert!(Arc::ptr_eq(&kept.get(), &next));
    }

    #[test]
    fn statics_are_due_after_their_interval() {
        let s = Kept::new(Image::new(), Ratings::default()).get();
        let every = Duration::from_secs(3600);
        assert!(!s.due(s.read_at, every));
        assert!(!s.due(s.read_at + Duration::from_secs(3599), every));
        assert!(s.due(s.read_at + every, every));
    }
}
