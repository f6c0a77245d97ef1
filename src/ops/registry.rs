//! The operations of this run in memory: the newest [`KEEP`] with their
//! outcomes, and the newest [`BUNDLES`] bundles' texts (within
//! [`BUNDLE_BYTES`]). Plain data behind the service's one short lock.
//!
//! It must not await or do I/O.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::operation::{OpId, OpState, Operation};

/// Operations kept in memory.
pub const KEEP: usize = 64;
/// Bundles kept in memory, and their bytes at most.
pub const BUNDLES: usize = 4;
pub const BUNDLE_BYTES: usize = 4 * 1024 * 1024;

#[derive(Default)]
pub struct Table {
    ops: HashMap<OpId, Arc<Operation>>,
    order: VecDeque<OpId>,
    /// (id, text, sha256), oldest first.
    bundles: VecDeque<(OpId, Arc<String>, String)>,
}

impl Table {
    pub fn get(&self, id: &OpId) -> Option<Arc<Operation>> {
        self.ops.get(id).cloned()
    }

    /// Inserts or replaces; the oldest past [`KEEP`] is forgotten (the
    /// audit history still holds it).
    pub fn put(&mut self, op: Arc<Operation>) {
        if self.ops.insert(op.id.clone(), op.clone()).is_none() {
            self.order.push_back(op.id.clone());
        }
        while self.order.len() > KEEP {
            if let Some(old) = self.order.pop_front() {
                self.ops.remove(&old);
            }
        }
    }

    /// Operations accepted or running.
    pub fn running(&self) -> usize {
        self.ops
            .values()
            .filter(|o| matches!(o.state, OpState::Accepted | OpState::Running))
            .count()
    }

    pub fn keep_bundle(&mut self, id: OpId, text: Arc<String>, sha256: String) {
        self.bundles.push_back((id, text, sha256));
        while self.bundles.len() > BUNDLES
            || self.bundles.iter().map(|b| b.1.len()).sum::<usize>() > BUNDLE_BYTES
        {
            self.bundles.pop_front();
        }
    }

    pub fn bundle(&self, id: &OpId) -> Option<(Arc<String>, String)> {
        self.bundles
            .iter()
            .find(|b| &b.0 == id)
            .map(|b| (b.1.clone(), b.2.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::operation::{OpKind, Source};

    fn op(i: usize, state: OpState) -> Arc<Operation> {
        Arc::new(Operation {
            id: OpId::parse(&format!("op-{i}")).expect("id"),
            kind: OpKind::Logs,
            args: String::new(),
            source: Source {
                transport: "http".into(),
                caller: "t".into(),
            },
            state,
            accepted_ms: 0,
            finished_ms: None,
            outcome: None,
            summary: None,
            error: None,
        })
    }

    #[test]
    fn keeps_the_newest_operations_and_bundles() {
        let mut t = Table::default();
        for i in 0..KEEP + 3 {
            t.put(op(i, OpState::Succeeded));
        }
        t.put(op(KEEP + 2, OpState::Running));
        assert!(t.get(&op(2, OpState::Running).id).is_none());
        assert!(t.get(&op(3, OpState::Running).id).is_some());
        assert_eq!(t.running(), 1);
        for i in 0..BUNDLES + 1 {
            t.keep_bundle(
                op(i, OpState::Succeeded).id.clone(),
                Arc::new("x".into()),
                String::new(),
            );
        }
        assert!(t.bundle(&op(0, OpState::Running).id).is_none());
        assert!(t.bundle(&op(BUNDLES, OpState::Running).id).is_some());
        t.keep_bundle(
            op(99, OpState::Succeeded).id.clone(),
            Arc::new("y".repeat(BUNDLE_BYTES)),
            String::new(),
        );
        assert_eq!(t.bundles.len(), 1);
    }
}
