//! InitProducerId (v0-5) for idempotent producers: a new producer id at epoch 0, from the
//! shard's block of ids (see `Shard::next_producer_id`). As Kafka's TransactionCoordinator
//! does for a request without a transactional id, a KIP-360 request naming its current
//! producer id and epoch (v3+) also gets a new id at epoch 0: there is nothing to fence
//! without a transactional id.
//!
//! Transactions are not served. A request with a transactional id is answered
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the code Redpanda gives transactional requests when
//! its transactions are disabled: every client treats it as fatal at once, with a message
//! naming transactions, instead of retrying a coordinator that will never come (NOT_COORDINATOR
//! and COORDINATOR_NOT_AVAILABLE loop until the client's timeout).

use std::rc::Rc;

use wire::generated::{InitProducerIdRequest, InitProducerIdResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::shard::Shard;

pub async fn handle(
    shard: Rc<Shard>,
    request: InitProducerIdRequest,
    ctx: RequestContext,
) -> Response {
    let refused = |code: ErrorCode| InitProducerIdResponse {
        error_code: code.code(),
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    };
    let response = match request.transactional_id.as_deref() {
        // Kafka's coordinator: an empty transactional id is an invalid request.
        Some("") => refused(ErrorCode::InvalidRequest),
        Some(transactional_id) => {
            tracing::info!(
                transactional_id,
                "InitProducerId with a transactional id refused: transactions are not supported"
            );
            refused(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        // KafkaApis: a producer id without an epoch, or the reverse, is an invalid request.
        None if (request.producer_id == -1) != (request.producer_epoch == -1) => {
            refused(ErrorCode::InvalidRequest)
        }
        None => match shard.next_producer_id().await {
            Ok(producer_id) => InitProducerIdResponse {
                error_code: 0,
                producer_id,
                producer_epoch: 0,
                ..Default::default()
            },
            Err(code) => InitProducerIdResponse {
                error_code: code,
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            },
        },
    };
    encode_response(&ctx, ctx.api_version, &response)
}
