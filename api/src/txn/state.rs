//! The transaction coordinator's state, as data: a shard holds its `TxnCoordinators` (the
//! transactional ids of the `__transaction_state` partitions it owns). What acts on it is in
//! the sibling modules, above `shard`.

use std::cell::RefCell;
use std::collections::HashMap;

use transactions::Coordinator;

use crate::metadata::records::TopicId;

pub(super) enum TxnPartition {
    Loading,
    Loaded {
        topic_id: TopicId,
        coordinator: Coordinator,
    },
}

/// One shard's transaction coordinator: one state machine per `__transaction_state`
/// partition it owns.
#[derive(Default)]
pub struct TxnCoordinators {
    pub(super) partitions: RefCell<HashMap<i32, TxnPartition>>,
    /// Woken when this shard learns it owns a partition (`opening`).
    pub(super) learned: event_listener::Event,
    /// Woken when a partition is loaded, so the timer runs only while there are some.
    pub(super) loaded: event_listener::Event,
}

impl TxnCoordinators {
    /// Runs `f` on the loaded coordinator of `partition`, or answers the partition's state
    /// (NOT_COORDINATOR: not this shard's; COORDINATOR_LOAD_IN_PROGRESS: being replayed).
    pub(super) fn with<R>(
        &self,
        partition: i32,
        f: impl FnOnce(&mut Coordinator, TopicId) -> R,
    ) -> Result<R, wire::ErrorCode> {
        match self.partitions.borrow_mut().get_mut(&partition) {
            None => Err(wire::ErrorCode::NotCoordinator),
            Some(TxnPartition::Loading) => Err(wire::ErrorCode::CoordinatorLoadInProgress),
            Some(TxnPartition::Loaded {
                topic_id,
                coordinator,
            }) => Ok(f(coordinator, *topic_id)),
        }
    }

    /// The loaded partitions (the timer's work).
    pub(super) fn loaded_partitions(&self) -> Vec<i32> {
        (self.partitions.borrow().iter())
            .filter(|(_, state)| matches!(state, TxnPartition::Loaded { .. }))
            .map(|(partition, _)| *partition)
            .collect()
    }
}
