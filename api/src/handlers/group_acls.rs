//! The topic half of the group APIs' authorization (Kafka's KafkaApis): the topics of an
//! OffsetCommit, OffsetDelete or OffsetFetch the request may not use are taken out before the
//! coordinator sees the request, and answered TOPIC_AUTHORIZATION_FAILED beside what the
//! coordinator answers. The group half (READ, DESCRIBE or DELETE on the group) is checked in
//! each handler first. Runs on the connection's shard; with no authorizer nothing is split.

use acl::AclOperation::{Describe, Read};
use acl::ResourceType::Topic;
use wire::generated::offset_commit_request::OffsetCommitRequestTopic;
use wire::generated::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use wire::generated::offset_delete_request::OffsetDeleteRequestTopic;
use wire::generated::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use wire::generated::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use wire::generated::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use wire::ErrorCode;

use super::RequestContext;
use crate::group::FetchedTopic;
use crate::shard::Shard;

const REFUSED: i16 = ErrorCode::TopicAuthorizationFailed as i16;

/// OffsetCommit (and TxnOffsetCommit): READ on each topic. Keeps the allowed topics in
/// `topics` and returns the refused ones' answers.
pub(super) fn split_commit(
    shard: &Shard,
    ctx: &RequestContext,
    topics: &mut Vec<OffsetCommitRequestTopic>,
) -> Vec<OffsetCommitResponseTopic> {
    let (allowed, refused) =
        shard.partition_authorized(ctx, Read, Topic, std::mem::take(topics), |t| &t.name);
    *topics = allowed;
    refused
        .into_iter()
        .map(|topic| OffsetCommitResponseTopic {
            name: topic.name,
            partitions: topic
                .partitions
                .iter()
                .map(|p| OffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: REFUSED,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

/// TxnOffsetCommit: READ on each topic, as `split_commit`.
pub(super) fn split_txn_commit(
    shard: &Shard,
    ctx: &RequestContext,
    topics: &mut Vec<TxnOffsetCommitRequestTopic>,
) -> Vec<TxnOffsetCommitResponseTopic> {
    let (allowed, refused) =
        shard.partition_authorized(ctx, Read, Topic, std::mem::take(topics), |t| &t.name);
    *topics = allowed;
    refused
        .into_iter()
        .map(|topic| TxnOffsetCommitResponseTopic {
            name: topic.name,
            partitions: topic
                .partitions
                .iter()
                .map(|p| TxnOffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: REFUSED,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

/// OffsetDelete: READ on each topic, as `split_commit`.
pub(super) fn split_delete(
    shard: &Shard,
    ctx: &RequestContext,
    topics: &mut Vec<OffsetDeleteRequestTopic>,
) -> Vec<OffsetDeleteResponseTopic> {
    let (allowed, refused) =
        shard.partition_authorized(ctx, Read, Topic, std::mem::take(topics), |t| &t.name);
    *topics = allowed;
    refused
        .into_iter()
        .map(|topic| OffsetDeleteResponseTopic {
            name: topic.name,
            partitions: topic
                .partitions
                .iter()
                .map(|p| OffsetDeleteResponsePartition {
                    partition_index: p.partition_index,
                    error_code: REFUSED,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

/// OffsetFetch of named topics: DESCRIBE on each. Keeps the allowed ones in `topics` and
/// returns the refused ones' answers (committed offset -1).
pub(super) fn split_fetch(
    shard: &Shard,
    ctx: &RequestContext,
    topics: &mut Vec<(String, Vec<i32>)>,
) -> Vec<FetchedTopic> {
    let (allowed, refused) =
        shard.partition_authorized(ctx, Describe, Topic, std::mem::take(topics), |t| &t.0);
    *topics = allowed;
    refused
        .into_iter()
        .map(|(name, partitions)| {
            let parts = partitions
                .into_iter()
                .map(|p| (p, -1, -1, Some(String::new()), REFUSED))
                .collect();
            (name, parts)
        })
        .collect()
}

/// OffsetFetch of every topic: the offsets of topics the request may not DESCRIBE are left
/// out.
pub(super) fn retain_described(
    shard: &Shard,
    ctx: &RequestContext,
    topics: &mut Vec<FetchedTopic>,
) {
    if shard.authorizes(ctx) {
        topics.retain(|(name, _)| shard.authorize(ctx, Describe, Topic, name));
    }
}
