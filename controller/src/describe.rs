//! DescribeQuorum (API 55) as a voter of the quorum answers it (KIP-595/KIP-836): the
//! leader, its epoch (the Raft term), the high watermark (the commit index), and each voter's
//! log end and last contact as the leader sees them. A voter that does not lead answers
//! NOT_LEADER_OR_FOLLOWER for the partition, as Kafka's `KafkaRaftClient` does; a partition
//! other than `__cluster_metadata-0` gets UNKNOWN_TOPIC_OR_PARTITION.

use metadata::cluster::ClusterLink;
use metadata::METADATA_TOPIC;
use wire::generated::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use wire::generated::{DescribeQuorumRequest, DescribeQuorumResponse};
use wire::ErrorCode;

use crate::Status;

/// The listener name Kafka gives a voter's endpoint.
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// The answer to `request` from a voter whose state is `status`.
pub fn describe_quorum(
    request: &DescribeQuorumRequest,
    status: &Status,
    link: Option<&ClusterLink>,
) -> DescribeQuorumResponse {
    let leads = status.leader == Some(status.id);
    let partition = |index: i32, topic: &str| {
        let (code, known) = if topic != METADATA_TOPIC || index != 0 {
            (ErrorCode::UnknownTopicOrPartition, false)
        } else if !leads {
            (ErrorCode::NotLeaderOrFollower, false)
        } else {
            (ErrorCode::None, true)
        };
        if !known {
            return PartitionData {
                partition_index: index,
                error_code: code.code(),
                error_message: Some(code.message().to_owned()),
                leader_id: status.leader.map_or(-1, |id| id as i32),
                leader_epoch: status.term as i32,
                high_watermark: -1,
                ..Default::default()
            };
        }
        PartitionData {
            partition_index: index,
            leader_id: status.id as i32,
            leader_epoch: status.term as i32,
            high_watermark: status.commit as i64 + 1,
            current_voters: status
                .voters
                .iter()
                .map(|v| ReplicaState {
                    replica_id: v.id as i32,
                    log_end_offset: v.match_index.map_or(-1, |m| m as i64 + 1),
                    last_fetch_timestamp: v.last_contact_ms.unwrap_or(-1),
                    last_caught_up_timestamp: v.last_contact_ms.unwrap_or(-1),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
    DescribeQuorumResponse {
        topics: request
            .topics
            .iter()
            .map(|topic| TopicData {
                topic_name: topic.topic_name.clone(),
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| partition(p.partition_index, &topic.topic_name))
                    .collect(),
                ..Default::default()
            })
            .collect(),
        nodes: link
            .map(|link| {
                link.voters
                    .iter()
                    .map(|(&id, addr)| Node {
                        node_id: id,
                        listeners: vec![Listener {
                            name: CONTROLLER_LISTENER.to_owned(),
                            host: addr.ip().to_string(),
                            port: addr.port(),
                            ..Default::default()
                        }],
                        ..Default::default()
                    })
                    .collect()
            })
            .unwrap_or_default(),
        ..Default::default()
    }
}
