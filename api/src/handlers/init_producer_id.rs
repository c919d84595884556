//! InitProducerId (v0-5) for idempotent producers: a new producer id at epoch 0, from the
//! shard's block of ids (see `Shard::next_producer_id`). As Kafka's TransactionCoordinator
//! does for a request without a transactional id, a KIP-360 request naming its current
//! producer id and epoch (v3+) also gets a new id at epoch 0: there is nothing to fence
//! without a transactional id.
//!
//! With a transactional id the transaction coordinator answers (`transactions.rs`): a new
//! id at epoch 0 for a new transactional id, the same id at the next epoch otherwise (fencing
//! the previous producer), after aborting a transaction the previous producer left open.

use std::rc::Rc;

use wire::generated::{InitProducerIdRequest, InitProducerIdResponse};
use wire::ErrorCode;

use acl::AclOperation::{IdempotentWrite, Write};
use acl::ResourceType::{Topic, TransactionalId};

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
    // KafkaApis: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster
    // or WRITE on some topic (`authorizeByResourceType`).
    let authorized = match request.transactional_id.as_deref() {
        Some(id) => shard
            .authorize(&ctx, Write, TransactionalId, id)
            .then_some(())
            .ok_or(ErrorCode::TransactionalIdAuthorizationFailed),
        None => (shard.authorize_cluster(&ctx, IdempotentWrite)
            || shard.authorize_any(&ctx, Write, Topic))
        .then_some(())
        .ok_or(ErrorCode::ClusterAuthorizationFailed),
    };
    let response = match request.transactional_id.as_deref() {
        _ if authorized.is_err() => refused(authorized.err().unwrap_or(ErrorCode::None)),
        // Kafka's coordinator: an empty transactional id is an invalid request.
        Some("") => refused(ErrorCode::InvalidRequest),
        Some(transactional_id) => {
            super::transactions::init_transactional(
                &shard,
                &request,
                transactional_id,
                ctx.api_version,
            )
            .await
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
