//! Kafka's transaction coordinator as a state machine: no I/O, no shard, time passed in.
//!
//! This crate holds what Kafka's `TransactionCoordinator`, `TransactionMetadata`,
//! `TransactionStateManager` and `TransactionLog` decide: which InitProducerId,
//! AddPartitionsToTxn, EndTxn and timer events are legal for a transactional id, with which
//! error code, and which `__transaction_state` record each legal change persists. It does
//! not append records, write markers or keep time: the broker's `api` crate does, and calls
//! back. That split keeps every rule testable with plain values (as `groups` does for
//! consumer groups) and keeps the Kafka error codes in one place.
//!
//! - [`state`]: the states and Kafka's legal moves between them.
//! - [`metadata`]: one id's metadata and the `prepare_*`/complete rules.
//! - [`records`]: the `__transaction_state` key and value codecs.
//! - [`coordinator`]: one `__transaction_state` partition's ids, their pending changes, and
//!   the request handlers.
//!
//! Every change is two-phase, like Kafka's `pendingState`: a call returns a [`Transition`];
//! the caller appends [`Transition::record`] and calls [`Coordinator::complete`] on success or
//! [`Coordinator::abandon`] on failure. Until then the id answers CONCURRENT_TRANSACTIONS.

pub mod coordinator;
pub mod metadata;
pub mod records;
pub mod state;

pub use coordinator::{
    append_error, Coordinator, EndStep, InitStep, MarkerPlan, PartitionErrors, Transition,
    TxnConfig,
};
pub use metadata::{TxnMetadata, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
pub use records::RecordError;
pub use state::TxnState;
