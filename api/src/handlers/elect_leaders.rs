//! ElectLeaders (API 43, v0-2; KIP-460, `kafka-leader-election.sh`): in a cluster the request
//! goes to the active controller (as Kafka's brokers forward it), which elects and answers
//! once the changes are committed (see `metadata::elections`). A single node's partitions
//! have one replica, which leads them: the same rules answer from its image, with nothing to
//! change. A controller that cannot be reached gets NOT_CONTROLLER, which clients retry.

use std::rc::Rc;

use wire::generated::api::ApiKey;
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
    let response = match &shard.cluster {
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
    encode_response(&ctx, ctx.api_version, &response)
}
