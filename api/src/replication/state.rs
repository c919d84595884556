//! What a shard holds of one partition's replication (a data leaf: it never names the
//! shard): whether this node leads it, follows it, or is its only copy, and the high
//! watermark consumers read up to.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use shard::replication::{CommittedState, LeaderState};

/// This node's part in a partition.
pub enum Role {
    /// Not replicated: a single node (its own quorum), or a topic this release does not
    /// replicate (`__consumer_offsets`). The high watermark is the log end.
    Unreplicated,
    /// The leader: Kafka's leader-side state (`shard::replication::LeaderState`).
    Leader(LeaderState),
    /// A follower of `leader` at `leader_epoch`: fetches from it, serves no client.
    Follower { leader: i32, leader_epoch: i32 },
}

/// One partition's replication state on the shard that owns it.
pub struct Replica {
    pub role: RefCell<Role>,
    /// The high watermark while leader or follower (an unreplicated partition's is its log
    /// end, read from the log).
    high_watermark: Cell<i64>,
}

impl Replica {
    pub fn unreplicated() -> Replica {
        Replica {
            role: RefCell::new(Role::Unreplicated),
            high_watermark: Cell::new(0),
        }
    }

    /// The high watermark, given the log's end (what an unreplicated partition uses).
    pub fn high_watermark(&self, log_end: i64) -> i64 {
        match &*self.role.borrow() {
            Role::Unreplicated => log_end,
            _ => self.high_watermark.get().min(log_end),
        }
    }

    /// The stored high watermark, whatever the role (no borrow of the role).
    pub(crate) fn stored_high_watermark(&self) -> i64 {
        self.high_watermark.get()
    }

    pub(crate) fn set_high_watermark(&self, hw: i64) {
        self.high_watermark.set(hw);
    }

    /// Whether clients may produce to and fetch from this partition here.
    pub fn serves_clients(&self) -> bool {
        matches!(&*self.role.borrow(), Role::Unreplicated | Role::Leader(_))
    }

    pub fn is_leader(&self) -> bool {
        matches!(&*self.role.borrow(), Role::Leader(_))
    }

    /// The leader this node follows, with its epoch.
    pub fn following(&self) -> Option<(i32, i32)> {
        match &*self.role.borrow() {
            Role::Follower {
                leader,
                leader_epoch,
            } => Some((*leader, *leader_epoch)),
            _ => None,
        }
    }

    /// The leader epoch while leading.
    pub fn leader_epoch(&self) -> Option<i32> {
        match &*self.role.borrow() {
            Role::Leader(state) => Some(state.leader_epoch()),
            _ => None,
        }
    }

    /// The committed ISR while leading.
    pub fn isr_len(&self) -> Option<usize> {
        match &*self.role.borrow() {
            Role::Leader(state) => Some(state.isr().len()),
            _ => None,
        }
    }
}

/// A partition's committed state as the image holds it.
pub fn committed(partition: &crate::metadata::image::PartitionImage) -> CommittedState {
    CommittedState {
        leader_epoch: partition.leader_epoch,
        partition_epoch: partition.partition_epoch,
        isr: partition.isr.clone(),
        replicas: partition.replicas.clone(),
    }
}

/// A shard's replication tasks.
#[derive(Default)]
pub struct ShardReplication {
    /// The leaders this shard's fetcher tasks fetch from, one task each.
    pub fetching_from: RefCell<std::collections::HashSet<i32>>,
    /// Whether the ISR check runs (started at the first leadership).
    pub isr_task_started: Cell<bool>,
    /// Set when the shard closes: fetchers stop at their next step.
    pub stopped: Cell<bool>,
    /// How this shard reaches other brokers, read from the configuration once (see
    /// `inter_broker::of`).
    pub inter_broker: std::cell::OnceCell<Rc<super::inter_broker::InterBroker>>,
}

impl Replica {
    /// A replica of a cluster partition before its role is known: serves no client.
    pub fn unassigned() -> Replica {
        Replica {
            role: RefCell::new(Role::Follower {
                leader: -1,
                leader_epoch: -1,
            }),
            high_watermark: Cell::new(0),
        }
    }
}
