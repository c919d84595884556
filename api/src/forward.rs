//! What shards say to each other over the mesh: partition operations forwarded to the shard
//! that owns the partition, control-plane calls to the metadata core (shard 0), and metadata
//! images published back. Record bytes travel as `Bytes` (a reference count, never a copy).
//!
//! Every kind of call is a request type implementing [`Call`], whose `Reply` type the caller
//! gets back from `Shard::call` already typed: no handler matches on a reply. The `Request`
//! and `Reply` enums exist only for the ring between two cores (a ring carries one type);
//! both are generated from one list, so the variant a reply travels in is the variant its
//! request travelled in, and `Call::reply_from` cannot meet another one (see `calls!`).
//!
//! The group coordinator's calls (one kind per group API, each with its reply type) are
//! declared in `group::calls`; they are served in `group::serve`.
//!
//! This module is below `shard` (the shard's mesh carries `ShardMsg`/`ShardReply`): it names
//! only data (`group::calls`, `metadata`, `net`), never the shard, the coordinator or the
//! partition operations; what runs a call (`Serve` impls) sits above, beside the code it runs.
//!
//! Per-partition operations carry every partition a request touches on the target shard
//! (`parts`): one message per target shard, not per partition, answered by one result per
//! part, in order.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::group::calls as group;
use crate::metadata::image::Image;
use crate::metadata::records::TopicId;
use crate::txn::calls as txn;

/// One message on a ring of calls.
pub enum ShardMsg {
    /// A call; its reply comes back on the reply ring with the same id.
    Request { id: u64, body: Request },
    /// The caller of request `id` gave up (its connection closed): stop a parked wait now
    /// rather than at its deadline. No reply follows.
    Cancel { id: u64 },
    /// Serve this connection from now on: its requests touch mostly partitions the receiving
    /// shard owns (see `handoff`). No reply follows.
    Adopt(Box<crate::handoff::Moved>),
}

/// One message on a ring of replies: the answer to request `id`. Replies have rings of their
/// own so that they never wait behind calls (see `shard::mesh`).
pub struct ShardReply {
    pub id: u64,
    pub body: Reply,
}

/// A topic to create, as CreateTopics carries it.
#[derive(Clone, Debug)]
pub struct TopicSpec {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// CreateTopics' manual assignment: (partition, replicas); empty when the placer decides.
    pub assignments: Vec<(i32, Vec<i32>)>,
}

impl TopicSpec {
    /// The partition count the topic gets if created: the assignment's, else the request's
    /// (-1: `default`).
    pub fn partition_count(&self, default: i32) -> i32 {
        partitions_asked(self.assignments.len(), self.num_partitions, default)
    }
}

/// The partitions a CreateTopics entry asks for: as many as its manual assignments, else its
/// count, else (-1) the default.
pub fn partitions_asked(assignments: usize, num_partitions: i32, default: i32) -> i32 {
    match (assignments, num_partitions) {
        (0, -1) => default,
        (0, n) => n,
        (n, _) => i32::try_from(n).unwrap_or(i32::MAX),
    }
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

/// A call one shard makes on another: its reply type is known at compile time.
pub trait Call: Sized + 'static {
    type Reply: 'static;
    /// Only a long poll is worth cancelling when its caller goes away: everything else ends
    /// within a disk operation, and a produce must not be cut between its shards' appends.
    const CANCEL_ON_DROP: bool = false;
    /// This call as it travels on a ring.
    fn into_request(self) -> Request;
    /// The reply as it came off a ring, back to its type.
    fn reply_from(reply: Reply) -> Self::Reply;
}

/// Declares each call kind once: `Kind(RequestType) -> ReplyType`. Generates the ring's
/// `Request` and `Reply` enums (one variant per kind, same name in both), the [`Call`] impls,
/// and `serve_request`, which runs a request and wraps its reply in the variant of the same
/// name. That last one is why `reply_from`'s mismatch arm is unreachable: a reply only ever
/// comes from `serve_request` on the peer, for the request whose id it carries.
macro_rules! calls {
    ($($(#[$doc:meta])* $kind:ident($request:ty) -> $reply:ty;)*) => {
        /// A call on the ring (see [`Call`]).
        pub enum Request {
            $($(#[$doc])* $kind($request),)*
        }

        /// A reply on the ring, in the variant of its request.
        pub enum Reply {
            $($kind($reply),)*
        }

        $(impl Call for $request {
            type Reply = $reply;
            const CANCEL_ON_DROP: bool = <$request as CallKind>::CANCEL_ON_DROP;
            fn into_request(self) -> Request {
                Request::$kind(self)
            }
            fn reply_from(reply: Reply) -> $reply {
                match reply {
                    Reply::$kind(reply) => reply,
                    #[allow(unreachable_patterns)]
                    _ => unreachable!(concat!("a ", stringify!($kind), " request answered by another kind of reply")),
                }
            }
        })*

        /// Runs `request` on this shard (it arrived over the mesh) and wraps the reply in the
        /// variant of the same kind. `S` is only ever `shard::Shard` (see [`Serve`]).
        pub(crate) async fn serve_request<S>(shard: &std::rc::Rc<S>, request: Request) -> Reply
        where
            $($request: Serve<S>,)*
        {
            match request {
                $(Request::$kind(call) => Reply::$kind(Serve::serve(call, shard).await),)*
            }
        }

        impl Request {
            /// Whether the receiving shard parks this call (see [`CallKind::PARKED`]).
            pub(crate) fn parked(&self) -> bool {
                match self {
                    $(Request::$kind(_) => <$request as CallKind>::PARKED,)*
                }
            }
        }
    };
}

/// Per-kind settings that `calls!` copies into the [`Call`] impl.
trait CallKind {
    const CANCEL_ON_DROP: bool = false;
    /// A call that may wait long on the shard that serves it (a group call waits for its
    /// group's rebalance, up to the member's rebalance timeout) is parked there, so that it
    /// cannot take the running slots that other shards' short calls need.
    const PARKED: bool = false;
}

/// Runs a call on the shard it was sent to. `S` is always `shard::Shard`: it is a parameter
/// only so that this module, which `shard` builds on (its mesh carries `ShardMsg` and
/// `ShardReply`), does not name the shard back. The impls sit above both, next to the code
/// they run: `shard/calls.rs` (partition and control-plane calls) and `group/serve.rs`.
pub(crate) trait Serve<S>: Call {
    async fn serve(self, shard: &std::rc::Rc<S>) -> Self::Reply;
}

calls! {
    Produce(Produce) -> Vec<ProduceResult>;
    Fetch(Fetch) -> Vec<FetchResult>;
    WaitForData(WaitForData) -> Waited;
    ListOffsets(ListOffsets) -> Vec<OffsetResult>;
    DeleteRecords(DeleteRecords) -> Vec<(i16, i64)>;
    OffsetForLeaderEpoch(OffsetForLeaderEpoch) -> Vec<EpochEndOffset>;
    DescribeProducers(DescribeProducers) -> Vec<(i16, Vec<ProducerInfo>)>;
    CreatePartitions(CreatePartitions) -> Vec<(i16, Option<String>)>;
    AllocateProducerIds(AllocateProducerIds) -> Result<i64, i16>;
    CreateTopics(CreateTopics) -> Vec<TopicOutcome>;
    DeleteTopics(DeleteTopics) -> Vec<TopicOutcome>;
    AlterTopicConfigs(AlterTopicConfigs) -> Vec<TopicOutcome>;
    AlterScramCredentials(AlterScramCredentials) -> Vec<crate::metadata::scram::AlterResult>;
    AlterClientQuotas(AlterClientQuotas) -> Vec<Result<(), crate::metadata::quotas::Refusal>>;
    CreateAcls(CreateAcls) -> Vec<crate::metadata::acls::AclCreateResult>;
    DeleteAcls(DeleteAcls) -> Vec<crate::metadata::acls::AclDeleteResult>;
    ImageUpdate(ImageUpdate) -> Vec<TopicFailure>;
    CloseFetchSession(CloseFetchSession) -> ();
    JoinGroup(group::JoinGroup) -> group::JoinReply;
    SyncGroup(group::SyncGroup) -> group::SyncReply;
    Heartbeat(group::Heartbeat) -> group::HeartbeatReply;
    LeaveGroup(group::LeaveGroup) -> group::LeaveReply;
    OffsetCommit(group::OffsetCommit) -> group::OffsetCommitReply;
    OffsetFetch(group::OffsetFetch) -> group::OffsetFetchReply;
    OffsetDelete(group::OffsetDelete) -> group::OffsetDeleteReply;
    DescribeGroup(group::DescribeGroup) -> group::DescribeReply;
    ListGroups(group::ListGroups) -> group::ListReply;
    DeleteGroup(group::DeleteGroup) -> group::DeleteReply;
    ConsumerHeartbeat(group::ConsumerHeartbeat) -> group::ConsumerHeartbeatReply;
    ConsumerDescribe(group::ConsumerDescribe) -> group::ConsumerDescribeReply;
    TxnOffsetCommit(group::TxnOffsetCommit) -> group::TxnOffsetCommitReply;
    InitTxnProducer(txn::InitTxnProducer) -> txn::InitTxnReply;
    AddToTxn(txn::AddToTxn) -> txn::AddToTxnReply;
    EndTxn(txn::EndTxn) -> txn::EndTxnReply;
    DescribeTxn(txn::DescribeTxn) -> txn::DescribeTxnReply;
    ListTxns(txn::ListTxns) -> txn::ListTxnsReply;
    WriteMarkers(txn::WriteMarkers) -> txn::WriteMarkersReply;
}

impl CallKind for Produce {}
impl CallKind for Fetch {}
impl CallKind for WaitForData {
    const CANCEL_ON_DROP: bool = true;
}
impl CallKind for ListOffsets {}
impl CallKind for DeleteRecords {}
impl CallKind for OffsetForLeaderEpoch {}
impl CallKind for DescribeProducers {}
impl CallKind for CreatePartitions {}
impl CallKind for AllocateProducerIds {}
impl CallKind for CreateTopics {}
impl CallKind for DeleteTopics {}
impl CallKind for AlterTopicConfigs {}
impl CallKind for AlterScramCredentials {}
impl CallKind for AlterClientQuotas {}
impl CallKind for CreateAcls {}
impl CallKind for DeleteAcls {}
impl CallKind for ImageUpdate {}
impl CallKind for CloseFetchSession {}

/// Group calls are parked: a join or sync waits for the rest of its group.
macro_rules! parked {
    ($($call:ident),*) => {
        $(impl CallKind for group::$call {
            const PARKED: bool = true;
        })*
    };
}

parked!(
    JoinGroup,
    SyncGroup,
    Heartbeat,
    LeaveGroup,
    OffsetCommit,
    OffsetFetch,
    OffsetDelete,
    DescribeGroup,
    ListGroups,
    DeleteGroup,
    ConsumerHeartbeat,
    ConsumerDescribe,
    TxnOffsetCommit
);

/// Transaction calls are parked: they wait for appends and markers.
impl CallKind for txn::InitTxnProducer {
    const PARKED: bool = true;
}
impl CallKind for txn::AddToTxn {
    const PARKED: bool = true;
}
impl CallKind for txn::EndTxn {
    const PARKED: bool = true;
}
impl CallKind for txn::DescribeTxn {
    const PARKED: bool = true;
}
impl CallKind for txn::ListTxns {}
impl CallKind for txn::WriteMarkers {}

/// Append one batch to each of these partitions, all owned by the target shard, in order:
/// the part of one Produce request that shard owns. One result per part, in order.
pub struct Produce {
    pub acks: i16,
    /// The request's `timeout_ms` (how long acks=all may wait for replication).
    pub timeout_ms: u64,
    pub parts: Vec<ProducePart>,
}

/// One partition's part of a Produce request: its batch, for a partition of this shard.
#[derive(Clone, Debug)]
pub struct ProducePart {
    pub topic_id: TopicId,
    pub partition: i32,
    pub records: Bytes,
}

/// One partition to read (Fetch): whole batches from `offset`, at most `max_bytes` unless
/// `min_one` (then at least one whole batch).
#[derive(Clone, Copy, Debug)]
pub struct FetchPart {
    pub topic_id: TopicId,
    pub partition: i32,
    pub offset: i64,
    pub max_bytes: usize,
    pub min_one: bool,
    /// A follower's fetch (None: a consumer's).
    pub replica: Option<ReplicaFetch>,
    /// A read_committed consumer's: it reads below the last stable offset and gets the
    /// aborted transactions of what it read.
    pub read_committed: bool,
}

/// What a follower's fetch of a partition adds (Fetch's replica id, `last_fetched_epoch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaFetch {
    pub broker: i32,
    /// The follower's broker epoch (Fetch v15+'s ReplicaState, KIP-903), else -1.
    pub broker_epoch: i64,
    pub last_fetched_epoch: i32,
}

/// Read these partitions of the target shard; one result per part, in order.
pub struct Fetch {
    pub parts: Vec<FetchPart>,
}

/// A partition a long poll waits on: until its log end passes `offset`.
#[derive(Clone, Copy, Debug)]
pub struct WaitPart {
    pub topic_id: TopicId,
    pub partition: i32,
    pub offset: i64,
    /// A follower waits for the log end, a consumer for the high watermark.
    pub replica: bool,
    /// A read_committed consumer waits for the last stable offset.
    pub read_committed: bool,
}

/// Resolve once any of these partitions' log end passes its offset, or `wait_ms` elapses
/// (long poll).
pub struct WaitForData {
    pub parts: Vec<WaitPart>,
    pub wait_ms: u64,
}

/// How a long poll ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Data came or the wait elapsed: read again.
    Ended,
    /// The owner already holds its bound of parked long polls (`MAX_PARKED_WAITS`): answer
    /// the client with what there is (Kafka allows answering before `min_bytes`).
    Refused,
}

/// One partition of a ListOffsets.
#[derive(Clone, Copy, Debug)]
pub struct ListOffsetsPart {
    pub topic_id: TopicId,
    pub partition: i32,
    pub timestamp: i64,
    /// READ_COMMITTED: the latest offset is the last stable offset.
    pub read_committed: bool,
}

/// ListOffsets on these partitions of the target shard; one result per part, in order.
pub struct ListOffsets {
    pub parts: Vec<ListOffsetsPart>,
}

/// One partition of a DeleteRecords: move its log start offset to `offset` (-1: the high
/// watermark).
#[derive(Clone, Copy, Debug)]
pub struct DeleteRecordsPart {
    pub topic_id: TopicId,
    pub partition: i32,
    pub offset: i64,
}

/// DeleteRecords on these partitions; one (error code, low watermark) per part, in order.
pub struct DeleteRecords {
    pub parts: Vec<DeleteRecordsPart>,
}

/// One partition and epoch of an OffsetForLeaderEpoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpochPart {
    pub topic_id: TopicId,
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub leader_epoch: i32,
}

/// OffsetForLeaderEpoch of one part: error code, leader epoch, end offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub error_code: i16,
    pub leader_epoch: i32,
    pub end_offset: i64,
}

/// OffsetForLeaderEpoch on these parts; one answer per part, in order.
pub struct OffsetForLeaderEpoch {
    pub parts: Vec<EpochPart>,
}

/// The producer state of these partitions (DescribeProducers); one (error code, producers)
/// per part, in order.
pub struct DescribeProducers {
    pub parts: Vec<(TopicId, i32)>,
}

/// Metadata core: add partitions to topics (CreatePartitions; `validate_only` adds none).
/// Per topic in request order, error code and message.
pub struct CreatePartitions {
    pub topics: Vec<PartitionsSpec>,
    pub validate_only: bool,
}

/// Metadata core: a new block of producer ids for the calling shard (InitProducerId): its
/// first id, or Kafka's error code.
pub struct AllocateProducerIds;

/// Metadata core: create topics (`validate_only` creates nothing).
pub struct CreateTopics {
    pub topics: Vec<TopicSpec>,
    pub validate_only: bool,
}

/// Metadata core: delete topics by name.
pub struct DeleteTopics {
    pub names: Vec<String>,
}

/// Metadata core: change configs of topics and of the broker (resource type, name, change;
/// AlterConfigs, IncrementalAlterConfigs); one `TopicOutcome` per change, in order.
pub struct AlterTopicConfigs {
    pub changes: Vec<(i8, String, crate::metadata::ConfigChange)>,
    pub validate_only: bool,
}

/// Metadata core: AlterUserScramCredentials (KIP-554): (user, mechanism) to delete and
/// credentials to create or replace, as the request carries them; one result per distinct
/// user.
pub struct AlterScramCredentials {
    pub deletions: Vec<(String, i8)>,
    pub upsertions: Vec<crate::metadata::scram::Upsertion>,
}

impl AlterScramCredentials {
    /// Every distinct user named, sorted: those a refusal of the whole request answers.
    pub fn users(&self) -> Vec<&str> {
        let mut users: Vec<&str> = self
            .deletions
            .iter()
            .map(|(name, _)| name.as_str())
            .chain(self.upsertions.iter().map(|u| u.name.as_str()))
            .collect();
        users.sort_unstable();
        users.dedup();
        users
    }

    /// Every distinct user answered with `error_code` and `message`.
    pub fn refuse_all(
        &self,
        error_code: i16,
        message: &str,
    ) -> Vec<crate::metadata::scram::AlterResult> {
        self.users()
            .into_iter()
            .map(|user| crate::metadata::scram::AlterResult {
                user: user.to_string(),
                error_code,
                error_message: Some(message.to_string()),
            })
            .collect()
    }
}

/// Metadata core: AlterClientQuotas (KIP-546): each entity's operations as the request
/// carries them; one result per entity, in order.
pub struct AlterClientQuotas {
    pub alterations: Vec<crate::metadata::quotas::Alteration>,
    pub validate_only: bool,
}

/// Metadata core: CreateAcls, the bindings as the request carries them; one result per
/// binding, in order.
pub struct CreateAcls {
    pub bindings: Vec<acl::AclBinding>,
}

/// Metadata core: DeleteAcls, the filters as the request carries them; one result per
/// filter, in order.
pub struct DeleteAcls {
    pub filters: Vec<acl::AclBindingFilter>,
}

/// A new metadata image: open logs for new partitions, drop deleted ones, then adopt it.
/// Answered with the topics that have partitions that stay offline.
pub struct ImageUpdate(pub Arc<Image>);

/// Close fetch session `session_id`, which the target shard holds (a full fetch on another
/// shard named it).
pub struct CloseFetchSession {
    pub session_id: i32,
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
    pub refused: Option<Box<RefusedRecords>>,
}

/// KIP-467: the records of a batch refused for themselves, as Produce v8+ answers them
/// (`record_errors` and `error_message`), in Kafka's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedRecords {
    /// (batch index, message) of every refused record named, in record order.
    pub record_errors: Vec<(i32, String)>,
    /// Kafka's summary: its `RecordValidationException`'s message.
    pub error_message: String,
}

/// Results of a partition fetch: Kafka's fields of FetchResponse PartitionData.
#[derive(Clone, Debug)]
pub struct FetchResult {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The last stable offset (Kafka's: the high watermark, or the first offset of the
    /// earliest open transaction when that is lower).
    pub last_stable_offset: i64,
    /// A read_committed fetch's aborted transactions among what it may read: (producer id,
    /// first offset).
    pub aborted: Option<Vec<(i64, i64)>>,
    pub records: crate::transport::Records,
    /// DivergingEpoch for a follower whose log departs from the leader's: (epoch, end).
    pub diverging: Option<(i32, i64)>,
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
    /// The coordinator epoch of its last transaction marker (-1: none).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction (-1: none).
    pub current_txn_start_offset: i64,
}
