//! Roles follow the metadata image (Kafka's `makeLeader` / `makeFollower`): for every
//! partition of a changed topic that this shard holds a replica of, the image's leader and
//! leader epoch say whether this node leads it (a new leader epoch: the epoch starts at the
//! log end, followers' progress starts unknown) or follows (the fetcher of that leader runs;
//! a follower truncates only when the leader answers DivergingEpoch, KIP-279).

use std::rc::Rc;
use std::sync::Arc;

use shard::replication::LeaderState;

use super::state::{committed, Role};
use crate::metadata::image::Image;
use crate::shard::Shard;

/// Applies `image`'s roles to this shard's replicas (topics unchanged since `previous` are
/// skipped: the controller shares their `Arc`).
pub fn update(shard: &Rc<Shard>, previous: &Image, image: &Image) {
    if shard.cluster.is_none() {
        return;
    }
    let me = shard.config.node_id;
    let now = super::leader::now_ms();
    let mut leaders = Vec::new();
    for topic in image.topics_by_id.values() {
        if previous
            .topic_by_id(&topic.topic_id)
            .is_some_and(|old| Arc::ptr_eq(old, topic))
        {
            continue;
        }
        let offsets = topic.name == crate::group::OFFSETS_TOPIC;
        let txn_state = topic.name == crate::txn::TXN_TOPIC;
        for p in &topic.partitions {
            let key = (topic.topic_id, p.partition_id);
            let Some(local) = shard.local_replica(&key.0, key.1) else {
                continue;
            };
            let state = committed(p);
            let mut role = local.replica.role.borrow_mut();
            if p.leader == me {
                if let Role::Leader(leader) = &mut *role {
                    if leader.leader_epoch() == p.leader_epoch {
                        leader.adopt(&state);
                        continue;
                    }
                }
                let start = {
                    let mut log = local.log.borrow_mut();
                    if let Err(error) = log.assign_leader_epoch(p.leader_epoch) {
                        tracing::warn!(%error, "leader epoch checkpoint not written");
                    }
                    log.log_end_offset()
                };
                let hw = local.replica.stored_high_watermark().min(start);
                tracing::info!(
                    topic = %topic.name, partition = p.partition_id, epoch = p.leader_epoch,
                    isr = ?p.isr, start, hw, "leading partition"
                );
                *role = Role::Leader(LeaderState::new(me, &state, start, hw, now));
                local.replica.set_high_watermark(hw);
                drop(role);
                super::leader::advance_high_watermark(shard, &local);
                if offsets {
                    // The group coordinator of this partition moves here (Kafka's
                    // `onElection`): its groups are loaded from this replica.
                    shard.coordinator.opening(p.partition_id);
                    glommio::spawn_local(crate::group::Coordinator::load(
                        shard.clone(),
                        topic.topic_id,
                        p.partition_id,
                    ))
                    .detach();
                }
                if txn_state {
                    // Likewise the transaction coordinator, with this leader epoch as its
                    // coordinator epoch.
                    shard.txn.opening(p.partition_id);
                    glommio::spawn_local(crate::txn::TxnCoordinators::load(
                        shard.clone(),
                        topic.topic_id,
                        p.partition_id,
                    ))
                    .detach();
                }
                if !shard.replication.isr_task_started.replace(true) {
                    glommio::spawn_local(super::leader::isr_task(shard.clone())).detach();
                }
            } else {
                let was_leader = matches!(&*role, Role::Leader(_));
                if role_is(&role, p.leader, p.leader_epoch) {
                    continue;
                }
                tracing::info!(
                    topic = %topic.name, partition = p.partition_id, leader = p.leader,
                    epoch = p.leader_epoch, "following partition"
                );
                *role = Role::Follower {
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                };
                drop(role);
                if was_leader {
                    // Parked acks=all produces and long polls see the new role.
                    local.appended.notify(usize::MAX);
                }
                if offsets {
                    // Kafka's `onResignation`.
                    shard.coordinator.unload(p.partition_id);
                }
                if txn_state {
                    shard.txn.unload(p.partition_id);
                }
                if p.leader >= 0 && !leaders.contains(&p.leader) {
                    leaders.push(p.leader);
                }
            }
        }
    }
    for leader in leaders {
        super::fetcher::ensure(shard, leader);
    }
}

fn role_is(role: &Role, leader: i32, leader_epoch: i32) -> bool {
    matches!(role, Role::Follower { leader: l, leader_epoch: e } if *l == leader && *e == leader_epoch)
}
