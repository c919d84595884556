//! The coordinator's calls as one shard makes them on the shard that owns a group's
//! `__consumer_offsets` partition: one request type per group API, each with its own reply
//! type (declared in `forward`'s `calls!` list), so that a handler never meets a reply of
//! another kind. Each is served by the `Coordinator` method of the same name, once the
//! serving shard knows its partition (`Coordinator::wait_known`): see `serve.rs`. This file
//! is data only (it names no shard and no coordinator), so `forward` can list these types in
//! the ring's `Request`/`Reply` enums below `shard`.
//!
//! Replies carry the `groups` crate's domain answers (`classic::Joined`,
//! `consumer::Heartbeated`, ...) with errors as Kafka's codes (a group's own refusals and the
//! coordinator's: not the coordinator, loading, a failed append); the handlers in
//! `handlers/groups.rs` and `handlers/consumer_groups.rs` encode them.

use bytes::Bytes;
use wire::generated::describe_groups_response::DescribedGroup;
use wire::generated::list_groups_response::ListedGroup;
use wire::generated::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use wire::ErrorCode;

use groups::classic::{JoinArgs, JoinRefused, Joined, Synced};
use groups::consumer::{Description, HeartbeatRequest, Heartbeated, Refusal};

/// JoinGroup of `group_id`.
pub struct JoinGroup {
    pub partition: i32,
    pub group_id: String,
    pub args: JoinArgs,
}

/// A refused JoinGroup: the code and the member id the answer carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinFailed {
    pub member_id: String,
    pub code: ErrorCode,
    /// The answer's protocol name (null from v7): null when the group refused the member,
    /// the schema's default "" when the coordinator or the handler did (not found, loading,
    /// bad session timeout), as the two answered before they shared this type.
    pub protocol_name: Option<String>,
}

impl JoinFailed {
    /// A refusal by the coordinator or the handler, not by the group.
    pub fn new(member_id: &str, code: ErrorCode) -> JoinFailed {
        JoinFailed {
            member_id: member_id.to_string(),
            code,
            protocol_name: Some(String::new()),
        }
    }
}

impl From<JoinRefused> for JoinFailed {
    fn from(refused: JoinRefused) -> JoinFailed {
        JoinFailed {
            member_id: refused.member_id,
            code: refused.error.error_code(),
            protocol_name: None,
        }
    }
}

pub type JoinReply = Result<Joined, JoinFailed>;

/// SyncGroup: the leader's assignments, empty from the others.
pub struct SyncGroup {
    pub partition: i32,
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

pub type SyncReply = Result<Synced, ErrorCode>;

/// A classic member's Heartbeat.
pub struct Heartbeat {
    pub partition: i32,
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
}

pub type HeartbeatReply = Result<(), ErrorCode>;

/// LeaveGroup of these members: (member id, group instance id).
pub struct LeaveGroup {
    pub partition: i32,
    pub group_id: String,
    pub members: Vec<(String, Option<String>)>,
}

/// One member's LeaveGroup outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberLeft {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub result: Result<(), ErrorCode>,
}

/// Per member in request order; `Err` when the coordinator could not take the request.
pub type LeaveReply = Result<Vec<MemberLeft>, ErrorCode>;

/// OffsetCommit, as the request came (`version` is its API version).
pub struct OffsetCommit {
    pub partition: i32,
    pub request: OffsetCommitRequest,
    pub version: i16,
}

pub type OffsetCommitReply = OffsetCommitResponse;

/// OffsetFetch of one group.
pub struct OffsetFetch {
    pub partition: i32,
    pub group_id: String,
    /// `None`: every committed offset of the group.
    pub topics: Option<Vec<(String, Vec<i32>)>>,
    /// OffsetFetch v9+: the fetching member (id, epoch), checked for consumer groups.
    pub member_id: Option<String>,
    pub member_epoch: i32,
    /// OffsetFetch v7+ `require_stable`: a partition with a transactional commit not yet
    /// ended gets UNSTABLE_OFFSET_COMMIT (retriable) instead of an offset.
    pub require_stable: bool,
}

/// The offsets by topic, or the group-level error (then no topics).
pub type OffsetFetchReply = Result<Vec<FetchedTopic>, ErrorCode>;

/// TxnOffsetCommit, as the request came (`version` is its API version).
pub struct TxnOffsetCommit {
    pub partition: i32,
    pub request: wire::generated::TxnOffsetCommitRequest,
    pub version: i16,
}

pub type TxnOffsetCommitReply = wire::generated::TxnOffsetCommitResponse;

/// OffsetDelete, as the request came.
pub struct OffsetDelete {
    pub partition: i32,
    pub request: OffsetDeleteRequest,
}

pub type OffsetDeleteReply = OffsetDeleteResponse;

/// DescribeGroups of one group.
pub struct DescribeGroup {
    pub partition: i32,
    pub group_id: String,
}

pub type DescribeReply = DescribedGroup;

/// ListGroups: every group of the serving shard's partitions.
pub struct ListGroups;

pub type ListReply = Vec<ListedGroup>;

/// DeleteGroups of one group.
pub struct DeleteGroup {
    pub partition: i32,
    pub group_id: String,
}

pub type DeleteReply = Result<(), ErrorCode>;

/// A refusal with the message Kafka's exception carries, when there is one (KIP-848 APIs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub code: ErrorCode,
    pub message: Option<String>,
}

impl Refused {
    pub fn code(code: ErrorCode) -> Refused {
        Refused {
            code,
            message: None,
        }
    }
}

impl From<Refusal> for Refused {
    fn from(refusal: Refusal) -> Refused {
        Refused {
            code: refusal.error.error_code(),
            message: Some(refusal.message),
        }
    }
}

/// KIP-848 ConsumerGroupHeartbeat, with the connection's client id and host.
pub struct ConsumerHeartbeat {
    pub partition: i32,
    /// Boxed: the ring's messages are as large as their largest call.
    pub request: Box<HeartbeatRequest>,
    pub version: i16,
    pub client_id: String,
    pub client_host: String,
}

pub type ConsumerHeartbeatReply = Result<Heartbeated, Refused>;

/// KIP-848 ConsumerGroupDescribe of one group.
pub struct ConsumerDescribe {
    pub partition: i32,
    pub group_id: String,
}

pub type ConsumerDescribeReply = Result<Description, Refused>;

/// Offsets of one topic as OffsetFetch answers them: (partition, offset, leader epoch,
/// metadata, error).
pub type FetchedTopic = (String, Vec<(i32, i64, i32, Option<String>, i16)>);
