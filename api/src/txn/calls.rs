//! The transaction coordinator's calls as one shard makes them on the shard that owns a
//! transactional id's `__transaction_state` partition, and the marker writes a coordinator
//! asks of the shards owning a transaction's partitions. Data only (listed in `forward`'s
//! `calls!`); served in `serve.rs` and `markers.rs`.

use wire::ErrorCode;

use crate::metadata::records::TopicId;

/// InitProducerId with a transactional id.
pub struct InitTxnProducer {
    pub partition: i32,
    pub transactional_id: String,
    pub txn_timeout_ms: i32,
    /// KIP-360: the producer id and epoch the client has, if any.
    pub expected: Option<(i64, i16)>,
}

/// (producer id, epoch), or the error.
pub type InitTxnReply = Result<(i64, i16), ErrorCode>;

/// AddPartitionsToTxn (and AddOffsetsToTxn: the group's `__consumer_offsets` partition).
pub struct AddToTxn {
    pub partition: i32,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<(String, i32)>,
    /// KIP-890's verify-only form: nothing is added, each partition's membership is told.
    pub verify_only: bool,
}

/// One code per partition of the request (in its order), or one for the whole request.
pub type AddToTxnReply = Result<Vec<ErrorCode>, ErrorCode>;

/// EndTxn.
pub struct EndTxn {
    pub partition: i32,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

/// The producer id and epoch the answer carries, or the error.
pub type EndTxnReply = Result<(i64, i16), ErrorCode>;

/// A transaction as DescribeTransactions and ListTransactions show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnView {
    pub transactional_id: String,
    pub state: &'static str,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<(String, i32)>,
}

/// DescribeTransactions of one id.
pub struct DescribeTxn {
    pub partition: i32,
    pub transactional_id: String,
}

pub type DescribeTxnReply = Result<TxnView, ErrorCode>;

/// ListTransactions on one shard: its ids that match every given filter.
pub struct ListTxns {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// Only transactions running longer than this (ms; -1: any).
    pub min_duration_ms: i64,
}

pub type ListTxnsReply = Vec<TxnView>;

/// One partition's end-of-transaction marker.
#[derive(Clone, Copy, Debug)]
pub struct MarkerPart {
    pub topic_id: TopicId,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
}

/// Write these markers on the shard that owns their partitions; one code per part.
pub struct WriteMarkers {
    pub parts: Vec<MarkerPart>,
}

pub type WriteMarkersReply = Vec<ErrorCode>;
