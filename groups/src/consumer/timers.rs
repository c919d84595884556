//! Soft state of a consumer group: when each member must heartbeat by (its session) and when
//! a member revoking partitions must have revoked them by (its rebalance timeout). Not
//! persisted: a loading coordinator gives every member a fresh deadline.

use std::collections::{BTreeSet, HashMap};

use super::{ConsumerGroup, ConsumerGroupConfig, MemberState, TopicLookup};
use crate::records::GroupRecord;

/// Soft state: when members must have heartbeated or revoked by.
#[derive(Clone, Debug, Default)]
pub(super) struct Timers {
    /// Member id -> session deadline (ms).
    pub(super) session: HashMap<String, i64>,
    /// Member id -> (the epoch it must leave, deadline (ms)) while it holds partitions it must
    /// revoke.
    pub(super) rebalance: HashMap<String, (i32, i64)>,
}

impl ConsumerGroup {
    /// The earliest session or rebalance deadline, for the coordinator's timer.
    pub fn next_deadline(&self) -> Option<i64> {
        let session = self.timers.session.values().copied();
        let rebalance = self.timers.rebalance.values().map(|(_, d)| *d);
        session.chain(rebalance).min()
    }

    /// After replaying the group at start: every member gets a fresh session, and those
    /// revoking a fresh rebalance timeout, as Kafka does when a coordinator loads.
    pub fn schedule_after_load(&mut self, now_ms: i64, config: &ConsumerGroupConfig) {
        self.timers = Timers::default();
        for member in self.members.values() {
            self.timers.session.insert(
                member.member_id.clone(),
                now_ms + i64::from(config.session_timeout_ms),
            );
            if member.state == MemberState::UnrevokedPartitions {
                self.timers.rebalance.insert(
                    member.member_id.clone(),
                    (
                        member.member_epoch,
                        now_ms + i64::from(member.rebalance_timeout_ms.max(0)),
                    ),
                );
            }
        }
    }

    /// Fences the members whose session expired, or who did not revoke within their rebalance
    /// timeout; returns the records (already applied).
    pub fn expire(&mut self, now_ms: i64, topics: &dyn TopicLookup) -> Vec<GroupRecord> {
        let mut expired: BTreeSet<String> = self
            .timers
            .session
            .iter()
            .filter(|(_, &deadline)| deadline <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for (id, &(epoch, deadline)) in &self.timers.rebalance {
            let still_revoking = self
                .members
                .get(id)
                .is_some_and(|m| m.member_epoch == epoch);
            if deadline <= now_ms && still_revoking {
                expired.insert(id.clone());
            }
        }
        let mut records = Vec::new();
        for id in expired {
            if self.members.contains_key(&id) {
                self.fence_member(&id, topics, &mut records);
            } else {
                self.cancel_timers(&id);
            }
        }
        records
    }

    pub(super) fn cancel_timers(&mut self, member_id: &str) {
        self.timers.session.remove(member_id);
        self.timers.rebalance.remove(member_id);
    }
}
