//! The transaction coordinator: transactional ids, their producer ids and epochs, and the
//! transactions they run (KIP-98).
//!
//! As for groups, a transactional id lives on the shard that owns its partition of
//! `__transaction_state` (Kafka's rule: `abs(transactionalId.hashCode) %
//! transaction.state.log.num.partitions`), so one thread touches it and needs no lock;
//! requests arriving on another shard are forwarded over the mesh (`calls`). The rules are
//! the `transactions` crate's state machine (no I/O, time passed in); this module persists
//! its transitions and writes its markers:
//!
//! - every transition is first appended to the partition as a `TransactionLogKey/Value`
//!   record (acks=all, the topic's flush policy: fdatasynced before the answer under
//!   `flush.policy=ack`) and takes effect only once that append succeeded;
//! - a transaction that reaches PrepareCommit/PrepareAbort gets its COMMIT/ABORT control
//!   batches written to every partition it touched (`markers`), by the shard owning each
//!   one, and then its CompleteCommit/CompleteAbort record. EndTxn is answered once the
//!   markers are written (Kafka answers after the prepare record and writes the markers
//!   after): a read_committed consumer sees a committed transaction as soon as the
//!   producer's commit returns. Markers that cannot be written at once are retried in the
//!   background; the decision is durable already.
//! - when a shard opens one of its `__transaction_state` partitions it replays it before
//!   serving its ids (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and finishes the transactions
//!   it finds prepared;
//! - a timer aborts transactions open longer than their timeout and forgets idle ids.

pub mod calls;
mod load;
mod markers;
mod serve;
pub mod state;

pub use load::run_timer;
pub use markers::write_markers_here;
pub use state::TxnCoordinators;

use std::sync::atomic::{AtomicBool, Ordering};

use wire::ErrorCode;

use crate::shard::Shard;

/// Kafka's internal topic of transaction state.
pub const TXN_TOPIC: &str = "__transaction_state";

/// Set once a shard of this process learned it owns a `__transaction_state` partition: a
/// shard whose image has no such topic yet is then only behind (see `group`'s
/// `OFFSETS_TOPIC_KNOWN`).
static TXN_TOPIC_KNOWN: AtomicBool = AtomicBool::new(false);

/// How long a transaction request waits for its shard to learn of `__transaction_state`.
const IMAGE_LAG_WAIT: std::time::Duration = std::time::Duration::from_millis(1000);

/// Where a transactional id's coordinator is: (owning shard, partition of
/// `__transaction_state`).
pub async fn locate(shard: &Shard, transactional_id: &str) -> Result<(usize, i32), ErrorCode> {
    if TXN_TOPIC_KNOWN.load(Ordering::Relaxed) && shard.image().topic(TXN_TOPIC).is_none() {
        let known = |image: &crate::metadata::image::Image| image.topic(TXN_TOPIC).is_some();
        shard.wait_for_image(known, IMAGE_LAG_WAIT).await;
    }
    let image = shard.image();
    // Kafka's `TransactionStateManager.getTransactionState`: a partition this broker does not
    // hold (also before `__transaction_state` exists) is NOT_COORDINATOR; the client looks
    // for the coordinator again (its FindCoordinator creates the topic).
    let Some(topic) = image.topic(TXN_TOPIC) else {
        return Err(ErrorCode::NotCoordinator);
    };
    let partition = crate::group::partition_for(transactional_id, topic.partitions.len() as i32);
    let Some(owner) = topic.partition(partition) else {
        return Err(ErrorCode::NotCoordinator);
    };
    Ok((shard.owner(owner), partition))
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
