//! A cluster's active controller executing the admin requests other brokers forwarded to its
//! CONTROLLER listener (KIP-590): the same handlers as a client's request, run on the
//! metadata core, answered with the whole response frame. Shard 0 also follows the committed
//! image here: each one the quorum applies goes to every shard.

use std::rc::Rc;

use bytes::Bytes;
use futures::StreamExt;
use wire::generated::api::{self, ApiKey};
use wire::generated::{AllocateProducerIdsRequest, AllocateProducerIdsResponse, RequestHeader};
use wire::primitives::Decodable;

use super::{decode, encode_response, RequestContext};
use crate::forward;
use crate::shard::Shard;

/// Shard 0 of a cluster node: serves the requests forwarded to this node's controller, each in
/// its own task, until the controller thread drops its end.
pub async fn serve(shard: Rc<Shard>) {
    let Some(mut requests) = shard.cluster.as_ref().and_then(|c| c.take_forwarded()) else {
        return;
    };
    while let Some(request) = requests.next().await {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            let answer = answer(&shard, request.frame).await;
            let _ = request.reply.send(answer);
        })
        .detach();
    }
}

/// Shard 0 of a cluster node: hands every image the quorum commits to every shard, in order.
pub async fn follow_committed(shard: Rc<Shard>) {
    let Some(link) = shard.cluster.clone() else {
        return;
    };
    let mut published = None;
    loop {
        let changed = link.changed.listen();
        let (image, applied) = link.committed();
        if published != Some(applied) {
            published = Some(applied);
            for failure in shard.publish(image).await {
                tracing::error!(error = %failure.error, "partitions of a committed topic cannot be opened; they stay offline");
            }
            continue; // another may have come meanwhile
        }
        changed.await;
    }
}

async fn answer(shard: &Rc<Shard>, frame: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut frame = Bytes::from(frame);
    if frame.len() < 8 {
        return Err("forwarded request shorter than a request header".into());
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let header = RequestHeader::decode(
        &mut frame,
        api::request_header_version(api_key, api_version),
    )
    .map_err(|error| format!("bad forwarded request header: {error}"))?;
    let ctx = RequestContext {
        api_key,
        api_version,
        correlation_id: header.correlation_id,
        client_id: header.client_id.unwrap_or_default(),
        listener: Rc::from("CONTROLLER"),
        principal: Rc::from("User:ANONYMOUS"),
        host: Rc::from(""),
        // The broker that forwarded it authorized its client's request (see
        // `handlers::authorize`); the CONTROLLER listener carries no principal of that client.
        trusted: true,
        tally: crate::handoff::Tally::new(shard.id, shard.shard_count(), false, false),
        error_counts: None,
        throttle_ms: 0,
        muted_until: Default::default(),
        request_quota: None,
    };
    let body = frame;
    let shard = shard.clone();
    let response = match ApiKey::from_i16(api_key) {
        Some(ApiKey::CreateTopics) => {
            super::admin::handle_create_topics(shard, decode(&ctx, body)?, ctx).await
        }
        Some(ApiKey::DeleteTopics) => {
            super::admin::handle_delete_topics(shard, decode(&ctx, body)?, ctx).await
        }
        Some(ApiKey::CreatePartitions) => {
            super::create_partitions::handle(shard, decode(&ctx, body)?, ctx).await
        }
        Some(ApiKey::AlterConfigs) => {
            super::alter_configs::handle_alter_configs(shard, decode(&ctx, body)?, ctx).await
        }
        Some(ApiKey::IncrementalAlterConfigs) => {
            super::alter_configs::handle_incremental_alter_configs(shard, decode(&ctx, body)?, ctx)
                .await
        }
        Some(ApiKey::AlterUserScramCredentials) => {
            super::scram_credentials::alter(shard, decode(&ctx, body)?, ctx).await
        }
        Some(ApiKey::AlterClientQuotas) => {
            super::client_quotas::alter(shard, decode(&ctx, body)?, ctx).await
        }
        Some(ApiKey::CreateAcls) => super::acls::create(shard, decode(&ctx, body)?, ctx).await,
        Some(ApiKey::DeleteAcls) => super::acls::delete(shard, decode(&ctx, body)?, ctx).await,
        Some(ApiKey::AllocateProducerIds) => {
            let _request: AllocateProducerIdsRequest = decode(&ctx, body)?;
            let response = match shard.call(0, forward::AllocateProducerIds).await {
                Ok(first) => AllocateProducerIdsResponse {
                    producer_id_start: first,
                    producer_id_len: crate::metadata::PRODUCER_ID_BLOCK_SIZE as i32,
                    ..Default::default()
                },
                Err(code) => AllocateProducerIdsResponse {
                    error_code: code,
                    producer_id_start: -1,
                    ..Default::default()
                },
            };
            encode_response(&ctx, ctx.api_version, &response)
        }
        _ => {
            return Err(format!(
                "API key {api_key} is not forwarded to the controller"
            ))
        }
    };
    match response? {
        Some(frame) => frame.to_vec().map_err(|error| error.to_string()),
        None => Err("no response".into()),
    }
}
