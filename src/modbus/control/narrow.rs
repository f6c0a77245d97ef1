//! A write plan cut down to what must be sent: the words that differ from
//! the device's last confirmed write of the same recipe, or, for a refresh
//! (nothing differs), the plan's first write alone, which restarts the
//! device's revert timer (every recipe writes its setpoint, or its timer,
//! first). Adjacent writes go in one request. The read-back stays the whole
//! plan's: a device that lost a word it was not sent (a restart, its own
//! timer) shows a mismatch, and the next attempt sends the whole plan.
//!
//! Pure; which plan to narrow, and when, is the actuator's.

use super::{RegWrite, WritePlan};

impl WritePlan {
    /// The plan as sent to a device whose last write, `confirmed`, was read
    /// back as written: the writes that changed (all of them when their
    /// registers differ), or the first write alone when none did.
    pub fn narrowed(&self, confirmed: &[RegWrite]) -> WritePlan {
        let same_registers = confirmed.len() == self.writes.len()
            && confirmed
                .iter()
                .zip(&self.writes)
                .all(|(a, b)| a.addr == b.addr && a.values.len() == b.values.len());
        if !same_registers {
            return self.clone();
        }
        let changed: Vec<RegWrite> = self
            .writes
            .iter()
            .zip(confirmed)
            .filter(|(new, old)| new != old)
            .map(|(new, _)| new.clone())
            .collect();
        let writes = if changed.is_empty() {
            self.writes.iter().take(1).cloned().collect()
        } else {
            changed
        };
        WritePlan {
            writes: joined(writes),
            read_back: self.read_back.clone(),
            expect: self.expect.clone(),
        }
    }
}

/// Writes in order, each one that starts where the one before ends joined
/// to it (one request).
fn joined(writes: Vec<RegWrite>) -> Vec<RegWrite> {
    let mut out: Vec<RegWrite> = Vec::new();
    for w in writes {
        match out.last_mut() {
            Some(prev)
                if usize::from(prev.addr) + prev.values.len() == usize::from(w.addr)
                    && prev.values.len() + w.values.len() <= 123 =>
            {
                prev.values.extend(w.values);
            }
            _ => out.push(w),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(addr: u16, values: &[u16]) -> RegWrite {
        RegWrite {
            addr,
            values: values.to_vec(),
        }
    }

    /// Model 123's shape: the setpoint, the timer, the enable point.
    fn limit(pct: u16) -> WritePlan {
        WritePlan::new(vec![w(40_005, &[pct]), w(40_007, &[60]), w(40_009, &[1])])
    }

    #[test]
    fn a_changed_setpoint_sends_only_the_setpoint_and_reads_back_all() {
        let before = limit(50);
        let after = limit(48);
        let sent = after.narrowed(&before.writes);
        assert_eq!(sent.writes, vec![w(40_005, &[48])]);
        assert_eq!(sent.read_back, after.read_back);
        assert_eq!(sent.expect, after.expect);
    }

    #[test]
    fn a_refresh_sends_the_first_write_alone() {
        let plan = limit(50);
        let sent = plan.narrowed(&plan.writes);
        assert_eq!(sent.writes, vec![w(40_005, &[50])]);
        assert_eq!(sent.expect, plan.expect);
    }

    #[test]
    fn other_registers_send_the_whole_plan() {
        let release = WritePlan::new(vec![w(40_009, &[0])]);
        assert_eq!(limit(50).narrowed(&release.writes), limit(50));
    }

    #[test]
    fn adjacent_changes_go_in_one_request() {
        let before = WritePlan::new(vec![w(10, &[1]), w(11, &[2, 3]), w(20, &[4])]);
        let after = WritePlan::new(vec![w(10, &[5]), w(11, &[6, 3]), w(20, &[4])]);
        assert_eq!(
            after.narrowed(&before.writes).writes,
            vec![w(10, &[5, 6, 3])]
        );
    }
}
