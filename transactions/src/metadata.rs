//! One transactional id's metadata and Kafka's rules for changing it
//! (`TransactionMetadata.scala`): each `prepare_*` computes a [`Transit`] (Kafka's
//! `TxnTransitMetadata`, the values to persist) without touching the metadata, and
//! [`TxnMetadata::complete_transition_to`] applies one once its record is durable, checking
//! the same conditions Kafka checks. A failed check is a coordinator bug and panics.
//!
//! Epochs: `i16::MAX` is never handed to a client so that the coordinator can always fence
//! (bump) once more; an epoch at `i16::MAX - 1` is "exhausted" and the next bump rotates to a
//! new producer id instead.

use std::collections::BTreeSet;

use wire::ErrorCode;

use crate::state::TxnState;

/// Kafka's `RecordBatch.NO_PRODUCER_ID`.
pub const NO_PRODUCER_ID: i64 = -1;
/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Whether `epoch` leaves no room for another client-visible bump (`>= i16::MAX - 1`).
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Whether a client transaction version bumps the epoch at every EndTxn (KIP-890 part 2,
/// `TransactionVersion.supportsEpochBump`: version 2 and up).
pub fn supports_epoch_bump(client_transaction_version: i16) -> bool {
    client_transaction_version >= 2
}

/// A transactional id's state (Kafka's `TransactionMetadata`, less its lock and pending state,
/// which the coordinator keeps beside it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last transition (Kafka's `previousProducerId`).
    pub previous_producer_id: i64,
    /// TV2: the producer id the client moves to when the epoch overflowed at EndTxn.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last InitProducerId bump: lets a retried InitProducerId (KIP-360)
    /// be answered with the same epoch. Not persisted; -1 after a load.
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TxnState,
    /// The (topic, partition)s in the open transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the first partition was added; -1 when no transaction was ever started.
    pub txn_start_timestamp: i64,
    /// When the metadata last changed; idle ids expire from here.
    pub txn_last_update_timestamp: i64,
    /// The client's transaction version when the state last changed (0 or 2 from clients).
    pub client_transaction_version: i16,
}

/// The values a transition persists (Kafka's `TxnTransitMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Transit {
    pub producer_id: i64,
    pub prev_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub txn_start_timestamp: i64,
    pub txn_last_update_timestamp: i64,
    pub client_transaction_version: i16,
}

impl TxnMetadata {
    /// A new id's metadata before its first InitProducerId is persisted: Empty, epoch -1
    /// (the first bump makes it 0), as Kafka puts it in its cache.
    pub fn new_empty(
        transactional_id: &str,
        producer_id: i64,
        txn_timeout_ms: i32,
        now: i64,
    ) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_owned(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            txn_start_timestamp: -1,
            txn_last_update_timestamp: now,
            client_transaction_version: 0,
        }
    }

    /// Whether the current epoch is exhausted (see the module header).
    pub fn is_producer_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    /// Kafka's `prepareTransitionTo`: the transit, after checking the move is legal.
    #[allow(clippy::too_many_arguments)]
    fn prepare_transition_to(
        &self,
        state: TxnState,
        producer_id: i64,
        next_producer_id: i64,
        producer_epoch: i16,
        last_producer_epoch: i16,
        txn_timeout_ms: i32,
        partitions: BTreeSet<(String, i32)>,
        txn_start_timestamp: i64,
        now: i64,
        client_transaction_version: i16,
    ) -> Transit {
        assert!(producer_id >= 0, "illegal new producer id {producer_id}");
        assert!(
            state == TxnState::Dead || producer_epoch >= 0,
            "illegal new producer epoch {producer_epoch}"
        );
        assert!(
            TxnState::is_valid_transition(self.state, state),
            "{}: illegal transition {} -> {}",
            self.transactional_id,
            self.state,
            state
        );
        Transit {
            producer_id,
            prev_producer_id: self.producer_id,
            next_producer_id,
            producer_epoch,
            last_producer_epoch,
            txn_timeout_ms,
            state,
            partitions,
            txn_start_timestamp,
            txn_last_update_timestamp: now,
            client_transaction_version,
        }
    }

    /// The epoch a fence moves to (`prepareFenceProducerEpoch`): one more, unless an earlier
    /// fence's bump may already be in memory but failed to persist (then not again: it was
    /// never shown to a client).
    pub(crate) fn fence_epoch(&self, has_failed_epoch_fence: bool) -> i16 {
        assert!(
            self.producer_epoch < i16::MAX,
            "cannot fence producer epoch i16::MAX"
        );
        if has_failed_epoch_fence {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        }
    }

    /// `prepareIncrementProducerEpoch`: InitProducerId on an idle id. `expected_epoch` is
    /// KIP-360's epoch from the request: the current one (or none yet) bumps, the one before
    /// the last bump is a retry answered with the current epoch, anything else is fenced.
    pub(crate) fn prepare_increment_producer_epoch(
        &self,
        txn_timeout_ms: i32,
        expected_epoch: Option<i16>,
        now: i64,
    ) -> Result<Transit, ErrorCode> {
        let (epoch, last_epoch) = match expected_epoch {
            None => (self.bumped_epoch()?, NO_PRODUCER_EPOCH),
            Some(expected)
                if self.producer_epoch == NO_PRODUCER_EPOCH || expected == self.producer_epoch =>
            {
                (self.bumped_epoch()?, self.producer_epoch)
            }
            Some(expected) if expected == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Err(ErrorCode::ProducerFenced),
        };
        Ok(self.prepare_transition_to(
            TxnState::Empty,
            self.producer_id,
            NO_PRODUCER_ID,
            epoch,
            last_epoch,
            txn_timeout_ms,
            BTreeSet::new(),
            -1,
            now,
            self.client_transaction_version,
        ))
    }

    /// The epoch after a client-visible bump. Kafka throws here when the epoch is exhausted
    /// (callers rotate the producer id first); a request that still reaches it, such as a
    /// mismatched KIP-360 retry, is refused as fenced instead of crashing on client input.
    fn bumped_epoch(&self) -> Result<i16, ErrorCode> {
        if self.is_producer_epoch_exhausted() {
            Err(ErrorCode::ProducerFenced)
        } else {
            Ok(self.producer_epoch + 1)
        }
    }

    /// `prepareProducerIdRotation`: a new producer id at epoch 0 once the epoch is exhausted.
    pub(crate) fn prepare_producer_id_rotation(
        &self,
        new_producer_id: i64,
        txn_timeout_ms: i32,
        now: i64,
        record_last_epoch: bool,
    ) -> Transit {
        assert!(
            !matches!(
                self.state,
                TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
            ),
            "cannot rotate producer ids while a transaction is open"
        );
        let last_epoch = if record_last_epoch {
            self.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        self.prepare_transition_to(
            TxnState::Empty,
            new_producer_id,
            NO_PRODUCER_ID,
            0,
            last_epoch,
            txn_timeout_ms,
            BTreeSet::new(),
            -1,
            now,
            self.client_transaction_version,
        )
    }

    /// `prepareAddPartitions`: Ongoing with the union; a new transaction starts now.
    pub(crate) fn prepare_add_partitions(
        &self,
        added: &[(String, i32)],
        now: i64,
        client_transaction_version: i16,
    ) -> Transit {
        let start = match self.state {
            TxnState::Empty | TxnState::CompleteAbort | TxnState::CompleteCommit => now,
            _ => self.txn_start_timestamp,
        };
        let mut partitions = self.partitions.clone();
        partitions.extend(added.iter().cloned());
        self.prepare_transition_to(
            TxnState::Ongoing,
            self.producer_id,
            NO_PRODUCER_ID,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            partitions,
            start,
            now,
            client_transaction_version,
        )
    }

    /// `prepareAbortOrCommit`: PrepareCommit/PrepareAbort; TV2 bumps the epoch here.
    /// `no_partition_added` (TV2 abort of an idle id) starts the "transaction" now.
    pub(crate) fn prepare_abort_or_commit(
        &self,
        state: TxnState,
        client_transaction_version: i16,
        next_producer_id: i64,
        now: i64,
        no_partition_added: bool,
    ) -> Transit {
        let (epoch, last_epoch) = if supports_epoch_bump(client_transaction_version) {
            let bumped = self
                .producer_epoch
                .checked_add(1)
                .expect("callers rotate the producer id before the epoch overflows");
            (bumped, self.producer_epoch)
        } else {
            (self.producer_epoch, self.last_producer_epoch)
        };
        let start = if no_partition_added {
            now
        } else {
            self.txn_start_timestamp
        };
        self.prepare_transition_to(
            state,
            self.producer_id,
            next_producer_id,
            epoch,
            last_epoch,
            self.txn_timeout_ms,
            self.partitions.clone(),
            start,
            now,
            client_transaction_version,
        )
    }

    /// `prepareComplete`: CompleteCommit/CompleteAbort with the partitions cleared; TV2 moves
    /// to the next producer id (epoch 0) if EndTxn overflowed the epoch.
    pub(crate) fn prepare_complete(&self, now: i64) -> Transit {
        let state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => panic!("{}: complete from {other}", self.transactional_id),
        };
        let (producer_id, epoch) = if supports_epoch_bump(self.client_transaction_version)
            && self.next_producer_id != NO_PRODUCER_ID
        {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        };
        self.prepare_transition_to(
            state,
            producer_id,
            NO_PRODUCER_ID,
            epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            BTreeSet::new(),
            self.txn_start_timestamp,
            now,
            self.client_transaction_version,
        )
    }

    /// `prepareDead`: the id expires (persisted as a tombstone).
    pub(crate) fn prepare_dead(&self) -> Transit {
        self.prepare_transition_to(
            TxnState::Dead,
            self.producer_id,
            NO_PRODUCER_ID,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            BTreeSet::new(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
            self.client_transaction_version,
        )
    }

    /// The metadata once `transit` is applied (Dead included, which Kafka never applies but
    /// removes from its cache).
    pub(crate) fn after(&self, transit: &Transit) -> TxnMetadata {
        let mut next = self.clone();
        if transit.state == TxnState::Dead {
            next.state = TxnState::Dead;
            next.partitions.clear();
        } else {
            next.complete_transition_to(transit);
        }
        next
    }

    /// Kafka's `completeTransitionTo`: applies a persisted transit, checking it is one this
    /// metadata could have prepared.
    pub(crate) fn complete_transition_to(&mut self, transit: &Transit) {
        let id = &self.transactional_id;
        let bad = |what: &str| -> ! { panic!("{id}: bad transition to {transit:?} ({what})") };
        let tv2 = supports_epoch_bump(transit.client_transaction_version);
        match transit.state {
            TxnState::Empty => {
                let bump = i32::from(transit.producer_epoch) == i32::from(self.producer_epoch) + 1
                    || (transit.producer_epoch == 0 && transit.producer_id != self.producer_id);
                if (self.producer_epoch != transit.producer_epoch && !bump)
                    || !transit.partitions.is_empty()
                    || transit.txn_start_timestamp != -1
                {
                    bad("init");
                }
                self.txn_timeout_ms = transit.txn_timeout_ms;
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.producer_id = transit.producer_id;
                self.previous_producer_id = transit.prev_producer_id;
            }
            TxnState::Ongoing => {
                if !self.valid_producer_epoch(transit)
                    || !self.partitions.is_subset(&transit.partitions)
                    || self.txn_timeout_ms != transit.txn_timeout_ms
                {
                    bad("add partitions");
                }
                self.txn_start_timestamp = transit.txn_start_timestamp;
                self.partitions.extend(transit.partitions.iter().cloned());
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                let empty_abort = transit.state == TxnState::PrepareAbort
                    && tv2
                    && matches!(
                        self.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    );
                let valid_start =
                    self.txn_start_timestamp == transit.txn_start_timestamp || empty_abort;
                if !self.valid_producer_epoch(transit)
                    || self.partitions != transit.partitions
                    || self.txn_timeout_ms != transit.txn_timeout_ms
                    || !valid_start
                {
                    bad("end");
                }
                if tv2 {
                    self.producer_epoch = transit.producer_epoch;
                    self.last_producer_epoch = transit.last_producer_epoch;
                    self.next_producer_id = transit.next_producer_id;
                    self.txn_start_timestamp = transit.txn_start_timestamp;
                }
            }
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                if !self.valid_producer_epoch(transit)
                    || self.txn_timeout_ms != transit.txn_timeout_ms
                    || transit.txn_start_timestamp == -1
                {
                    bad("complete");
                }
                self.txn_start_timestamp = transit.txn_start_timestamp;
                self.partitions.clear();
                if tv2 {
                    self.producer_epoch = transit.producer_epoch;
                    self.last_producer_epoch = transit.last_producer_epoch;
                    self.previous_producer_id = transit.prev_producer_id;
                    self.producer_id = transit.producer_id;
                    self.next_producer_id = transit.next_producer_id;
                }
            }
            TxnState::PrepareEpochFence | TxnState::Dead => bad("never completed"),
        }
        self.client_transaction_version = transit.client_transaction_version;
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp;
        self.state = transit.state;
    }

    /// Kafka's `validProducerEpoch`: TV2 moves the epoch at Prepare* and possibly the producer
    /// id at Complete*; otherwise both must be unchanged.
    fn valid_producer_epoch(&self, transit: &Transit) -> bool {
        let tv2 = supports_epoch_bump(transit.client_transaction_version);
        match transit.state {
            TxnState::CompleteCommit | TxnState::CompleteAbort
                if tv2 && transit.producer_epoch == 0 =>
            {
                transit.last_producer_epoch == self.last_producer_epoch
                    && transit.prev_producer_id == self.producer_id
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort if tv2 => {
                transit.last_producer_epoch == self.producer_epoch
                    && transit.producer_id == self.producer_id
            }
            _ => {
                transit.producer_epoch == self.producer_epoch
                    && transit.producer_id == self.producer_id
            }
        }
    }
}
