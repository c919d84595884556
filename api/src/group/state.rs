//! The coordinator's state, as data: a shard holds its `Coordinator` (the groups of the
//! `__consumer_offsets` partitions it owns) and its figures are read by the metrics; what
//! acts on it (loading, the group calls, timers) is in the sibling modules, above `shard`.
//! This file names no shard, so `shard` can hold the coordinator without importing the code
//! that needs the shard.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use groups::classic::ClassicGroup;
use groups::consumer::ConsumerGroup;

use crate::metadata::records::TopicId;

/// Kafka's internal topic of group state.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// A committed offset.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// One group: its classic membership or its KIP-848 consumer group, and its committed
/// offsets. A group id is one kind or the other (Kafka's `Group.type()`).
pub struct Group {
    pub classic: ClassicGroup,
    /// The KIP-848 state; `Some` and existing makes this a consumer group.
    pub consumer: Option<ConsumerGroup>,
    pub offsets: BTreeMap<(String, i32), Committed>,
    /// Offsets committed in transactions not yet ended, by producer id (TxnOffsetCommit):
    /// they replace `offsets` at the COMMIT marker and are dropped at ABORT.
    pub pending_txn: BTreeMap<i64, BTreeMap<(String, i32), Committed>>,
    /// Wall-clock ms since which the group has no members (offsets retention).
    pub empty_since: i64,
}

impl Group {
    pub(super) fn new(now_wall: i64) -> Group {
        Group {
            classic: ClassicGroup::new(),
            consumer: None,
            offsets: BTreeMap::new(),
            pending_txn: BTreeMap::new(),
            empty_since: now_wall,
        }
    }

    pub(super) fn state_name(&self) -> &'static str {
        self.classic.state().name()
    }

    /// The group's KIP-848 state when it is a consumer group.
    pub fn consumer(&self) -> Option<&ConsumerGroup> {
        self.consumer.as_ref().filter(|c| c.exists())
    }

    /// Whether a transaction not yet ended committed an offset of `key`.
    pub(super) fn has_pending_txn_offset(&self, key: &(String, i32)) -> bool {
        self.pending_txn
            .values()
            .any(|offsets| offsets.contains_key(key))
    }

    /// A transaction of `producer_id` ended: its offsets become the group's (COMMIT) or
    /// are dropped (ABORT).
    pub(super) fn end_txn(&mut self, producer_id: i64, commit: bool) {
        if let Some(offsets) = self.pending_txn.remove(&producer_id) {
            if commit {
                self.offsets.extend(offsets);
            }
        }
    }

    pub(super) fn has_consumer_members(&self) -> bool {
        self.consumer().is_some_and(|c| !c.members().is_empty())
    }
}

pub(super) enum PartitionState {
    Loading,
    Loaded {
        topic_id: TopicId,
        groups: HashMap<String, Group>,
    },
}

/// One shard's coordinator: the groups of the `__consumer_offsets` partitions it owns.
pub struct Coordinator {
    pub(super) partitions: RefCell<HashMap<i32, PartitionState>>,
    /// Woken when a group gains members, so the timer runs only while groups are live.
    pub(super) live: event_listener::Event,
    /// Woken when this shard learns it owns a partition (`opening`).
    pub(super) learned: event_listener::Event,
    pub(super) epoch: Instant,
}

impl Coordinator {
    /// Calls `each(group, topic, partition, offset)` for every committed offset of the groups
    /// this shard coordinates (metrics snapshots).
    pub fn each_committed_offset(&self, mut each: impl FnMut(&str, &str, i32, i64)) {
        for state in self.partitions.borrow().values() {
            if let PartitionState::Loaded { groups, .. } = state {
                for (group_id, group) in groups {
                    for ((topic, partition), committed) in &group.offsets {
                        each(group_id, topic, *partition, committed.offset);
                    }
                }
            }
        }
    }
}

impl Default for Coordinator {
    fn default() -> Self {
        Coordinator {
            partitions: RefCell::new(HashMap::new()),
            live: event_listener::Event::new(),
            learned: event_listener::Event::new(),
            epoch: Instant::now(),
        }
    }
}
