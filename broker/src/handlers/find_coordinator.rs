//! FindCoordinator, until the group and transaction coordinators exist: every key is answered
//! COORDINATOR_NOT_AVAILABLE (retriable), so a client that uses groups or transactions waits
//! and retries instead of failing on an unknown API.
//!
//! Why it is served at all before then: librdkafka enables its LZ4 codec only for brokers that
//! advertise FindCoordinator (its feature map dates LZ4 support by that API, 0.8.2); without it
//! every `compression.type=lz4` batch from librdkafka, kcat or confluent-kafka arrives
//! uncompressed.

use wire::generated::find_coordinator_response::Coordinator;
use wire::generated::{FindCoordinatorRequest, FindCoordinatorResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};

const NOT_YET: &str = "this broker has no group or transaction coordinator yet";

pub fn handle(ctx: &RequestContext, request: FindCoordinatorRequest) -> Response {
    let code = ErrorCode::CoordinatorNotAvailable.code();
    // v4+ (KIP-699) batches keys; earlier versions carry one key and answer at the top level.
    let response = if ctx.api_version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| Coordinator {
                key,
                node_id: -1,
                host: String::new(),
                port: -1,
                error_code: code,
                error_message: Some(NOT_YET.into()),
                ..Default::default()
            })
            .collect();
        FindCoordinatorResponse {
            coordinators,
            ..Default::default()
        }
    } else {
        FindCoordinatorResponse {
            error_code: code,
            error_message: Some(NOT_YET.into()),
            node_id: -1,
            host: String::new(),
            port: -1,
            ..Default::default()
        }
    };
    encode_response(ctx, ctx.api_version, &response)
}
