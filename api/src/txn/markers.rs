//! Writing a transaction's COMMIT/ABORT markers: the coordinator groups the partitions by
//! the shard that owns them and asks each for its part (`WriteMarkers`); the owner appends a
//! control batch to each partition and waits for it as acks=all does. A marker on a
//! `__consumer_offsets` partition also makes the group coordinator there keep or drop the
//! transaction's offsets.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use transactions::MarkerPlan;
use wire::generated::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use wire::generated::{ApiKey, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use wire::ErrorCode;

use super::calls::{MarkerPart, WriteMarkers};
use crate::group::OFFSETS_TOPIC;
use crate::replication::fetcher;
use crate::shard::Shard;

/// Writes `plan`'s markers; returns the partitions still lacking one (to retry).
pub(super) async fn write(shard: &Rc<Shard>, plan: &MarkerPlan) -> Vec<(String, i32)> {
    let image = shard.image();
    let me = shard.config.node_id;
    let mut by_owner: Vec<Vec<(usize, MarkerPart)>> = vec![Vec::new(); shard.shard_count()];
    let mut left = Vec::new();
    let mut remote: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for (slot, (topic, partition)) in plan.partitions.iter().enumerate() {
        // A partition deleted since (its topic gone) needs no marker: Kafka drops it too.
        let Some(topic_image) = image.topic(topic) else {
            continue;
        };
        let Some(partition_image) = topic_image.partition(*partition) else {
            continue;
        };
        if shard.cluster.is_some() && partition_image.leader != me {
            // Another broker leads it: WriteTxnMarkers to that broker.
            remote
                .entry(partition_image.leader)
                .or_default()
                .push((topic.clone(), *partition));
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
    let remote_calls = remote
        .into_iter()
        .map(|(leader, partitions)| write_remote(shard, plan, leader, partitions));
    let (answers, remote_left) = futures::future::join(
        futures::future::join_all(calls),
        futures::future::join_all(remote_calls),
    )
    .await;
    left.extend(remote_left.into_iter().flatten());
    for answers in answers {
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

/// The WriteTxnMarkers version sent to other brokers.
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// How long another broker has to answer a WriteTxnMarkers.
const REMOTE_MARKER_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest WriteTxnMarkers answer accepted.
const REMOTE_MARKER_MAX_FRAME: usize = 1 << 20;

/// Sends `plan`'s markers for `partitions` to `leader` (one connection per call: markers
/// cross brokers once per transaction and partition leader); returns those not written.
async fn write_remote(
    shard: &Rc<Shard>,
    plan: &MarkerPlan,
    leader: i32,
    partitions: Vec<(String, i32)>,
) -> Vec<(String, i32)> {
    let inter_broker = crate::replication::inter_broker::of(shard);
    let listener = inter_broker.listener.as_deref();
    let Some(addr) = fetcher::leader_addr(&shard.image(), leader, listener) else {
        return partitions;
    };
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in &partitions {
        by_topic.entry(topic).or_default().push(*p);
    }
    let request = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: plan.producer_id,
            producer_epoch: plan.producer_epoch,
            transaction_result: plan.commit,
            topics: by_topic
                .into_iter()
                .map(|(name, partition_indexes)| WritableTxnMarkerTopic {
                    name: name.to_string(),
                    partition_indexes,
                    ..Default::default()
                })
                .collect(),
            coordinator_epoch: plan.coordinator_epoch,
            ..Default::default()
        }],
        ..Default::default()
    };
    let answer = async {
        let login = inter_broker.login.as_ref();
        let mut conn = fetcher::Conn::connect(addr, REMOTE_MARKER_MAX_FRAME, login).await?;
        conn.exchange::<_, WriteTxnMarkersResponse>(
            ApiKey::WriteTxnMarkers,
            WRITE_TXN_MARKERS_VERSION,
            &request,
            REMOTE_MARKER_TIMEOUT,
        )
        .await
    };
    match answer.await {
        Ok(response) => {
            let mut left = Vec::new();
            for marker in response.markers {
                for topic in marker.topics {
                    for p in topic.partitions {
                        let code = ErrorCode::from_code_or_unknown(p.error_code);
                        if !matches!(code, ErrorCode::None | ErrorCode::UnknownTopicOrPartition) {
                            left.push((topic.name.clone(), p.partition_index));
                        }
                    }
                }
            }
            left
        }
        Err(error) => {
            tracing::debug!(leader, %error, "WriteTxnMarkers to another broker failed");
            partitions
        }
    }
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
