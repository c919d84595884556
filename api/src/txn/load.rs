//! A `__transaction_state` partition's life on its shard: marked loading when the shard learns
//! it owns it, replayed before its ids are served, its prepared transactions finished; and
//! the timer that aborts transactions past their timeout and forgets idle ids.

use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use wire::record_batch;

use super::serve::{finish, persist};
use super::state::{TxnCoordinators, TxnPartition};
use super::{wall_ms, TXN_TOPIC_KNOWN};
use crate::metadata::records::TopicId;
use crate::shard::Shard;

/// Bytes read per step when replaying a partition at load.
const LOAD_READ_BYTES: usize = 4 << 20;

impl TxnCoordinators {
    /// Marks `partition` as this shard's from the moment it learns it owns it: its ids get
    /// COORDINATOR_LOAD_IN_PROGRESS (retriable) until loaded.
    pub fn opening(&self, partition: i32) {
        self.partitions
            .borrow_mut()
            .entry(partition)
            .or_insert(TxnPartition::Loading);
        TXN_TOPIC_KNOWN.store(true, Ordering::Relaxed);
        self.learned.notify(usize::MAX);
    }

    /// This node no longer leads `partition`: its ids are not served here any more.
    pub fn unload(&self, partition: i32) {
        if self.partitions.borrow_mut().remove(&partition).is_some() {
            tracing::info!(partition, "transaction coordinator partition unloaded");
        }
    }

    /// The partition's log could not be opened: it is offline, not served here.
    pub fn open_failed(&self, partition: i32) {
        let mut partitions = self.partitions.borrow_mut();
        if matches!(partitions.get(&partition), Some(TxnPartition::Loading)) {
            partitions.remove(&partition);
        }
    }

    /// Replays one of this shard's `__transaction_state` partitions, then finishes the
    /// transactions it left prepared (their markers may not all have been written).
    pub async fn load(shard: Rc<Shard>, topic_id: TopicId, partition: i32) {
        shard
            .txn
            .partitions
            .borrow_mut()
            .insert(partition, TxnPartition::Loading);
        let started = Instant::now();
        let Some(target) = shard.partition(&topic_id, partition) else {
            return;
        };
        let coordinator_epoch = target.replica.leader_epoch().unwrap_or(0);
        let config = &shard.config.transactions;
        let mut coordinator = transactions::Coordinator::new(
            coordinator_epoch,
            transactions::TxnConfig {
                transaction_max_timeout_ms: config.max_timeout_ms,
                transactional_id_expiration_ms: config.id_expiration_ms,
                // No `transaction.version` feature is advertised (see handlers/transactions.rs).
                transaction_version_level: 0,
            },
        );
        let (mut offset, end) = {
            let log = target.log.borrow();
            (log.log_start_offset(), log.log_end_offset())
        };
        let mut records = 0u64;
        while offset < end {
            let read = target
                .log
                .borrow()
                .read_bounded(offset, LOAD_READ_BYTES, end, true);
            let bytes = match read.await {
                Ok(bytes) => bytes,
                Err(error) => {
                    tracing::error!(partition, %error, "reading __transaction_state at load failed");
                    break;
                }
            };
            if bytes.is_empty() {
                break;
            }
            for batch in record_batch::stored_batches(&bytes) {
                let Ok((header, raw)) = batch else { break };
                offset = header.next_offset();
                let Ok(parsed) = record_batch::records(raw) else {
                    continue;
                };
                for record in parsed.iter() {
                    let Ok(record) = record else { break };
                    let Some(key) = record.key else { continue };
                    match coordinator.replay(key, record.value) {
                        Ok(()) => records += 1,
                        Err(error) => {
                            tracing::warn!(partition, %error, "skipping an unreadable transaction record")
                        }
                    }
                }
            }
        }
        let unfinished = coordinator.unfinished();
        let ids = coordinator.list().count();
        shard.txn.partitions.borrow_mut().insert(
            partition,
            TxnPartition::Loaded {
                topic_id,
                coordinator,
            },
        );
        shard.txn.loaded.notify(usize::MAX);
        tracing::info!(
            shard = shard.id,
            partition,
            transactional_ids = ids,
            unfinished = unfinished.len(),
            records,
            ms = started.elapsed().as_millis() as u64,
            "loaded __transaction_state partition"
        );
        for plan in unfinished {
            glommio::spawn_local(finish(shard.clone(), partition, plan)).detach();
        }
    }
}

/// One task per shard: every `transaction.abort.timed.out.transaction.cleanup.interval.ms`
/// aborts the transactions open longer than their timeout (Kafka's
/// `abortTimedOutTransactions`, with the epoch bumped so the producer is fenced), and every
/// `transaction.remove.expired.transaction.cleanup.interval.ms` forgets ids idle longer than
/// `transactional.id.expiration.ms` (tombstones). Sleeps on an event while the shard
/// coordinates no partition.
pub async fn run_timer(shard: Weak<Shard>) {
    let Some(strong) = shard.upgrade() else {
        return;
    };
    let abort_every = Duration::from_millis(strong.config.transactions.abort_timed_out_interval_ms);
    let expire_every = Duration::from_millis(strong.config.transactions.remove_expired_interval_ms);
    drop(strong);
    let mut last_expiry = Instant::now();
    loop {
        let Some(strong) = shard.upgrade() else {
            return;
        };
        if strong.txn.loaded_partitions().is_empty() {
            let loaded = strong.txn.loaded.listen();
            drop(strong);
            loaded.await;
            continue;
        }
        drop(strong);
        glommio::timer::sleep(abort_every).await;
        let Some(shard) = shard.upgrade() else {
            return;
        };
        let expire = last_expiry.elapsed() >= expire_every;
        if expire {
            last_expiry = Instant::now();
        }
        for partition in shard.txn.loaded_partitions() {
            let now = wall_ms();
            let timed_out = shard
                .txn
                .with(partition, |coordinator, _| coordinator.timed_out(now))
                .unwrap_or_default();
            for (transition, plan) in timed_out {
                tracing::info!(
                    transactional_id = %plan.transactional_id,
                    producer_id = plan.producer_id,
                    "aborting a transaction past its timeout"
                );
                let shard = shard.clone();
                glommio::spawn_local(async move {
                    if persist(&shard, partition, transition).await.is_ok() {
                        finish(shard, partition, plan).await;
                    }
                })
                .detach();
            }
            if expire {
                let expired = shard
                    .txn
                    .with(partition, |coordinator, _| coordinator.expired_ids(now))
                    .unwrap_or_default();
                for transition in expired {
                    if let Err(code) = persist(&shard, partition, transition).await {
                        tracing::debug!(?code, "expiring a transactional id failed");
                    }
                }
            }
        }
    }
}
