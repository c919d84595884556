//! ElectLeaders (API 43, v0-2; KIP-460, `kafka-leader-election.sh`): in a cluster the request
//! goes to the active controller (as Kafka's brokers forward it), which elects and answers
//! once the changes are committed (see `metadata::elections`). A single node's partitions
//! have one replica, which leads them: the same rules answer from its image, with nothing to
//! change. A controller that cannot be reached gets NOT_CONTROLLER, which clients retry.

use std::rc::Rc;

use wire::generated::api::ApiKey;
use wire::generated::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use wire::generated::{ElectLeadersRequest, ElectLeadersResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::metadata::elections::elect_leaders;
use crate::shard::Shard;

/// The version forwarded to the controller (the newest; answers are re-encoded at the
/// client's version).
const FORWARD_VERSION: i16 = 2;

pub async fn handle(
    shard: Rc<Shard>,
    request: ElectLeadersRequest,
    ctx: RequestContext,
) -> Response {
    // Kafka (ControllerApis): ALTER on the cluster, or the whole request is refused.
    let response = match &shard.cluster {
        _ if !shard.authorize_cluster(&ctx, acl::AclOperation::Alter) => ElectLeadersResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            ..Default::default()
        },
        Some(link) => {
            let to = link.leader_addr();
            crate::shard::to_controller::call::<_, ElectLeadersResponse>(
                to,
                ApiKey::ElectLeaders,
                FORWARD_VERSION,
                &request,
            )
            .await
            .unwrap_or_else(|error| {
                tracing::info!(%error, "ElectLeaders could not reach the active controller");
                ElectLeadersResponse {
                    error_code: ErrorCode::NotController.code(),
                    ..Default::default()
                }
            })
        }
        None => {
            let (records, response) = elect_leaders(&shard.image(), &request);
            debug_assert!(
                records.is_empty(),
                "a single node's partitions need no election"
            );
            response
        }
    };
    let response = if ctx.api_version == 0 {
        per_partition(response, &request)
    } else {
        response
    };
    encode_response(&ctx, ctx.api_version, &response)
}

/// v0 has no top-level error: a refusal of the whole request goes to every partition it
/// named (Kafka's `getErrorResponse`).
fn per_partition(
    response: ElectLeadersResponse,
    request: &ElectLeadersRequest,
) -> ElectLeadersResponse {
    if response.error_code == 0 {
        return response;
    }
    let code = response.error_code;
    let replica_election_results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| ReplicaElectionResult {
            topic: t.topic.clone(),
            partition_result: t
                .partitions
                .iter()
                .map(|&partition_id| PartitionResult {
                    partition_id,
                    error_code: code,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    ElectLeadersResponse {
        replica_election_results,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::generated::elect_leaders_request::TopicPartitions;

    #[test]
    fn a_v0_refusal_goes_to_every_named_partition() {
        let request = ElectLeadersRequest {
            topic_partitions: Some(vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![0, 3],
                ..Default::default()
            }]),
            ..Default::default()
        };
        let refused = ElectLeadersResponse {
            error_code: ErrorCode::NotController.code(),
            ..Default::default()
        };
        let v0 = per_partition(refused, &request);
        assert_eq!(v0.error_code, 0);
        let codes: Vec<(i32, i16)> = v0.replica_election_results[0]
            .partition_result
            .iter()
            .map(|p| (p.partition_id, p.error_code))
            .collect();
        let code = ErrorCode::NotController.code();
        assert_eq!(codes, vec![(0, code), (3, code)]);
        let mut out = bytes::BytesMut::new();
        wire::primitives::Encodable::encode(&v0, &mut out, 0).unwrap();
    }
}
