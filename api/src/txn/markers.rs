//! Writing a transaction's COMMIT/ABORT markers: the coordinator groups the partitions by
//! the shard that owns them and asks each for its part (`WriteMarkers`); the owner appends a
//! control batch to each partition and waits for it as acks=all does. A marker on a
//! `__consumer_offsets` partition also makes the group coordinator there keep or drop the
//! transaction's offsets.

use std::rc::Rc;

use transactions::MarkerPlan;
use wire::ErrorCode;

use super::calls::{MarkerPart, WriteMarkers};
use crate::group::OFFSETS_TOPIC;
use crate::shard::Shard;

/// Writes `plan`'s markers; returns the partitions still lacking one (to retry).
pub(super) async fn write(shard: &Rc<Shard>, plan: &MarkerPlan) -> Vec<(String, i32)> {
    let image = shard.image();
    let me = shard.config.node_id;
    let mut by_owner: Vec<Vec<(usize, MarkerPart)>> = vec![Vec::new(); shard.shard_count()];
    let mut left = Vec::new();
    for (slot, (topic, partition)) in plan.partitions.iter().enumerate() {
        // A partition deleted since (its topic gone) needs no marker: Kafka drops it too.
        let Some(topic_image) = image.topic(topic) else {
            continue;
        };
        let Some(partition_image) = topic_image.partition(*partition) else {
            continue;
        };
        if shard.cluster.is_some() && partition_image.leader != me {
            // Markers go through the partition's leader; another broker's are not written
            // from here yet (see ARCHITECTURE.md, "Transactions").
            left.push((topic.clone(), *partition));
            continue;
        }
        by_owner[shard.owner(partition_image)].push((
            slot,
            MarkerPart {
                topic_id: topic_image.topic_id,
                partition: *partition,
                producer_id: plan.producer_id,
                producer_epoch: plan.producer_epoch,
                coordinator_epoch: plan.coordinator_epoch,
                commit: plan.commit,
            },
        ));
    }
    let calls = by_owner
        .into_iter()
        .enumerate()
        .filter(|(_, parts)| !parts.is_empty())
        .map(|(owner, parts)| async move {
            let (slots, parts): (Vec<usize>, Vec<MarkerPart>) = parts.into_iter().unzip();
            let codes = shard.call(owner, WriteMarkers { parts }).await;
            slots.into_iter().zip(codes).collect::<Vec<_>>()
        });
    for answers in futures::future::join_all(calls).await {
        for (slot, code) in answers {
            match code {
                ErrorCode::None | ErrorCode::UnknownTopicOrPartition => {}
                code => {
                    tracing::debug!(?code, partition = ?plan.partitions[slot], "transaction marker not written");
                    left.push(plan.partitions[slot].clone());
                }
            }
        }
    }
    left
}

/// Writes markers to partitions of this shard (WriteMarkers, and WriteTxnMarkers from
/// another broker's coordinator); one code per part.
pub async fn write_markers_here(shard: &Rc<Shard>, parts: &[MarkerPart]) -> Vec<ErrorCode> {
    let writes = parts
        .iter()
        .map(|part| crate::partition_ops::write_txn_marker(shard, part));
    let codes = futures::future::join_all(writes).await;
    let image = shard.image();
    for (part, code) in parts.iter().zip(&codes) {
        let offsets = image
            .topic_by_id(&part.topic_id)
            .is_some_and(|topic| topic.name == OFFSETS_TOPIC);
        if *code == ErrorCode::None && offsets {
            shard
                .coordinator
                .end_txn_offsets(part.partition, part.producer_id, part.commit);
        }
    }
    codes
}
