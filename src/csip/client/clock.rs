//! The server's clock as the client keeps it: the server's `currentTime`
//! anchored to the monotonic clock when it was read, so events start on the
//! server's time whatever the controller's wall clock says or steps to.
//! Before the first reading, the offset last kept in the store.

use tokio::time::Instant;

/// Server time from the last `tm` reading.
#[derive(Clone, Debug)]
pub struct ServerClock {
    anchor: Option<(i64, Instant)>,
    /// Server minus wall time, ms, when there is no anchor.
    offset_ms: i64,
}

impl ServerClock {
    pub fn new(offset_ms: i64) -> ServerClock {
        ServerClock {
            anchor: None,
            offset_ms,
        }
    }

    /// The server said `server_s` for a request sent at `sent` and answered
    /// now: the server's time is taken at the middle.
    pub fn read(&mut self, server_s: i64, sent: Instant) {
        let now = Instant::now();
        let mid = sent + (now - sent) / 2;
        // The server's second began up to 1 s before it said it: its middle.
        self.anchor = Some((server_s * 1000 + 500, mid));
    }

    /// The server's time now, ms, given the wall time now.
    pub fn server_ms(&self, wall_ms: i64) -> i64 {
        match self.anchor {
            Some((ms, at)) => ms + i64::try_from(at.elapsed().as_millis()).unwrap_or(i64::MAX / 2),
            None => wall_ms + self.offset_ms,
        }
    }

    /// A server time as wall time now, ms.
    pub fn local_ms(&self, server_ms: i64) -> i64 {
        let wall = crate::model::time::now_ms();
        server_ms - (self.server_ms(wall) - wall)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn server_time_runs_on_the_monotonic_clock_from_its_reading() {
        let mut c = ServerClock::new(-5_000);
        assert_eq!(
            c.server_ms(100_000),
            95_000,
            "the kept offset before any reading"
        );
        let sent = Instant::now();
        tokio::time::advance(std::time::Duration::from_millis(200)).await;
        c.read(1_000, sent);
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        // Whatever the wall clock says: 1 000.5 s, 100 ms of the request's
        // way back, and 10 s since.
        assert_eq!(c.server_ms(0), 1_010_600);
        assert_eq!(c.server_ms(9_999_999), 1_010_600);
    }
}
