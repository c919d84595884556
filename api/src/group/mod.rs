//! The group coordinator: consumer groups and their committed offsets.
//!
//! A group lives on the shard that owns its partition of `__consumer_offsets` (Kafka's rule:
//! `abs(groupId.hashCode) % offsets.topic.num.partitions`), so everything about one group is
//! touched by one thread and needs no lock; requests for it that arrive on another shard are
//! forwarded over the mesh like partition requests, one call kind per group API (`calls`).
//!
//! Every change that must survive a restart (a commit, a group's generation and assignment, a
//! deletion) is first appended to that partition as a record of Kafka's group-coordinator
//! schemas (`records.rs`), through the same produce path, validation and flush policy as any
//! partition (`flush.policy=ack`: fdatasynced before the answer); the in-memory state changes
//! after the append succeeds. When a shard opens one of its `__consumer_offsets` partitions
//! (start-up, or the topic's creation) it replays the partition from its start before serving
//! its groups; until then their requests get COORDINATOR_LOAD_IN_PROGRESS.

pub use groups::{assignor, classic, consumer, records, GroupError};

pub mod calls;
mod execute;
mod load;
mod offsets;
mod serve;
pub mod state;
mod timers;
mod txn_offsets;

pub use calls::FetchedTopic;
use state::PartitionState;
pub use state::{Committed, Coordinator, Group, OFFSETS_TOPIC};
pub use txn_offsets::txn_offset_commit_everywhere;

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wire::generated::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use wire::generated::list_groups_response::ListedGroup;
use wire::generated::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use wire::generated::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use wire::generated::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use wire::group_records::{GroupMetadataKey, OffsetCommitKey, OffsetCommitValue};
use wire::record_batch::{self, BatchBuilder, Compression};
use wire::ErrorCode;

use crate::metadata::records::TopicId;
use crate::shard::Shard;
use classic::{JoinArgs, State, Step};
use consumer::ConsumerGroup;
use records::GroupRecord;

/// How often a shard's coordinator looks for expired sessions and ended join phases while it
/// has live groups (an idle coordinator waits on an event and uses no CPU).
const TICK: Duration = Duration::from_millis(100);

/// How long a group request waits for its shard to learn of `__consumer_offsets` or of its
/// partition there (another shard adopted the image that created it first) before it is
/// answered as for a topic or partition this shard does not have.
const IMAGE_LAG_WAIT: Duration = Duration::from_millis(1000);

/// Set once a shard of this process learned it owns a `__consumer_offsets` partition
/// (`Coordinator::opening`): from then on a shard whose image has no such topic is only
/// behind, and a group request there waits for it rather than answering at once. One
/// broker per process; in tests that run several, one may wait `IMAGE_LAG_WAIT` for nothing.
static OFFSETS_TOPIC_KNOWN: AtomicBool = AtomicBool::new(false);

/// Bytes read per step when replaying a partition at load.
const LOAD_READ_BYTES: usize = 4 << 20;

/// Kafka's `Utils.abs(groupId.hashCode()) % partitions`, with Java's String.hashCode over
/// UTF-16 code units, so a group maps to the same partition as in Kafka.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % partitions.max(1)
}

/// Topic lookups for consumer-group subscriptions, from the shard's metadata image.
fn topic_lookup(
    image: &crate::metadata::image::Image,
) -> impl Fn(&str) -> Option<(TopicId, i32)> + '_ {
    move |name: &str| {
        image
            .topic(name)
            .map(|t| (t.topic_id, t.partitions.len() as i32))
    }
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Offsets of one group to expire: (partition, its topic id, group, (topic, partition)s).
type ExpiryPlan = (i32, TopicId, String, Vec<(String, i32)>);

/// `locate`, but first, when this shard's image has no `__consumer_offsets` while another
/// shard already knows the topic (`OFFSETS_TOPIC_KNOWN`), waits (at most `IMAGE_LAG_WAIT`)
/// for this one to adopt it: another shard may have answered FindCoordinator before this
/// one learned of the topic, and librdkafka fails `committed()` on the
/// COORDINATOR_NOT_AVAILABLE it would get meanwhile. Without the topic anywhere the answer
/// comes at once, as before.
pub async fn locate_when_known(shard: &Shard, group_id: &str) -> Result<(usize, i32), ErrorCode> {
    if OFFSETS_TOPIC_KNOWN.load(Ordering::Relaxed) && shard.image().topic(OFFSETS_TOPIC).is_none() {
        let known = |image: &crate::metadata::image::Image| image.topic(OFFSETS_TOPIC).is_some();
        shard.wait_for_image(known, IMAGE_LAG_WAIT).await;
    }
    locate(shard, group_id)
}

/// Where a group's coordinator is: (owning shard, partition of `__consumer_offsets`).
pub fn locate(shard: &Shard, group_id: &str) -> Result<(usize, i32), ErrorCode> {
    let image = shard.image();
    let Some(topic) = image.topic(OFFSETS_TOPIC) else {
        return Err(ErrorCode::CoordinatorNotAvailable);
    };
    let count = topic.partitions.len() as i32;
    let partition = partition_for(group_id, count);
    let Some(owner) = topic.partition(partition) else {
        return Err(ErrorCode::CoordinatorNotAvailable);
    };
    Ok((shard.owner(owner), partition))
}

fn describe(group_id: &str, group: &Group) -> DescribedGroup {
    let classic = &group.classic;
    let stable = classic.state() == State::Stable;
    let protocol = classic.protocol_name.clone().unwrap_or_default();
    DescribedGroup {
        error_code: 0,
        group_id: group_id.to_string(),
        group_state: group.state_name().into(),
        protocol_type: classic.protocol_type.clone().unwrap_or_default(),
        protocol_data: if stable {
            protocol.clone()
        } else {
            String::new()
        },
        members: classic
            .members()
            .map(|m| DescribedGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                member_metadata: if stable {
                    m.protocols
                        .iter()
                        .find(|(n, _)| *n == protocol)
                        .map(|(_, md)| md.clone())
                        .unwrap_or_default()
                } else {
                    Bytes::new()
                },
                member_assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
                ..Default::default()
            })
            .collect(),
        authorized_operations: i32::MIN,
        ..Default::default()
    }
}

/// An OffsetCommit answer naming every partition of the request with `code(i, j)`, the code
/// of partition `j` of topic `i` (indexes in the request).
pub fn offset_commit_response(
    request: &OffsetCommitRequest,
    code: &dyn Fn(usize, usize) -> ErrorCode,
) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: request
            .topics
            .iter()
            .enumerate()
            .map(|(i, t)| OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(j, p)| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code(i, j).code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The group a KIP-848 record belongs to.
fn consumer_record_group(record: &GroupRecord) -> Option<&str> {
    Some(match record {
        GroupRecord::ConsumerGroupMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupPartitionMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupMemberMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupTargetAssignmentMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupTargetAssignmentMember(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupCurrentMemberAssignment(k, _) => &k.group_id,
        GroupRecord::OffsetCommit(..) | GroupRecord::GroupMetadata(..) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_match_kafka() {
        // Java: Math.abs("my-group".hashCode()) % 50 etc., computed with Kafka's formula.
        assert_eq!(partition_for("", 50), 0);
        let h = "my-group"
            .chars()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
        assert_eq!(partition_for("my-group", 50), h.abs() % 50);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Kafka's Utils.abs gives 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        for g in ["a", "group-1", "ü-group", "𝄞"] {
            let p = partition_for(g, 7);
            assert!((0..7).contains(&p));
        }
    }
}
