//! What the client's two halves share: the schedule, the server's clock,
//! the Responses owed, and what the controls in force do. The I/O half
//! (polls, posts) writes what the server says; the evaluation half moves
//! the schedule on each second and hands the limits over, whatever the
//! server does. Held under a short lock, never across an await.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::clock::ServerClock;
use crate::csip::schedule::Schedule;
use crate::csip::site::Held;
use crate::csip::store::Pending;

#[derive(Debug)]
pub(crate) struct Shared {
    pub schedule: Schedule,
    pub clock: ServerClock,
    pub pending: VecDeque<Pending>,
    /// The schedule or the pending Responses changed since the last save.
    pub dirty: bool,
    /// What the controls in force do to the DER now.
    pub held: Held,
    /// The defaults' `setGradW` in force (0: none).
    pub set_grad_w: u16,
}

/// The shared state, cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct SharedRef(Arc<Mutex<Shared>>);

impl SharedRef {
    pub fn new(s: Shared) -> SharedRef {
        SharedRef(Arc::new(Mutex::new(s)))
    }

    pub fn lock(&self) -> MutexGuard<'_, Shared> {
        // Plain data: keep using it after a panic elsewhere.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
