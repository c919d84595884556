//! Offsets committed inside a transaction (TxnOffsetCommit, KIP-98; KIP-447's member
//! checks): appended to `__consumer_offsets` as a transactional batch of the producer, held
//! aside (`Group::pending_txn`) until the transaction's marker reaches that partition, then
//! kept (COMMIT) or dropped (ABORT). OffsetFetch with `require_stable` answers
//! UNSTABLE_OFFSET_COMMIT for a partition with such an offset pending, so a consumer of a
//! consume-transform-produce loop never starts from an offset that may yet be aborted.

use wire::generated::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use wire::generated::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::*;

fn respond(
    request: &TxnOffsetCommitRequest,
    code: &dyn Fn(usize, usize) -> ErrorCode,
) -> TxnOffsetCommitResponse {
    TxnOffsetCommitResponse {
        topics: (request.topics.iter().enumerate())
            .map(|(i, t)| TxnOffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: (t.partitions.iter().enumerate())
                    .map(|(j, p)| TxnOffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code(i, j).code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The same answer for every partition of `request`.
pub fn txn_offset_commit_everywhere(
    request: &TxnOffsetCommitRequest,
    code: ErrorCode,
) -> TxnOffsetCommitResponse {
    respond(request, &|_, _| code)
}

impl Coordinator {
    pub(super) async fn txn_offset_commit(
        shard: &Rc<Shard>,
        partition: i32,
        request: TxnOffsetCommitRequest,
        version: i16,
    ) -> TxnOffsetCommitResponse {
        let coordinator = &shard.coordinator;
        let image = shard.image();
        let max_metadata = shard.config.groups.offset_metadata_max_bytes;
        let now_wall = wall_ms();
        // Kafka checks the member only when the request names one (KIP-447 producers send
        // the consumer's group metadata; older ones only the group id).
        let checked = coordinator.with_groups(partition, |groups, topic_id| {
            let generation = request.generation_id;
            let named = generation >= 0 || !request.member_id.is_empty();
            let verdict = match groups.get(&request.group_id) {
                _ if !named => Ok(()),
                Some(group) if group.consumer().is_some() => group
                    .consumer()
                    .expect("checked")
                    .validate_offset_commit(&request.member_id, generation, version, true)
                    .map_err(GroupError::error_code),
                None => Err(ErrorCode::IllegalGeneration),
                Some(group) => group
                    .classic
                    .validate_offset_commit(&request.member_id, generation)
                    .map_err(GroupError::error_code),
            };
            (verdict, topic_id)
        });
        let topic_id = match checked {
            Err(code) | Ok((Err(code), _)) => return respond(&request, &|_, _| code),
            Ok((Ok(()), topic_id)) => topic_id,
        };
        let mut records = Vec::new();
        let mut accepted: Vec<((String, i32), Committed)> = Vec::new();
        let mut verdicts: Vec<Vec<ErrorCode>> = Vec::with_capacity(request.topics.len());
        for topic in &request.topics {
            let mut topic_verdicts = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let known = image
                    .topic(&topic.name)
                    .is_some_and(|t| t.partition(p.partition_index).is_some());
                let verdict = if p
                    .committed_metadata
                    .as_ref()
                    .is_some_and(|m| m.len() > max_metadata)
                {
                    ErrorCode::OffsetMetadataTooLarge
                } else if !known {
                    ErrorCode::UnknownTopicOrPartition
                } else {
                    ErrorCode::None
                };
                topic_verdicts.push(verdict);
                if verdict != ErrorCode::None {
                    continue;
                }
                let committed = Committed {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.clone().unwrap_or_default(),
                    commit_timestamp: now_wall,
                };
                records.push(GroupRecord::OffsetCommit(
                    OffsetCommitKey {
                        group: request.group_id.clone(),
                        topic: topic.name.clone(),
                        partition: p.partition_index,
                        ..Default::default()
                    },
                    Some(OffsetCommitValue {
                        offset: committed.offset,
                        leader_epoch: committed.leader_epoch,
                        metadata: committed.metadata.clone(),
                        commit_timestamp: now_wall,
                        ..Default::default()
                    }),
                ));
                accepted.push(((topic.name.clone(), p.partition_index), committed));
            }
            verdicts.push(topic_verdicts);
        }
        let producer = (request.producer_id, request.producer_epoch);
        let written = Self::append_txn(shard, topic_id, partition, &records, producer).await;
        if written.is_ok() {
            let _ = coordinator.with_groups(partition, |groups, _| {
                let group = groups
                    .entry(request.group_id.clone())
                    .or_insert_with(|| Group::new(now_wall));
                let pending = group.pending_txn.entry(request.producer_id).or_default();
                pending.extend(accepted);
            });
        }
        respond(&request, &|i, j| match verdicts[i][j] {
            ErrorCode::None => written.err().unwrap_or(ErrorCode::None),
            code => code,
        })
    }

    /// Appends `records` as one transactional batch of `producer` (id, epoch) and waits for
    /// it as acks=all does. Kafka's coordinator writes these with no sequence (-1) and skips
    /// the sequence checks for its own appends; here they go through the produce path's
    /// checks, so they carry the sequence that continues the producer's state on this
    /// partition (read just before the append, with no `.await` between).
    async fn append_txn(
        shard: &Rc<Shard>,
        topic_id: TopicId,
        partition: i32,
        records: &[GroupRecord],
        producer: (i64, i16),
    ) -> Result<(), ErrorCode> {
        if records.is_empty() {
            return Ok(());
        }
        let now = wall_ms();
        let Some(target) = shard.partition(&topic_id, partition) else {
            return Err(ErrorCode::NotCoordinator);
        };
        let sequence = match target.log.borrow().producers().get(producer.0) {
            Some(entry) if entry.epoch == producer.1 => entry.last_seq().wrapping_add(1).max(0),
            _ => 0,
        };
        let mut builder = BatchBuilder::new(Compression::None)
            .transactional(true)
            .producer(producer.0, producer.1, sequence);
        for record in records {
            let (key, value) = record.encode().map_err(|error| {
                tracing::error!(%error, "cannot encode a group record");
                ErrorCode::UnknownServerError
            })?;
            builder = builder.push(Some(&key), value.as_deref(), &[], now);
        }
        let result =
            crate::partition_ops::produce(shard, &topic_id, partition, -1, builder.build()).await;
        match ErrorCode::from_code_or_unknown(result.error_code) {
            ErrorCode::None => Ok(()),
            ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => {
                Err(ErrorCode::InvalidCommitOffsetSize)
            }
            // The producer's epoch is stale (a newer instance fenced it).
            code @ (ErrorCode::InvalidProducerEpoch | ErrorCode::ProducerFenced) => Err(code),
            code => {
                tracing::warn!(?code, partition, "writing transactional offsets failed");
                Err(ErrorCode::CoordinatorNotAvailable)
            }
        }
    }

    /// A transaction's marker reached `partition` of `__consumer_offsets`: its offsets there
    /// are kept or dropped.
    pub fn end_txn_offsets(&self, partition: i32, producer_id: i64, commit: bool) {
        let _ = self.with_groups(partition, |groups, _| {
            for group in groups.values_mut() {
                group.end_txn(producer_id, commit);
            }
        });
    }
}
