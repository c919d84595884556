//! Transaction APIs (KIP-98): InitProducerId with a transactional id, AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions and
//! ListTransactions.
//!
//! Each handler finds the shard that coordinates the transactional id (the owner of its
//! `__transaction_state` partition, `txn::locate`), makes its call there (`txn::calls`,
//! over the mesh when it is another shard) and encodes the typed reply for the request's
//! version. TxnOffsetCommit goes to the group's coordinator instead, like OffsetCommit.
//! The transaction version served is 1 (explicit AddPartitionsToTxn, the epoch bumped by
//! InitProducerId): no `transaction.version` feature is advertised, so clients of Kafka 4
//! use version 1 too.

use std::collections::BTreeMap;
use std::rc::Rc;

use wire::generated::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use wire::generated::describe_transactions_response::{TopicData, TransactionState};
use wire::generated::list_transactions_response::TransactionState as ListedTransaction;
use wire::generated::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use wire::generated::*;
use wire::ErrorCode;

use acl::AclOperation::{Alter, ClusterAction, Describe, Read, Write};
use acl::ResourceType::{Group, Topic, TransactionalId};

use super::{encode_response, RequestContext, Response};
use crate::group::{self, OFFSETS_TOPIC};
use crate::shard::Shard;
use crate::txn::calls::{
    AddToTxn, DescribeTxn, EndTxn, InitTxnProducer, ListTxns, MarkerPart, TxnView,
};
use crate::txn::{self, TXN_TOPIC};

/// Creates `__transaction_state` if it does not exist (compacted,
/// `transaction.state.log.*`), as Kafka does on the first FindCoordinator of a
/// transactional id.
pub(super) async fn ensure_txn_topic(shard: &Rc<Shard>) -> Result<(), ErrorCode> {
    let config = &shard.config.transactions;
    super::internal_topics::ensure(
        shard,
        TXN_TOPIC,
        config.state_log_num_partitions,
        config.state_log_segment_bytes,
    )
    .await
}

/// The leader of `key`'s `__transaction_state` partition, for FindCoordinator in a cluster.
pub(super) fn coordinator_partition(shard: &Shard, key: &str) -> Option<i32> {
    let image = shard.image();
    let topic = image.topic(TXN_TOPIC)?;
    let partition = group::partition_for(key, topic.partitions.len() as i32);
    Some(topic.partition(partition)?.leader)
}

fn refuse_empty(transactional_id: &str) -> Result<(), ErrorCode> {
    if transactional_id.is_empty() {
        return Err(ErrorCode::InvalidRequest);
    }
    Ok(())
}

/// Kafka's `KafkaApis`: clients older than PRODUCER_FENCED (InitProducerId below v4,
/// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn below v2) get INVALID_PRODUCER_EPOCH.
fn fenced_for(code: ErrorCode, version: i16, first_knowing: i16) -> ErrorCode {
    if code == ErrorCode::ProducerFenced && version < first_knowing {
        ErrorCode::InvalidProducerEpoch
    } else {
        code
    }
}

/// Makes `make(partition)` on the coordinator of `transactional_id`. An empty transactional
/// id is INVALID_REQUEST before its coordinator is looked for (Kafka's
/// `TransactionCoordinator` checks it first in every handler).
async fn call<C: crate::forward::Serve<Shard>>(
    shard: &Rc<Shard>,
    transactional_id: &str,
    make: impl FnOnce(i32) -> C,
) -> Result<C::Reply, ErrorCode> {
    refuse_empty(transactional_id)?;
    let (target, partition) = txn::locate(shard, transactional_id).await?;
    Ok(shard.call(target, make(partition)).await)
}

/// InitProducerId with a transactional id.
pub(super) async fn init_transactional(
    shard: &Rc<Shard>,
    request: &InitProducerIdRequest,
    transactional_id: &str,
    version: i16,
) -> InitProducerIdResponse {
    // KIP-360: a producer id and epoch the client already has (v3+), both or neither.
    let expected =
        (request.producer_id >= 0).then_some((request.producer_id, request.producer_epoch));
    let init = |partition| InitTxnProducer {
        partition,
        transactional_id: transactional_id.to_string(),
        txn_timeout_ms: request.transaction_timeout_ms,
        expected,
    };
    match call(shard, transactional_id, init).await {
        Ok(Ok((producer_id, producer_epoch))) => InitProducerIdResponse {
            error_code: 0,
            producer_id,
            producer_epoch,
            ..Default::default()
        },
        Ok(Err(code)) | Err(code) => InitProducerIdResponse {
            error_code: fenced_for(code, version, 4).code(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        },
    }
}

fn topic_results(
    topics: &[add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    code: &mut dyn FnMut() -> ErrorCode,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| AddPartitionsToTxnTopicResult {
            name: t.name.clone(),
            results_by_partition: t
                .partitions
                .iter()
                .map(|&p| AddPartitionsToTxnPartitionResult {
                    partition_index: p,
                    partition_error_code: code().code(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

/// One transaction of an AddPartitionsToTxn: its partitions' codes, in request order.
async fn add_partitions(
    shard: &Rc<Shard>,
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    topics: &[add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    verify_only: bool,
    version: i16,
    writable: &dyn Fn(&str) -> bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let image = shard.image();
    let partitions: Vec<(String, i32)> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.name.clone(), p)))
        .collect();
    // Kafka: unknown partitions are UNKNOWN_TOPIC_OR_PARTITION and the others
    // OPERATION_NOT_ATTEMPTED; internal topics may not be written by clients.
    // With an authorizer, a topic needs WRITE (decided per partition listed here; clients
    // add a handful per call).
    let refusal = |(topic, p): &(String, i32)| {
        if topic == OFFSETS_TOPIC || topic == TXN_TOPIC || !writable(topic) {
            Some(ErrorCode::TopicAuthorizationFailed)
        } else if image.topic(topic).and_then(|t| t.partition(*p)).is_none() {
            Some(ErrorCode::UnknownTopicOrPartition)
        } else {
            None
        }
    };
    if partitions.iter().any(|p| refusal(p).is_some()) && !verify_only {
        let mut each = partitions.iter();
        return topic_results(topics, &mut || {
            let p = each.next().expect("one code per partition");
            refusal(p).unwrap_or(ErrorCode::OperationNotAttempted)
        });
    }
    let add = |partition| AddToTxn {
        partition,
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        partitions: partitions.clone(),
        verify_only,
    };
    match call(shard, transactional_id, add).await {
        Ok(Ok(codes)) => {
            let mut each = codes.into_iter();
            topic_results(topics, &mut || each.next().unwrap_or(ErrorCode::None))
        }
        Ok(Err(code)) | Err(code) => {
            let code = fenced_for(code, version, 2);
            topic_results(topics, &mut || code)
        }
    }
}

pub async fn add_partitions_to_txn(
    shard: Rc<Shard>,
    request: AddPartitionsToTxnRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let response = if version < 4 {
        // Kafka: a client's request needs WRITE on the transactional id, then on each topic.
        let id = &request.v3_and_below_transactional_id;
        let results = if !shard.authorize(&ctx, Write, TransactionalId, id) {
            topic_results(&request.v3_and_below_topics, &mut || {
                ErrorCode::TransactionalIdAuthorizationFailed
            })
        } else {
            let writable = |topic: &str| shard.authorize(&ctx, Write, Topic, topic);
            add_partitions(
                &shard,
                id,
                (
                    request.v3_and_below_producer_id,
                    request.v3_and_below_producer_epoch,
                ),
                &request.v3_and_below_topics,
                false,
                version,
                &writable,
            )
            .await
        };
        AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below: results,
            ..Default::default()
        }
    } else if !shard.authorize_cluster(&ctx, ClusterAction) {
        // v4+ come from brokers: CLUSTER_ACTION, or the whole request is refused.
        AddPartitionsToTxnResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            ..Default::default()
        }
    } else {
        // v4+ come from brokers (KIP-890 verification), one result per transaction.
        let mut results = Vec::with_capacity(request.transactions.len());
        for t in &request.transactions {
            let topic_results = add_partitions(
                &shard,
                &t.transactional_id,
                (t.producer_id, t.producer_epoch),
                &t.topics,
                t.verify_only,
                version,
                &|_| true,
            )
            .await;
            results.push(AddPartitionsToTxnResult {
                transactional_id: t.transactional_id.clone(),
                topic_results,
                ..Default::default()
            });
        }
        AddPartitionsToTxnResponse {
            results_by_transaction: results,
            ..Default::default()
        }
    };
    encode_response(&ctx, version, &response)
}

pub async fn add_offsets_to_txn(
    shard: Rc<Shard>,
    request: AddOffsetsToTxnRequest,
    ctx: RequestContext,
) -> Response {
    // The group's `__consumer_offsets` partition joins the transaction (Kafka's
    // `handleAddOffsetsToTransaction`), so its marker ends the transaction's offsets. Kafka:
    // WRITE on the transactional id, then READ on the group.
    let code = match group::locate_when_known(&shard, &request.group_id).await {
        _ if !shard.authorize(&ctx, Write, TransactionalId, &request.transactional_id) => {
            ErrorCode::TransactionalIdAuthorizationFailed
        }
        _ if !shard.authorize(&ctx, Read, Group, &request.group_id) => {
            ErrorCode::GroupAuthorizationFailed
        }
        Err(code) => code,
        Ok((_, offsets_partition)) => {
            let add = |partition| AddToTxn {
                partition,
                transactional_id: request.transactional_id.clone(),
                producer_id: request.producer_id,
                producer_epoch: request.producer_epoch,
                partitions: vec![(OFFSETS_TOPIC.to_string(), offsets_partition)],
                verify_only: false,
            };
            match call(&shard, &request.transactional_id, add).await {
                Ok(Ok(codes)) => codes.first().copied().unwrap_or(ErrorCode::None),
                Ok(Err(code)) | Err(code) => code,
            }
        }
    };
    let response = AddOffsetsToTxnResponse {
        error_code: fenced_for(code, ctx.api_version, 2).code(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn end_txn(shard: Rc<Shard>, request: EndTxnRequest, ctx: RequestContext) -> Response {
    let end = |partition| EndTxn {
        partition,
        transactional_id: request.transactional_id.clone(),
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
        commit: request.committed,
    };
    // Kafka: WRITE on the transactional id.
    let allowed = shard.authorize(&ctx, Write, TransactionalId, &request.transactional_id);
    let reply = if allowed {
        call(&shard, &request.transactional_id, end).await
    } else {
        Err(ErrorCode::TransactionalIdAuthorizationFailed)
    };
    let response = match reply {
        Ok(Ok((producer_id, producer_epoch))) => EndTxnResponse {
            error_code: 0,
            producer_id,
            producer_epoch,
            ..Default::default()
        },
        Ok(Err(code)) | Err(code) => EndTxnResponse {
            error_code: fenced_for(code, ctx.api_version, 2).code(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        },
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn txn_offset_commit(
    shard: Rc<Shard>,
    request: TxnOffsetCommitRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    // Kafka: WRITE on the transactional id, READ on the group (either refused: every
    // partition), then READ on each topic.
    if !shard.authorize(&ctx, Write, TransactionalId, &request.transactional_id) {
        let code = ErrorCode::TransactionalIdAuthorizationFailed;
        let response = group::txn_offset_commit_everywhere(&request, code);
        return encode_response(&ctx, version, &response);
    }
    if !shard.authorize(&ctx, Read, Group, &request.group_id) {
        let code = ErrorCode::GroupAuthorizationFailed;
        let response = group::txn_offset_commit_everywhere(&request, code);
        return encode_response(&ctx, version, &response);
    }
    let mut request = request;
    let had_topics = !request.topics.is_empty();
    let refused = super::group_acls::split_txn_commit(&shard, &ctx, &mut request.topics);
    let mut response = match group::locate_when_known(&shard, &request.group_id).await {
        _ if had_topics && request.topics.is_empty() => TxnOffsetCommitResponse::default(),
        Err(code) => group::txn_offset_commit_everywhere(&request, code),
        Ok((target, partition)) => {
            let commit = group::calls::TxnOffsetCommit {
                partition,
                request,
                version,
            };
            shard.call(target, commit).await
        }
    };
    response.topics.extend(refused);
    encode_response(&ctx, version, &response)
}

/// WriteTxnMarkers from a coordinator (another broker's, in a cluster): each marker is
/// written by the shard owning its partition.
pub async fn write_txn_markers(
    shard: Rc<Shard>,
    request: WriteTxnMarkersRequest,
    ctx: RequestContext,
) -> Response {
    let image = shard.image();
    // Kafka: ALTER or CLUSTER_ACTION on the cluster, or every partition is refused.
    let allowed =
        shard.authorize_cluster(&ctx, Alter) || shard.authorize_cluster(&ctx, ClusterAction);
    let mut markers = Vec::with_capacity(request.markers.len());
    for marker in &request.markers {
        let mut topics = Vec::with_capacity(marker.topics.len());
        for topic in &marker.topics {
            let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
            for &p in &topic.partition_indexes {
                let located = image
                    .topic(&topic.name)
                    .and_then(|t| t.partition(p).map(|image| (shard.owner(image), t.topic_id)));
                let code = match located {
                    _ if !allowed => ErrorCode::ClusterAuthorizationFailed,
                    None => ErrorCode::UnknownTopicOrPartition,
                    Some((owner, topic_id)) => {
                        let part = MarkerPart {
                            topic_id,
                            partition: p,
                            producer_id: marker.producer_id,
                            producer_epoch: marker.producer_epoch,
                            coordinator_epoch: marker.coordinator_epoch,
                            commit: marker.transaction_result,
                        };
                        let write = txn::calls::WriteMarkers { parts: vec![part] };
                        let codes = shard.call(owner, write).await;
                        codes
                            .first()
                            .copied()
                            .unwrap_or(ErrorCode::UnknownServerError)
                    }
                };
                partitions.push(WritableTxnMarkerPartitionResult {
                    partition_index: p,
                    error_code: code.code(),
                    ..Default::default()
                });
            }
            topics.push(WritableTxnMarkerTopicResult {
                name: topic.name.clone(),
                partitions,
                ..Default::default()
            });
        }
        markers.push(WritableTxnMarkerResult {
            producer_id: marker.producer_id,
            topics,
            ..Default::default()
        });
    }
    let response = WriteTxnMarkersResponse {
        markers,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

fn topics_of(view: &TxnView) -> Vec<TopicData> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in &view.partitions {
        by_topic.entry(topic).or_default().push(*p);
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| TopicData {
            topic: topic.to_string(),
            partitions,
            ..Default::default()
        })
        .collect()
}

pub async fn describe_transactions(
    shard: Rc<Shard>,
    request: DescribeTransactionsRequest,
    ctx: RequestContext,
) -> Response {
    let mut states = Vec::with_capacity(request.transactional_ids.len());
    for id in &request.transactional_ids {
        let describe = |partition| DescribeTxn {
            partition,
            transactional_id: id.clone(),
        };
        // Kafka: DESCRIBE on the transactional id; its topics only those the request may
        // DESCRIBE.
        let reply = if shard.authorize(&ctx, Describe, TransactionalId, id) {
            call(&shard, id, describe).await
        } else {
            Err(ErrorCode::TransactionalIdAuthorizationFailed)
        };
        let mut state = match reply {
            Ok(Ok(view)) => TransactionState {
                error_code: 0,
                transactional_id: id.clone(),
                transaction_state: view.state.to_string(),
                transaction_timeout_ms: view.timeout_ms,
                transaction_start_time_ms: view.start_ms,
                producer_id: view.producer_id,
                producer_epoch: view.producer_epoch,
                topics: topics_of(&view),
                ..Default::default()
            },
            // Kafka: only the id and the code set, the rest the schema's defaults (0).
            Ok(Err(code)) | Err(code) => TransactionState {
                error_code: code.code(),
                transactional_id: id.clone(),
                transaction_state: String::new(),
                ..Default::default()
            },
        };
        if shard.authorizes(&ctx) {
            state
                .topics
                .retain(|t| shard.authorize(&ctx, Describe, Topic, &t.topic));
        }
        states.push(state);
    }
    let response = DescribeTransactionsResponse {
        transaction_states: states,
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

/// Kafka's state names, for ListTransactions' `unknown_state_filters`.
const STATE_NAMES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

pub async fn list_transactions(
    shard: Rc<Shard>,
    request: ListTransactionsRequest,
    ctx: RequestContext,
) -> Response {
    let unknown: Vec<String> = (request.state_filters.iter())
        .filter(|s| !STATE_NAMES.contains(&s.as_str()))
        .cloned()
        .collect();
    let mut found = Vec::new();
    for target in 0..shard.shard_count() {
        let list = ListTxns {
            states: request.state_filters.clone(),
            producer_ids: request.producer_id_filters.clone(),
            min_duration_ms: if ctx.api_version >= 1 {
                request.duration_filter
            } else {
                -1
            },
        };
        found.extend(shard.call(target, list).await);
    }
    // Kafka: only the transactional ids the request may DESCRIBE.
    if shard.authorizes(&ctx) {
        found.retain(|view| {
            shard.authorize(&ctx, Describe, TransactionalId, &view.transactional_id)
        });
    }
    let response = ListTransactionsResponse {
        error_code: 0,
        unknown_state_filters: unknown,
        transaction_states: found
            .into_iter()
            .map(|view| ListedTransaction {
                transactional_id: view.transactional_id,
                producer_id: view.producer_id,
                transaction_state: view.state.to_string(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_transactional_id_is_an_invalid_request() {
        assert_eq!(refuse_empty(""), Err(ErrorCode::InvalidRequest));
        assert_eq!(refuse_empty("t"), Ok(()));
    }
}
