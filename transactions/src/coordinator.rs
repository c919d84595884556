//! One `__transaction_state` partition's transaction coordinator (Kafka's
//! `TransactionCoordinator` with the per-partition part of `TransactionStateManager`): the
//! request handlers, the timers' sweeps and the load-time replay, over a map of ids.
//!
//! Runs on whichever core owns the partition; no I/O and no clock: every call takes `now`
//! (ms) and returns what to persist. Bounds: one entry per transactional id the partition
//! holds, and at most one pending [`Transition`] per id (the pending state, which answers
//! every other call for the id with CONCURRENT_TRANSACTIONS, as Kafka's `pendingState`).
//! A PrepareCommit/PrepareAbort id also counts as busy until its Complete record is
//! persisted: Kafka sets the Complete pending state as soon as the Prepare record is durable.
//!
//! Epoch fencing (InitProducerId on an Ongoing id, and transaction timeouts) is Kafka's
//! PrepareEpochFence followed by an internal EndTxn(abort), done here as one PrepareAbort
//! transition with the bumped epoch. If its append fails, the bump stays in memory
//! (`has_failed_epoch_fence`) and the next fence does not bump again, as in Kafka.

use std::collections::HashMap;

use bytes::Bytes;
use wire::ErrorCode;

use crate::metadata::{
    is_epoch_exhausted, supports_epoch_bump, Transit, TxnMetadata, NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
};
use crate::records::{self, RecordError};
use crate::state::TxnState;

/// The coordinator's settings (Kafka's `TransactionConfig`, the parts decided here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the largest transaction timeout a producer may ask for.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: idle ids are tombstoned after this long.
    pub transactional_id_expiration_ms: i64,
    /// The cluster's finalized `transaction.version` feature level: 1 or more writes
    /// flexible (v1) values; 2 or more makes the coordinator's own aborts (fences,
    /// timeouts) bump the epoch as TV2 does.
    pub transaction_version_level: i16,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_version_level: 0,
        }
    }
}

/// A change to persist before it takes effect: append [`Transition::record`] to
/// `__transaction_state` (acks=all), then call [`Coordinator::complete`] on success or
/// [`Coordinator::abandon`] on failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub transactional_id: String,
    /// The metadata once the record is durable (state Dead: the id is removed).
    pub target: TxnMetadata,
    /// The coordinator epoch the transition was prepared under.
    pub coordinator_epoch: i32,
    /// The `TransactionLogValue` version to write.
    pub value_version: i16,
    /// For an epoch fence: the bumped epoch, already in memory (kept if the append fails).
    fence_epoch: Option<i16>,
}

impl Transition {
    /// The record's key and value (`None`: a tombstone, for an expired id).
    pub fn record(&self) -> (Bytes, Option<Bytes>) {
        let key = records::encode_key(&self.transactional_id);
        if self.target.state == TxnState::Dead {
            return (key, None);
        }
        let value = records::encode_value(&self.target, self.value_version)
            .expect("value_version always fits the target's client transaction version");
        (key, Some(value))
    }

    /// The producer id and epoch to answer with once the transition is complete: for
    /// InitProducerId the new ones; for a TV2 EndTxn the ones the client continues with
    /// (a new producer id at epoch 0 when the epoch overflowed).
    pub fn producer_id_and_epoch(&self) -> (i64, i16) {
        let target = &self.target;
        if target.state.is_prepare()
            && supports_epoch_bump(target.client_transaction_version)
            && target.next_producer_id != NO_PRODUCER_ID
        {
            (target.next_producer_id, 0)
        } else {
            (target.producer_id, target.producer_epoch)
        }
    }

    /// Whether this is an epoch fence (InitProducerId on an Ongoing id, or a timeout).
    pub fn is_fence(&self) -> bool {
        self.fence_epoch.is_some()
    }
}

/// Markers to write for a transaction that reached PrepareCommit/PrepareAbort, once that
/// state is durable; then call [`Coordinator::markers_written`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerPlan {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: Vec<(String, i32)>,
}

/// Per (topic, partition): `ErrorCode::None` or the partition's error.
pub type PartitionErrors = Vec<((String, i32), ErrorCode)>;

/// What InitProducerId does. (One per request, moved once: not worth boxing.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitStep {
    Err(ErrorCode),
    /// Persist, then answer [`Transition::producer_id_and_epoch`].
    Persist(Transition),
    /// An Ongoing transaction is aborted with its epoch bumped (fencing the old producer):
    /// persist, write the markers, and answer CONCURRENT_TRANSACTIONS (the client retries
    /// and then gets the next epoch), or the append's error.
    AbortFirst(Transition, MarkerPlan),
}

/// What EndTxn does. (One per request, moved once: not worth boxing.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndStep {
    Err(ErrorCode),
    /// A retried EndTxn that already completed: answer OK (TV2: with the current producer
    /// id and epoch from [`Coordinator::describe`]).
    AlreadyDone,
    /// Persist, answer OK (TV2: with [`Transition::producer_id_and_epoch`]), then write the
    /// markers.
    Prepare(Transition, MarkerPlan),
}

/// Kafka's mapping of a failed `__transaction_state` append to the error the client sees
/// (`TransactionStateManager.appendTransactionToLog`).
pub fn append_error(error: ErrorCode) -> ErrorCode {
    match error {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => ErrorCode::UnknownServerError,
        other => other,
    }
}

#[derive(Clone, Debug)]
struct Entry {
    metadata: TxnMetadata,
    /// The state a prepared transition moves to (Kafka's `pendingState`).
    pending: Option<TxnState>,
    has_failed_epoch_fence: bool,
}

impl Entry {
    fn new(metadata: TxnMetadata) -> Self {
        Entry {
            metadata,
            pending: None,
            has_failed_epoch_fence: false,
        }
    }

    /// Whether a transition is in flight, counting a Prepare* state whose markers and
    /// Complete record are still to come.
    fn busy(&self) -> bool {
        self.pending.is_some() || self.metadata.state.is_prepare()
    }
}

/// One coordinator partition's transactions (one per `__transaction_state` partition the
/// broker leads, made at each election with its coordinator epoch).
#[derive(Clone, Debug)]
pub struct Coordinator {
    coordinator_epoch: i32,
    config: TxnConfig,
    txns: HashMap<String, Entry>,
}

impl Coordinator {
    pub fn new(coordinator_epoch: i32, config: TxnConfig) -> Self {
        Coordinator {
            coordinator_epoch,
            config,
            txns: HashMap::new(),
        }
    }

    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// Replays one record read back from `__transaction_state` at load (value `None`: a
    /// tombstone). Records with an unknown key version are skipped, as Kafka skips them.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), RecordError> {
        let Some(transactional_id) = records::decode_key(key)? else {
            return Ok(());
        };
        match value {
            None => {
                self.txns.remove(&transactional_id);
            }
            Some(value) => {
                let metadata = records::decode_value(&transactional_id, value)?;
                match metadata.state {
                    // Never written by a coordinator (Dead is a tombstone, a fence lives only
                    // in memory): a record claiming them is not trusted.
                    TxnState::Dead | TxnState::PrepareEpochFence => {
                        return Err(RecordError::UnknownState(metadata.state.id()));
                    }
                    _ => {
                        self.txns.insert(transactional_id, Entry::new(metadata));
                    }
                }
            }
        }
        Ok(())
    }

    /// After load: the transactions left in PrepareCommit/PrepareAbort, whose markers must be
    /// (re)written before [`Coordinator::markers_written`] completes them. Sorted by id.
    pub fn unfinished(&self) -> Vec<MarkerPlan> {
        let mut plans: Vec<MarkerPlan> = self
            .txns
            .values()
            .filter(|entry| entry.metadata.state.is_prepare() && entry.pending.is_none())
            .map(|entry| self.marker_plan(&entry.metadata))
            .collect();
        plans.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        plans
    }

    /// InitProducerId for a transactional id (non-empty: the caller answers INVALID_REQUEST
    /// for an empty one and allocates directly for a null one). `expected` is KIP-360's
    /// (producer id, epoch) from the request, if any.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now: i64,
        new_producer_id: &mut dyn FnMut() -> Result<i64, ErrorCode>,
    ) -> InitStep {
        if txn_timeout_ms <= 0 || txn_timeout_ms > self.config.transaction_max_timeout_ms {
            return InitStep::Err(ErrorCode::InvalidTransactionTimeout);
        }
        if !self.txns.contains_key(transactional_id) {
            let producer_id = match new_producer_id() {
                Ok(producer_id) => producer_id,
                Err(error) => return InitStep::Err(error),
            };
            let metadata =
                TxnMetadata::new_empty(transactional_id, producer_id, txn_timeout_ms, now);
            self.txns
                .insert(transactional_id.to_owned(), Entry::new(metadata));
        }
        let entry = &self.txns[transactional_id];
        let metadata = &entry.metadata;
        if entry.busy() {
            return InitStep::Err(ErrorCode::ConcurrentTransactions);
        }
        // KIP-360: fence unless the id was just created, the producer id is current, or it is
        // the previous one with an exhausted epoch (a retry of a rotation).
        if let Some((producer_id, epoch)) = expected {
            let valid = metadata.producer_epoch == NO_PRODUCER_EPOCH
                || producer_id == metadata.producer_id
                || (producer_id == metadata.previous_producer_id && is_epoch_exhausted(epoch));
            if !valid {
                return InitStep::Err(ErrorCode::ProducerFenced);
            }
        }
        match metadata.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                InitStep::Err(ErrorCode::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let rotate = metadata.is_producer_epoch_exhausted()
                    && !matches!(expected, Some((_, epoch)) if epoch != metadata.producer_epoch);
                let transit = if rotate {
                    match new_producer_id() {
                        Ok(producer_id) => metadata.prepare_producer_id_rotation(
                            producer_id,
                            txn_timeout_ms,
                            now,
                            expected.is_some(),
                        ),
                        Err(error) => return InitStep::Err(error),
                    }
                } else {
                    match metadata.prepare_increment_producer_epoch(
                        txn_timeout_ms,
                        expected.map(|(_, epoch)| epoch),
                        now,
                    ) {
                        Ok(transit) => transit,
                        Err(error) => return InitStep::Err(error),
                    }
                };
                InitStep::Persist(self.begin(transactional_id, None, transit))
            }
            TxnState::Ongoing => {
                let (transition, plan) = self.begin_fence(transactional_id, now);
                InitStep::AbortFirst(transition, plan)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                panic!("{transactional_id}: never rests in {}", metadata.state)
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's `__consumer_offsets` partition) for a
    /// transaction version 1 client. `None`: all already in the transaction, answer at once.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
        now: i64,
    ) -> Result<Option<Transition>, ErrorCode> {
        self.add_partitions_versioned(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            0,
            now,
        )
    }

    /// [`Coordinator::add_partitions`] with the request's client transaction version (2 for
    /// AddPartitionsToTxn v5+, else 0), which the transaction records.
    pub fn add_partitions_versioned(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
        client_transaction_version: i16,
        now: i64,
    ) -> Result<Option<Transition>, ErrorCode> {
        let Some(entry) = self.txns.get(transactional_id) else {
            return Err(ErrorCode::InvalidProducerIdMapping);
        };
        let metadata = &entry.metadata;
        // An id whose first InitProducerId never completed has handed out no producer id.
        if metadata.producer_id != producer_id || metadata.producer_epoch == NO_PRODUCER_EPOCH {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if metadata.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if entry.busy() || metadata.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        if metadata.state == TxnState::Ongoing
            && partitions.iter().all(|p| metadata.partitions.contains(p))
        {
            return Ok(None);
        }
        let transit = metadata.prepare_add_partitions(partitions, now, client_transaction_version);
        Ok(Some(self.begin(transactional_id, None, transit)))
    }

    /// KIP-890 verify-only AddPartitionsToTxn (v4+ from brokers): per partition
    /// `ErrorCode::None` if it is in the ongoing transaction, else TRANSACTION_ABORTABLE.
    /// Pending transitions are not checked, as in Kafka: the produce append checks again.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<PartitionErrors, ErrorCode> {
        let Some(entry) = self.txns.get(transactional_id) else {
            return Err(ErrorCode::InvalidProducerIdMapping);
        };
        let metadata = &entry.metadata;
        if metadata.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if metadata.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if metadata.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|p| {
                let code = if metadata.partitions.contains(p) {
                    ErrorCode::None
                } else {
                    ErrorCode::TransactionAbortable
                };
                (p.clone(), code)
            })
            .collect())
    }

    /// EndTxn from a transaction version 1 client (EndTxn v0-4).
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now: i64,
    ) -> EndStep {
        self.end_txn_versioned(
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            0,
            now,
            &mut || Err(ErrorCode::UnknownServerError),
        )
    }

    /// EndTxn with the request's client transaction version (2 for EndTxn v5+: KIP-890 part
    /// 2, the epoch is bumped at every end and may overflow into a new producer id, which
    /// `new_producer_id` allocates).
    #[allow(clippy::too_many_arguments)]
    pub fn end_txn_versioned(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_transaction_version: i16,
        now: i64,
        new_producer_id: &mut dyn FnMut() -> Result<i64, ErrorCode>,
    ) -> EndStep {
        let Some(entry) = self.txns.get(transactional_id) else {
            return EndStep::Err(ErrorCode::InvalidProducerIdMapping);
        };
        // An id whose first InitProducerId never completed has handed out no producer id.
        if entry.metadata.producer_epoch == NO_PRODUCER_EPOCH {
            return EndStep::Err(ErrorCode::InvalidProducerIdMapping);
        }
        let result = if supports_epoch_bump(client_transaction_version) {
            end_tv2(
                entry,
                producer_id,
                producer_epoch,
                commit,
                client_transaction_version,
                now,
                new_producer_id,
            )
        } else {
            end_tv1(entry, producer_id, producer_epoch, commit, now)
        };
        match result {
            Err(ErrorCode::None) => EndStep::AlreadyDone,
            Err(error) => EndStep::Err(error),
            Ok(transit) => {
                let transition = self.begin(transactional_id, None, transit);
                let plan = self.marker_plan(&transition.target);
                EndStep::Prepare(transition, plan)
            }
        }
    }

    /// The markers of a prepared transaction were all written: the transition to
    /// CompleteCommit/CompleteAbort (partitions cleared). `None` if the id is not prepared
    /// or its Complete transition is already in flight.
    pub fn markers_written(&mut self, transactional_id: &str, now: i64) -> Option<Transition> {
        let entry = self.txns.get(transactional_id)?;
        if !entry.metadata.state.is_prepare() || entry.pending.is_some() {
            return None;
        }
        let transit = entry.metadata.prepare_complete(now);
        Some(self.begin(transactional_id, None, transit))
    }

    /// A transition's record is durable: it takes effect. Ignored if prepared under another
    /// coordinator epoch (Kafka answers NOT_COORDINATOR then).
    pub fn complete(&mut self, transition: Transition) {
        if transition.coordinator_epoch != self.coordinator_epoch {
            tracing::debug!(id = %transition.transactional_id, "transition from another coordinator epoch");
            return;
        }
        let id = transition.transactional_id.as_str();
        // The coordinator was reloaded meanwhile (its state came from the log, which has the
        // record or not): nothing in memory waits for this transition. Ignored rather than
        // trusted, so a race with a reload can never stop the shard.
        let Some(entry) = self.txns.get_mut(id) else {
            tracing::warn!(id, "completing a transition of an unknown id; ignored");
            return;
        };
        if entry.pending != Some(transition.target.state) {
            tracing::warn!(id, pending = ?entry.pending, "completing a transition that is not pending; ignored");
            return;
        }
        if transition.target.state == TxnState::Dead {
            self.txns.remove(id);
            return;
        }
        if transition.target.state.is_prepare() {
            entry.has_failed_epoch_fence = false;
        }
        entry.metadata = transition.target;
        entry.pending = None;
    }

    /// A transition's append failed: the id is free again, unchanged, except that a failed
    /// fence keeps its bumped epoch in memory (see the module header).
    pub fn abandon(&mut self, transition: &Transition) {
        let Some(entry) = self.txns.get_mut(&transition.transactional_id) else {
            return;
        };
        if transition.coordinator_epoch != self.coordinator_epoch
            || entry.pending != Some(transition.target.state)
        {
            return;
        }
        entry.pending = None;
        if transition.fence_epoch.is_some() {
            entry.has_failed_epoch_fence = true;
        }
    }

    /// Ongoing transactions whose timeout passed since they started (Kafka's
    /// `abortTimedOutTransactions`): each is aborted with its epoch bumped, fencing the
    /// producer. Ids with a transition in flight are skipped. Sorted by id.
    pub fn timed_out(&mut self, now: i64) -> Vec<(Transition, MarkerPlan)> {
        let mut ids: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, entry)| {
                !entry.busy()
                    && entry.metadata.state == TxnState::Ongoing
                    && entry.metadata.txn_start_timestamp + i64::from(entry.metadata.txn_timeout_ms)
                        < now
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids.iter().map(|id| self.begin_fence(id, now)).collect()
    }

    /// Empty/CompleteCommit/CompleteAbort ids idle for `transactional_id_expiration_ms`:
    /// tombstone transitions (their completion removes the id). Sorted by id.
    pub fn expired_ids(&mut self, now: i64) -> Vec<Transition> {
        let horizon = now.saturating_sub(self.config.transactional_id_expiration_ms);
        let mut ids: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, entry)| {
                entry.pending.is_none()
                    && entry.metadata.state.is_expiration_allowed()
                    && entry.metadata.txn_last_update_timestamp <= horizon
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids.iter()
            .map(|id| {
                let transit = self.txns[id].metadata.prepare_dead();
                self.begin(id, None, transit)
            })
            .collect()
    }

    /// The id's metadata (DescribeTransactions; `None`: TRANSACTIONAL_ID_NOT_FOUND).
    pub fn describe(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns
            .get(transactional_id)
            .map(|entry| &entry.metadata)
            .filter(|metadata| metadata.state != TxnState::Dead)
    }

    /// Every id's metadata, in no particular order (ListTransactions filters it).
    pub fn list(&self) -> impl Iterator<Item = &TxnMetadata> {
        self.txns.values().map(|entry| &entry.metadata)
    }

    /// The state the id's in-flight transition moves to, if any.
    pub fn pending_state(&self, transactional_id: &str) -> Option<TxnState> {
        self.txns
            .get(transactional_id)
            .and_then(|entry| entry.pending)
    }

    /// How many ids this partition holds.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Marks the id pending and wraps the transit's outcome as a [`Transition`].
    fn begin(
        &mut self,
        transactional_id: &str,
        fence_epoch: Option<i16>,
        transit: Transit,
    ) -> Transition {
        let level = self.config.transaction_version_level;
        let entry = self
            .txns
            .get_mut(transactional_id)
            .expect("transitions are prepared for known ids");
        assert!(
            entry.pending.is_none(),
            "{transactional_id}: already pending"
        );
        let target = entry.metadata.after(&transit);
        entry.pending = Some(target.state);
        Transition {
            transactional_id: transactional_id.to_owned(),
            value_version: records::value_version(level, target.client_transaction_version),
            target,
            coordinator_epoch: self.coordinator_epoch,
            fence_epoch,
        }
    }

    /// Kafka's `prepareFenceProducerEpoch` plus its internal EndTxn(abort): PrepareAbort with
    /// the epoch bumped, under the cluster's transaction version (TV2 bumps once more, unless
    /// that would pass `i16::MAX`).
    fn begin_fence(&mut self, transactional_id: &str, now: i64) -> (Transition, MarkerPlan) {
        let entry = self
            .txns
            .get_mut(transactional_id)
            .expect("fences are prepared for known ids");
        assert_eq!(entry.metadata.state, TxnState::Ongoing);
        let fence_epoch = entry.metadata.fence_epoch(entry.has_failed_epoch_fence);
        // Kafka bumps the epoch in memory before the append, so the fenced producer is
        // answered PRODUCER_FENCED at once, and the bump outlives a failed append.
        entry.metadata.producer_epoch = fence_epoch;
        entry.metadata.last_producer_epoch = NO_PRODUCER_EPOCH;
        let fenced = &entry.metadata;
        let level = self.config.transaction_version_level;
        let version = if supports_epoch_bump(level) && fence_epoch < i16::MAX {
            level
        } else {
            0
        };
        let transit = fenced.prepare_abort_or_commit(
            TxnState::PrepareAbort,
            version,
            NO_PRODUCER_ID,
            now,
            false,
        );
        let transition = self.begin(transactional_id, Some(fence_epoch), transit);
        let plan = self.marker_plan(&transition.target);
        (transition, plan)
    }

    fn marker_plan(&self, metadata: &TxnMetadata) -> MarkerPlan {
        MarkerPlan {
            transactional_id: metadata.transactional_id.clone(),
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
            commit: metadata.state == TxnState::PrepareCommit,
            coordinator_epoch: self.coordinator_epoch,
            partitions: metadata.partitions.iter().cloned().collect(),
        }
    }
}

/// Kafka's `endTransactionWithTV1` for a client's request: the epoch must match exactly;
/// `Err(ErrorCode::None)` is a retry of a completed end (answered OK).
fn end_tv1(
    entry: &Entry,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    now: i64,
) -> Result<Transit, ErrorCode> {
    let metadata = &entry.metadata;
    if metadata.producer_id != producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if producer_epoch != metadata.producer_epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    if entry.busy() {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    match (metadata.state, commit) {
        (TxnState::Ongoing, _) => {
            let next = if commit {
                TxnState::PrepareCommit
            } else {
                TxnState::PrepareAbort
            };
            Ok(metadata.prepare_abort_or_commit(next, 0, NO_PRODUCER_ID, now, false))
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Err(ErrorCode::None),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Err(ErrorCode::ConcurrentTransactions)
        }
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => {
            panic!(
                "{}: never rests in {}",
                metadata.transactional_id, metadata.state
            )
        }
        _ => Err(ErrorCode::InvalidTxnState),
    }
}

/// Kafka's `endTransaction` for transaction version 2 clients: every end bumps the epoch, a
/// retry is recognised by the client's epoch being one behind (or the old producer id at
/// `i16::MAX - 1` after an overflow), and an idle id may be aborted.
fn end_tv2(
    entry: &Entry,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    client_transaction_version: i16,
    now: i64,
    new_producer_id: &mut dyn FnMut() -> Result<i64, ErrorCode>,
) -> Result<Transit, ErrorCode> {
    let metadata = &entry.metadata;
    let retry_on_overflow = metadata.previous_producer_id == producer_id
        && producer_epoch == i16::MAX - 1
        && metadata.producer_epoch == 0;
    let retry_on_epoch_bump = i32::from(metadata.producer_epoch) == i32::from(producer_epoch) + 1;
    let valid_epoch = match metadata.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_epoch_bump,
        TxnState::CompleteCommit | TxnState::CompleteAbort => {
            retry_on_epoch_bump || retry_on_overflow || producer_epoch == metadata.producer_epoch
        }
        _ => producer_epoch == metadata.producer_epoch,
    };
    let is_retry = retry_on_epoch_bump || retry_on_overflow;
    if metadata.producer_id != producer_id && !retry_on_overflow {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if !valid_epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    if entry.busy() {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    let mut prepare = |state: TxnState, no_partition_added: bool| -> Result<Transit, ErrorCode> {
        // Only a fence can leave the epoch at i16::MAX; Kafka would overflow it here.
        if metadata.producer_epoch == i16::MAX {
            return Err(ErrorCode::ProducerFenced);
        }
        let next_producer_id = if metadata.is_producer_epoch_exhausted() {
            new_producer_id()?
        } else {
            NO_PRODUCER_ID
        };
        Ok(metadata.prepare_abort_or_commit(
            state,
            client_transaction_version,
            next_producer_id,
            now,
            no_partition_added,
        ))
    };
    match (metadata.state, commit) {
        (TxnState::Ongoing, true) => prepare(TxnState::PrepareCommit, false),
        (TxnState::Ongoing, false) => prepare(TxnState::PrepareAbort, false),
        (TxnState::CompleteCommit, true) if is_retry => Err(ErrorCode::None),
        (TxnState::CompleteCommit, false) if !is_retry => prepare(TxnState::PrepareAbort, true),
        (TxnState::CompleteAbort, false) if is_retry => Err(ErrorCode::None),
        (TxnState::CompleteAbort, false) => prepare(TxnState::PrepareAbort, true),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Err(ErrorCode::ConcurrentTransactions)
        }
        (TxnState::Empty, false) => prepare(TxnState::PrepareAbort, true),
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => {
            panic!(
                "{}: never rests in {}",
                metadata.transactional_id, metadata.state
            )
        }
        _ => Err(ErrorCode::InvalidTxnState),
    }
}
