//! What shards say to each other over the mesh: partition operations forwarded to the shard
//! that owns the partition, control-plane calls to the metadata core (shard 0), and metadata
//! images published back. Every request carries an id; its reply comes back on the reverse
//! ring with the same id. Record bytes travel as `Bytes` (a reference count, never a copy).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::metadata::image::Image;
use crate::metadata::records::TopicId;

/// One message on a ring.
pub enum ShardMsg {
    Request {
        id: u64,
        body: Request,
    },
    Reply {
        id: u64,
        body: Reply,
    },
    /// The caller of request `id` gave up (its connection closed): stop a parked wait now
    /// rather than at its deadline. No reply follows.
    Cancel {
        id: u64,
    },
    /// Serve this connection from now on: its requests touch mostly partitions the receiving
    /// shard owns (see `handoff`). No reply follows.
    Adopt(Box<crate::handoff::Moved>),
}

/// A topic to create, as CreateTopics carries it.
#[derive(Clone, Debug)]
pub struct TopicSpec {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// A topic to grow, as CreatePartitions carries it.
#[derive(Clone, Debug)]
pub struct PartitionsSpec {
    pub name: String,
    /// The new total partition count.
    pub count: i32,
    /// Replica broker ids of each new partition, if the client chose them.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// Work for another shard.
pub enum Request {
    /// Append one batch to each of these partitions, all owned by this shard, in order: the
    /// part of one Produce request that this shard owns (one message per shard, not per
    /// partition). Answered by `Reply::Produce` with one result per part, in order.
    Produce {
        acks: i16,
        parts: Vec<crate::partition_ops::ProducePart>,
    },
    /// Read whole batches from `offset`, at most `max_bytes` unless `min_one` (then at least
    /// one whole batch).
    Fetch {
        topic_id: TopicId,
        partition: i32,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
    },
    /// Resolve once the partition's log end passes `offset` or `wait_ms` elapses (long poll).
    WaitForData {
        topic_id: TopicId,
        partition: i32,
        offset: i64,
        wait_ms: u64,
    },
    /// ListOffsets for one partition.
    ListOffsets {
        topic_id: TopicId,
        partition: i32,
        timestamp: i64,
    },
    /// DeleteRecords on one partition: move its log start offset to `offset` (-1: the high
    /// watermark).
    DeleteRecords {
        topic_id: TopicId,
        partition: i32,
        offset: i64,
    },
    /// OffsetForLeaderEpoch on one partition.
    OffsetForLeaderEpoch {
        topic_id: TopicId,
        partition: i32,
        current_leader_epoch: i32,
        leader_epoch: i32,
    },
    /// Metadata core: add partitions to topics (CreatePartitions; `validate_only` adds none).
    CreatePartitions {
        topics: Vec<PartitionsSpec>,
        validate_only: bool,
    },
    /// The producer state of one partition (DescribeProducers).
    DescribeProducers { topic_id: TopicId, partition: i32 },
    /// Metadata core: a new block of producer ids for the calling shard (InitProducerId).
    AllocateProducerIds,
    /// Metadata core: create topics (`validate_only` creates nothing).
    CreateTopics {
        topics: Vec<TopicSpec>,
        validate_only: bool,
    },
    /// Metadata core: delete topics by name.
    DeleteTopics { names: Vec<String> },
    /// Metadata core: change configs of topics and of the broker (resource type, name,
    /// change; AlterConfigs, IncrementalAlterConfigs); one `TopicOutcome` per change, in order.
    AlterTopicConfigs {
        changes: Vec<(i8, String, crate::metadata::ConfigChange)>,
        validate_only: bool,
    },
    /// A new metadata image: open logs for new partitions, drop deleted ones, then adopt it.
    ImageUpdate(Arc<Image>),
    /// Close fetch session `session_id`, which this shard holds (a full fetch on another
    /// shard named it).
    CloseFetchSession { session_id: i32 },
    /// Work for the coordinator of a group whose `__consumer_offsets` partition this shard
    /// owns (`partition`); `GroupOp::List` asks for every group of the shard.
    Group {
        partition: i32,
        op: crate::group::GroupOp,
    },
}

/// Results of a partition produce: Kafka's fields of PartitionProduceResponse.
#[derive(Clone, Debug)]
pub struct ProduceResult {
    pub error_code: i16,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// KIP-467: the records a batch was refused for (`None` unless it was; boxed so the
    /// result of the valid path stays small).
    pub refused: Option<Box<crate::partition_ops::RefusedRecords>>,
}

/// Results of a partition fetch: Kafka's fields of FetchResponse PartitionData.
#[derive(Clone, Debug)]
pub struct FetchResult {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: crate::transport::Records,
}

/// Results of a partition ListOffsets.
#[derive(Clone, Copy, Debug)]
pub struct OffsetResult {
    pub error_code: i16,
    pub timestamp: i64,
    pub offset: i64,
}

/// Outcome of one topic of a CreateTopics/DeleteTopics call.
#[derive(Clone, Debug)]
pub struct TopicOutcome {
    pub name: String,
    pub topic_id: TopicId,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub num_partitions: i32,
}

/// A topic of an image update whose partition(s) this shard could not open (the first error).
#[derive(Clone, Debug)]
pub struct TopicFailure {
    pub topic_id: TopicId,
    pub error: String,
}

/// One producer of a partition, as DescribeProducers reports it.
#[derive(Clone, Copy, Debug)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
}

pub enum Reply {
    /// One result per part of `Request::Produce`, in order.
    Produce(Vec<ProduceResult>),
    /// DescribeProducers of one partition: error code and its producers.
    Producers(i16, Vec<ProducerInfo>),
    /// The first id of a new producer id block, or Kafka's error code.
    ProducerIdBlock(Result<i64, i16>),
    Fetch(FetchResult),
    Waited,
    ListOffsets(OffsetResult),
    Topics(Vec<TopicOutcome>),
    /// The image is adopted; the topics listed have partitions that stay offline.
    ImageApplied(Vec<TopicFailure>),
    Group(crate::group::GroupAnswer),
    /// DeleteRecords of one partition: error code and low watermark.
    DeleteRecords(i16, i64),
    /// OffsetForLeaderEpoch of one partition: error code, leader epoch, end offset.
    EpochEndOffset(i16, i32, i64),
    /// CreatePartitions: per topic in request order, error code and message.
    PartitionsCreated(Vec<(i16, Option<String>)>),
    /// The fetch session is closed (or was not there).
    FetchSessionClosed,
}
