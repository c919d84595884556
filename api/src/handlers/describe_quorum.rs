//! DescribeQuorum (API 55, KIP-595/KIP-836/KIP-853): the state of the metadata quorum, as
//! `kafka-metadata-quorum.sh describe --status` and `--replication` and the Admin client's
//! `describeMetadataQuorum` read it.
//!
//! A node with no quorum configured is a single combined node, its own quorum (one voter, the
//! leader, never an election): it answers as a Kafka controller that is alone in its quorum
//! would. The leader epoch of such a node is 1 (the first epoch a KRaft quorum elects), its
//! high watermark the metadata log's end, and the one voter's fetch and caught-up times "now"
//! (Kafka reports the current time for the leader). The one partition asked about must be
//! `__cluster_metadata-0`; anything else gets UNKNOWN_TOPIC_OR_PARTITION at the partition
//! level, as Kafka's `KafkaRaftClient` answers.

use std::rc::Rc;

use wire::generated::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use wire::generated::{DescribeQuorumRequest, DescribeQuorumResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::metadata::METADATA_TOPIC;
use crate::shard::Shard;

/// The metadata log's one partition.
const METADATA_PARTITION: i32 = 0;

/// The epoch a quorum of one is in (it never holds an election).
const SINGLE_NODE_LEADER_EPOCH: i32 = 1;

pub async fn handle(
    shard: Rc<Shard>,
    request: DescribeQuorumRequest,
    ctx: RequestContext,
) -> Response {
    // Kafka (ControllerApis): DESCRIBE on the cluster, or the whole request is refused.
    if !shard.authorize_cluster(&ctx, acl::AclOperation::Describe) {
        let code = ErrorCode::ClusterAuthorizationFailed;
        let response = DescribeQuorumResponse {
            error_code: code.code(),
            error_message: Some(code.message().to_string()),
            ..Default::default()
        };
        return encode_response(&ctx, ctx.api_version, &response);
    }
    let asked_for_metadata = request.topics.len() == 1
        && request.topics[0].topic_name == METADATA_TOPIC
        && request.topics[0].partitions.len() == 1
        && request.topics[0].partitions[0].partition_index == METADATA_PARTITION;
    if let Some(link) = &shard.cluster {
        // A cluster's brokers forward it to the active controller (KIP-836), which knows
        // every voter's progress.
        let to = link.leader().and_then(|id| link.voters.get(&id).copied());
        let version = ctx.api_version;
        let forwarded: Result<DescribeQuorumResponse, _> = crate::shard::to_controller::call(
            to,
            wire::generated::api::ApiKey::DescribeQuorum,
            version,
            &request,
        )
        .await;
        let response = forwarded.unwrap_or_else(|error| {
            tracing::info!(%error, "DescribeQuorum not answered by the active controller");
            DescribeQuorumResponse {
                error_code: ErrorCode::NotController.code(),
                error_message: Some(error.to_string()),
                ..Default::default()
            }
        });
        return encode_response(&ctx, version, &response);
    }
    let response = if asked_for_metadata {
        let image = shard.image();
        let log_end = image.offset.map_or(0, |last| last as i64 + 1);
        single_node(
            &shard.config,
            &ctx.listener,
            log_end,
            shard::storage::Clock::Real.now_ms(),
        )
    } else {
        unknown_partition(&request)
    };
    encode_response(&ctx, ctx.api_version, &response)
}

/// The answer of a node that is its own quorum, whose metadata log ends at `log_end`.
fn single_node(
    config: &crate::config::BrokerConfig,
    listener: &str,
    log_end: i64,
    now_ms: i64,
) -> DescribeQuorumResponse {
    let node_id = config.node_id;
    let endpoint = config.advertised_for(listener);
    let voter = ReplicaState {
        replica_id: node_id,
        log_end_offset: log_end,
        last_fetch_timestamp: now_ms,
        last_caught_up_timestamp: now_ms,
        ..Default::default()
    };
    DescribeQuorumResponse {
        error_code: 0,
        error_message: None,
        topics: vec![TopicData {
            topic_name: METADATA_TOPIC.to_owned(),
            partitions: vec![PartitionData {
                partition_index: METADATA_PARTITION,
                error_code: 0,
                error_message: None,
                leader_id: node_id,
                leader_epoch: SINGLE_NODE_LEADER_EPOCH,
                high_watermark: log_end,
                current_voters: vec![voter],
                observers: Vec::new(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        // The voter's endpoint: the one it is reached at through this listener (a quorum of
        // one has no separate CONTROLLER listener).
        nodes: vec![Node {
            node_id,
            listeners: vec![Listener {
                name: endpoint.name.clone(),
                host: endpoint.host.clone(),
                port: endpoint.port,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Kafka's answer to a DescribeQuorum for a partition other than the metadata log's: every
/// partition asked about gets UNKNOWN_TOPIC_OR_PARTITION.
fn unknown_partition(request: &DescribeQuorumRequest) -> DescribeQuorumResponse {
    let code = ErrorCode::UnknownTopicOrPartition;
    DescribeQuorumResponse {
        error_code: 0,
        error_message: None,
        topics: request
            .topics
            .iter()
            .map(|topic| TopicData {
                topic_name: topic.topic_name.clone(),
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| PartitionData {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                        error_message: Some(code.message().to_owned()),
                        leader_id: -1,
                        leader_epoch: -1,
                        high_watermark: -1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::generated::describe_quorum_request::{
        PartitionData as AskPartition, TopicData as AskTopic,
    };

    fn ask(topic: &str, partition: i32) -> DescribeQuorumRequest {
        DescribeQuorumRequest {
            topics: vec![AskTopic {
                topic_name: topic.to_owned(),
                partitions: vec![AskPartition {
                    partition_index: partition,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_single_node_is_leader_and_only_voter_at_the_log_end() {
        let config = crate::config::BrokerConfig::default();
        let r = single_node(&config, "PLAINTEXT", 42, 1_000);
        let p = &r.topics[0].partitions[0];
        assert_eq!(r.topics[0].topic_name, "__cluster_metadata");
        assert_eq!(
            (p.leader_id, p.leader_epoch, p.high_watermark),
            (config.node_id, 1, 42)
        );
        assert_eq!(p.current_voters.len(), 1);
        assert_eq!(p.current_voters[0].replica_id, config.node_id);
        assert_eq!(p.current_voters[0].log_end_offset, 42);
        assert_eq!(p.current_voters[0].last_caught_up_timestamp, 1_000);
        assert!(p.observers.is_empty());
        assert_eq!(r.nodes[0].node_id, config.node_id);
        assert_eq!(r.nodes[0].listeners[0].port, 9092);
    }

    #[test]
    fn another_partition_is_unknown() {
        for request in [ask("__cluster_metadata", 1), ask("orders", 0)] {
            let r = unknown_partition(&request);
            let p = &r.topics[0].partitions[0];
            assert_eq!(p.error_code, ErrorCode::UnknownTopicOrPartition.code());
            assert_eq!(p.leader_id, -1);
        }
    }
}
