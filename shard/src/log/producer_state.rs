//! Idempotent-producer state of one partition (KIP-98, KIP-360): per producer id its epoch and
//! the metadata of its last `NUM_BATCHES_TO_RETAIN` batches, as Kafka's ProducerStateManager /
//! ProducerStateEntry / ProducerAppendInfo keep it, so that
//!
//! - a retried batch (same id, epoch and sequence range as one of the retained batches) is
//!   answered with its original offsets instead of being appended again;
//! - a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH;
//! - a higher epoch starting at sequence 0 (KIP-360's client-side epoch bump) starts afresh.
//!
//! Everything is read from the 61-byte batch header (producer id, epoch, base sequence, last
//! offset delta, max timestamp): no pass over the records. A producer seen before costs a hash
//! lookup and a write into a fixed ring: no allocation.
//!
//! Kafka no longer answers UNKNOWN_PRODUCER_ID from a produce (since 2.5, KIP-360): a producer
//! the partition has no state for (never seen, expired, or its batches removed by retention) is
//! accepted at any sequence, and neither do we.
//!
//! Snapshot file (`<20-digit offset>.snapshot`): Kafka's ProducerSnapshot layout, version 1,
//! big-endian: `version:i16 crc:u32 count:i32 entry*` with the CRC-32C over everything after
//! the crc field, entry = `producerId:i64 epoch:i16 lastSequence:i32 lastOffset:i64
//! offsetDelta:i32 timestamp:i64 coordinatorEpoch:i32 currentTxnFirstOffset:i64`. Kafka writes
//! one entry per producer (its last batch); we write one per retained batch, oldest first, so
//! that duplicates of any of the last five batches are still recognised after a restart. A
//! Kafka reader keeps the last entry of each producer, which is Kafka's own state. Every
//! entry of a producer carries its coordinator epoch and open transaction's first offset
//! (-1: none); a producer with no retained batch (one that only wrote a transaction marker)
//! is written as one entry with lastSequence -1 and lastOffset -1, as Kafka writes it.
//!
//! Transactions (KIP-98, Kafka's `ProducerAppendInfo.appendDataBatch` /
//! `appendEndTxnMarker`): a transactional data batch from a producer with no open
//! transaction opens one at its base offset; a non-transactional batch while one is open is
//! INVALID_TXN_STATE; a transaction marker (control batch) closes it, after checking the
//! producer epoch and the coordinator epoch. The open transactions are also kept ordered by
//! first offset (`ongoing`), which gives the first unstable offset. Only the transactional
//! path touches that map: a plain batch still costs one hash lookup and no allocation.

use std::collections::{BTreeMap, HashMap};

use wire::record_batch::BatchHeader;

use super::txn_index::{EndTxnMarker, TxnMarker};

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`; also the client's
/// `max.in.flight.requests.per.connection` limit for idempotence.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;

/// Snapshot format version written and read.
pub const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_HEADER_BYTES: usize = 2 + 4 + 4;
const SNAPSHOT_ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// One retained batch: Kafka's BatchMetadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }
    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// State of one producer id on one partition.
#[derive(Clone, Debug)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Ring of the last batches, oldest at `head`.
    batches: [BatchMetadata; NUM_BATCHES_TO_RETAIN],
    head: u8,
    len: u8,
    /// Max timestamp of the producer's last batch or marker (drives
    /// `producer.id.expiration.ms`).
    pub last_timestamp: i64,
    /// First offset of the producer's open transaction (Kafka's `currentTxnFirstOffset`).
    pub current_txn_first_offset: Option<i64>,
    /// Epoch of the transaction coordinator that wrote the producer's last marker (-1: none).
    pub coordinator_epoch: i32,
}

/// Equal states: same epoch, timestamp and retained batches, wherever the ring starts.
impl PartialEq for ProducerEntry {
    fn eq(&self, other: &ProducerEntry) -> bool {
        self.epoch == other.epoch
            && self.last_timestamp == other.last_timestamp
            && self.current_txn_first_offset == other.current_txn_first_offset
            && self.coordinator_epoch == other.coordinator_epoch
            && self.batches().eq(other.batches())
    }
}

impl Eq for ProducerEntry {}

impl ProducerEntry {
    fn empty() -> ProducerEntry {
        ProducerEntry {
            epoch: NO_PRODUCER_EPOCH,
            batches: [BatchMetadata::default(); NUM_BATCHES_TO_RETAIN],
            head: 0,
            len: 0,
            last_timestamp: -1,
            current_txn_first_offset: None,
            coordinator_epoch: -1,
        }
    }

    /// Kafka's `maybeUpdateProducerEpoch`: a new epoch forgets the old epoch's batches.
    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.len = 0;
            self.head = 0;
            self.epoch = epoch;
        }
    }

    /// Retained batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> + '_ {
        (0..self.len as usize)
            .map(move |i| &self.batches[(self.head as usize + i) % NUM_BATCHES_TO_RETAIN])
    }

    fn last(&self) -> Option<&BatchMetadata> {
        (self.len > 0).then(|| {
            &self.batches[(self.head as usize + self.len as usize - 1) % NUM_BATCHES_TO_RETAIN]
        })
    }

    /// Sequence of the last batch, or NO_SEQUENCE.
    pub fn last_seq(&self) -> i32 {
        self.last().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// Offset of the last record of the last batch, or -1.
    pub fn last_offset(&self) -> i64 {
        self.last().map_or(-1, |b| b.last_offset)
    }

    /// Kafka's `addBatch`: a new epoch forgets the old epoch's batches.
    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.set_epoch(epoch);
        if self.len as usize == NUM_BATCHES_TO_RETAIN {
            self.batches[self.head as usize] = batch;
            self.head = ((self.head as usize + 1) % NUM_BATCHES_TO_RETAIN) as u8;
        } else {
            let at = (self.head as usize + self.len as usize) % NUM_BATCHES_TO_RETAIN;
            self.batches[at] = batch;
            self.len += 1;
        }
        self.last_timestamp = batch.timestamp;
    }

    /// Kafka's `findDuplicateBatch`: the retained batch with this exact sequence range.
    fn duplicate_of(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<&BatchMetadata> {
        if epoch != self.epoch {
            return None;
        }
        self.batches()
            .find(|b| b.first_seq() == first_seq && b.last_seq == last_seq)
    }
}

/// Why a batch is refused (Kafka's exception and error code).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    #[error("out of order sequence number for producer {producer_id}: {first_seq} (incoming seq. number), {last_seq} (current end sequence number)")]
    OutOfOrderSequence {
        producer_id: i64,
        first_seq: i32,
        last_seq: i32,
    },
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45): a new epoch must start at sequence 0.
    #[error("invalid sequence number for new epoch of producer {producer_id}: {epoch} (request epoch), {first_seq} (seq. number), {current_epoch} (current producer epoch)")]
    NewEpochNotAtZero {
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        current_epoch: i16,
    },
    /// INVALID_PRODUCER_EPOCH (47).
    #[error("epoch of producer {producer_id} is {epoch}, which is smaller than the last seen epoch {current_epoch}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    /// INVALID_TXN_STATE (48): a non-transactional batch from a producer whose transaction
    /// (opened at `txn_first_offset`) is still open.
    #[error("expected a transactional write from producer {producer_id}, whose transaction opened at offset {txn_first_offset} is still open")]
    InvalidTxnState {
        producer_id: i64,
        txn_first_offset: i64,
    },
    /// TRANSACTION_COORDINATOR_FENCED (52): a marker from an older coordinator than the one
    /// that wrote the producer's last marker.
    #[error("transaction marker for producer {producer_id} has coordinator epoch {coordinator_epoch}, older than the last seen {current_coordinator_epoch}")]
    CoordinatorFenced {
        producer_id: i64,
        coordinator_epoch: i32,
        current_coordinator_epoch: i32,
    },
}

impl ProducerError {
    /// Kafka's error code.
    pub fn code(&self) -> i16 {
        match self {
            ProducerError::OutOfOrderSequence { .. } | ProducerError::NewEpochNotAtZero { .. } => {
                45
            }
            ProducerError::InvalidProducerEpoch { .. } => 47,
            ProducerError::InvalidTxnState { .. } => 48,
            ProducerError::CoordinatorFenced { .. } => 52,
        }
    }
}

/// A snapshot that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot of {0} bytes is shorter than its header")]
    Truncated(usize),
    #[error("unsupported snapshot version {0}")]
    Version(i16),
    #[error("snapshot crc mismatch")]
    Crc,
    #[error("snapshot declares {count} entries but holds {bytes} bytes of entries")]
    Length { count: i32, bytes: usize },
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences wrap from i32::MAX to 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Kafka's `DefaultRecordBatch.decrementSequence`.
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        i32::MAX - (decrement - sequence) + 1
    } else {
        sequence - decrement
    }
}

/// Kafka's `inSequence`: the next batch starts right after the last one, wrapping at i32::MAX.
fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// The last sequence of a batch (`RecordBatch.lastSequence`).
pub fn last_sequence(header: &BatchHeader) -> i32 {
    if header.base_sequence == NO_SEQUENCE {
        NO_SEQUENCE
    } else {
        increment_sequence(header.base_sequence, header.last_offset_delta)
    }
}

/// What an idempotent batch found in the producer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplicate {
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

/// A transaction a marker ended (Kafka's `CompletedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
}

/// Producer state of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset -> producer id (Kafka's `ongoingTxns`).
    ongoing: BTreeMap<i64, i64>,
}

impl ProducerStateManager {
    pub fn new() -> ProducerStateManager {
        ProducerStateManager::default()
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer, in no particular order (DescribeProducers).
    pub fn iter(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> + '_ {
        self.producers.iter().map(|(&id, e)| (id, e))
    }

    /// Checks a client batch before it is appended, as Kafka's `analyzeAndValidateProducerState`
    /// (duplicate first) then `ProducerAppendInfo.append` (epoch, then sequence) do. `Ok(Some)`:
    /// a retry of a retained batch, to be answered with its offsets and not appended.
    /// Batches without a producer id are not checked.
    pub fn check(&self, header: &BatchHeader) -> Result<Option<Duplicate>, ProducerError> {
        if header.producer_id == NO_PRODUCER_ID {
            return Ok(None);
        }
        let producer_id = header.producer_id;
        let epoch = header.producer_epoch;
        let first_seq = header.base_sequence;
        let Some(entry) = self.producers.get(&producer_id) else {
            // No state: any epoch and sequence are accepted (Kafka since KIP-360).
            return Ok(None);
        };
        if let Some(dup) = entry.duplicate_of(epoch, first_seq, last_sequence(header)) {
            return Ok(Some(Duplicate {
                first_offset: dup.first_offset(),
                last_offset: dup.last_offset,
                timestamp: dup.timestamp,
            }));
        }
        if epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current_epoch: entry.epoch,
            });
        }
        if epoch != entry.epoch {
            if first_seq != 0 && entry.epoch != NO_PRODUCER_EPOCH {
                return Err(ProducerError::NewEpochNotAtZero {
                    producer_id,
                    epoch,
                    first_seq,
                    current_epoch: entry.epoch,
                });
            }
        } else if entry.epoch != NO_PRODUCER_EPOCH && !in_sequence(entry.last_seq(), first_seq) {
            // An entry with the same epoch and no batches (a transaction marker changed its
            // epoch) has last sequence -1, so its next batch must start at 0: what Kafka's
            // `currentLastSeq` gives too.
            return Err(ProducerError::OutOfOrderSequence {
                producer_id,
                first_seq,
                last_seq: entry.last_seq(),
            });
        }
        if let Some(txn_first_offset) = entry.current_txn_first_offset {
            if !header.is_transactional() {
                return Err(ProducerError::InvalidTxnState {
                    producer_id,
                    txn_first_offset,
                });
            }
        }
        Ok(None)
    }

    /// Checks a transaction marker the coordinator asks for (Kafka's `appendEndTxnMarker`
    /// with origin COORDINATOR): an older producer epoch is INVALID_PRODUCER_EPOCH, an older
    /// coordinator epoch TRANSACTION_COORDINATOR_FENCED. An unknown producer, or one with
    /// no open transaction, passes (the marker is written: a retried WriteTxnMarkers).
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), ProducerError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                epoch: producer_epoch,
                current_epoch: entry.epoch,
            });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerError::CoordinatorFenced {
                producer_id,
                coordinator_epoch,
                current_coordinator_epoch: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a transaction marker written at `offset` (after `check_marker`, or unchecked
    /// when replicating or rebuilding from the log): the producer takes the marker's epoch
    /// and coordinator epoch, and its open transaction, if any, closes and is returned.
    pub fn complete_txn(
        &mut self,
        header: &BatchHeader,
        offset: i64,
        end: EndTxnMarker,
    ) -> Option<CompletedTxn> {
        if header.producer_id == NO_PRODUCER_ID {
            return None;
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(ProducerEntry::empty);
        entry.set_epoch(header.producer_epoch);
        entry.coordinator_epoch = end.coordinator_epoch;
        entry.last_timestamp = header.max_timestamp;
        let first_offset = entry.current_txn_first_offset.take()?;
        self.ongoing.remove(&first_offset);
        Some(CompletedTxn {
            producer_id: header.producer_id,
            first_offset,
            last_offset: offset,
            aborted: end.marker == TxnMarker::Abort,
        })
    }

    /// The first offset of the earliest open transaction (Kafka's first unstable offset,
    /// before the log start clamp the log applies).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Open transactions as (producer id, first offset), by first offset.
    pub fn ongoing_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(&first, &pid)| (pid, first))
    }

    /// Records a batch appended at `first_offset` (after `check`, or unchecked when rebuilding
    /// from the log). No allocation for a producer seen before.
    pub fn update(&mut self, header: &BatchHeader, first_offset: i64) {
        if header.producer_id == NO_PRODUCER_ID {
            return;
        }
        let batch = BatchMetadata {
            last_seq: last_sequence(header),
            last_offset: first_offset + i64::from(header.last_offset_delta),
            offset_delta: header.last_offset_delta,
            timestamp: header.max_timestamp,
        };
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(ProducerEntry::empty);
        entry.add_batch(header.producer_epoch, batch);
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            // Kafka's `appendDataBatch`: the first transactional batch opens a transaction.
            entry.current_txn_first_offset = Some(first_offset);
            self.ongoing.insert(first_offset, header.producer_id);
        }
    }

    /// Kafka's `removeExpiredProducers`: drops producers whose last batch's timestamp is
    /// `expiration_ms` or more before `now_ms`, but never one with an open transaction (Kafka's
    /// `isProducerExpired`). Returns how many were removed.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// The snapshot file's bytes (see the module doc).
    pub fn to_snapshot(&self) -> Vec<u8> {
        let count: usize = self.producers.values().map(|e| e.len.max(1) as usize).sum();
        let mut buf = Vec::with_capacity(SNAPSHOT_HEADER_BYTES + count * SNAPSHOT_ENTRY_BYTES);
        buf.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        buf.extend_from_slice(&[0; 4]);
        buf.extend_from_slice(&(count as i32).to_be_bytes());
        // Sorted by producer id so that equal states give equal files.
        let mut ids: Vec<i64> = self.producers.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let e = &self.producers[&id];
            // A producer with no retained batch (only a marker): lastSequence and
            // lastOffset -1, as Kafka writes it.
            let none = BatchMetadata {
                last_seq: NO_SEQUENCE,
                last_offset: -1,
                offset_delta: 0,
                timestamp: e.last_timestamp,
            };
            let only_marker = (e.len == 0).then_some(&none);
            for b in e.batches().chain(only_marker) {
                buf.extend_from_slice(&id.to_be_bytes());
                buf.extend_from_slice(&e.epoch.to_be_bytes());
                buf.extend_from_slice(&b.last_seq.to_be_bytes());
                buf.extend_from_slice(&b.last_offset.to_be_bytes());
                buf.extend_from_slice(&b.offset_delta.to_be_bytes());
                buf.extend_from_slice(&b.timestamp.to_be_bytes());
                buf.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
                buf.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&buf[6..]);
        buf[2..6].copy_from_slice(&crc.to_be_bytes());
        buf
    }

    /// Reads a snapshot written by `to_snapshot` (or by Kafka). Any damage is an error: the
    /// caller then falls back to an older snapshot or to the log itself.
    pub fn from_snapshot(bytes: &[u8]) -> Result<ProducerStateManager, SnapshotError> {
        if bytes.len() < SNAPSHOT_HEADER_BYTES {
            return Err(SnapshotError::Truncated(bytes.len()));
        }
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(version));
        }
        let crc = u32::from_be_bytes(bytes[2..6].try_into().expect("4 bytes"));
        if crc32c::crc32c(&bytes[6..]) != crc {
            return Err(SnapshotError::Crc);
        }
        let count = i32::from_be_bytes(bytes[6..10].try_into().expect("4 bytes"));
        let body = &bytes[SNAPSHOT_HEADER_BYTES..];
        if count < 0 || body.len() != count as usize * SNAPSHOT_ENTRY_BYTES {
            return Err(SnapshotError::Length {
                count,
                bytes: body.len(),
            });
        }
        let mut state = ProducerStateManager::new();
        for e in body.chunks_exact(SNAPSHOT_ENTRY_BYTES) {
            let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8"));
            let i32_at = |at: usize| i32::from_be_bytes(e[at..at + 4].try_into().expect("4"));
            let producer_id = i64_at(0);
            let epoch = i16::from_be_bytes([e[8], e[9]]);
            let batch = BatchMetadata {
                last_seq: i32_at(10),
                last_offset: i64_at(14),
                offset_delta: i32_at(22),
                timestamp: i64_at(26),
            };
            let entry = state
                .producers
                .entry(producer_id)
                .or_insert_with(ProducerEntry::empty);
            if batch.last_offset >= 0 {
                entry.add_batch(epoch, batch);
            } else {
                // Kafka's reader: an entry without a batch keeps the producer's epoch only.
                entry.set_epoch(epoch);
                entry.last_timestamp = batch.timestamp;
            }
            entry.coordinator_epoch = i32_at(34);
            let txn_first = i64_at(38);
            if let Some(old) = entry.current_txn_first_offset.take() {
                state.ongoing.remove(&old);
            }
            if txn_first >= 0 {
                entry.current_txn_first_offset = Some(txn_first);
                state.ongoing.insert(txn_first, producer_id);
            }
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, records: i32, ts: i64) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: ts,
            max_timestamp: ts,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: records,
        }
    }

    /// Checks, then (when accepted and new) appends at `*log_end`. Returns the base offset.
    fn produce(
        state: &mut ProducerStateManager,
        log_end: &mut i64,
        h: &BatchHeader,
    ) -> Result<i64, ProducerError> {
        match state.check(h)? {
            Some(dup) => Ok(dup.first_offset),
            None => {
                let base = *log_end;
                state.update(h, base);
                *log_end += i64::from(h.last_offset_delta) + 1;
                Ok(base)
            }
        }
    }

    #[test]
    fn duplicates_of_the_last_five_batches_get_their_offsets() {
        let mut s = ProducerStateManager::new();
        let mut end = 0;
        let mut bases = Vec::new();
        for i in 0..7 {
            bases.push(produce(&mut s, &mut end, &header(7, 0, i * 10, 10, 1000)).unwrap());
        }
        assert_eq!(end, 70);
        // The last five are recognised; the log does not grow.
        for i in 2..7 {
            assert_eq!(
                produce(&mut s, &mut end, &header(7, 0, i * 10, 10, 1000)).unwrap(),
                bases[i as usize]
            );
        }
        assert_eq!(end, 70);
        // Older ones are out of order (Kafka answers the same).
        let e = produce(&mut s, &mut end, &header(7, 0, 10, 10, 1000)).unwrap_err();
        assert_eq!(e.code(), 45);
        // Same first sequence, different range: not a duplicate, out of order.
        assert_eq!(
            produce(&mut s, &mut end, &header(7, 0, 60, 5, 1000))
                .unwrap_err()
                .code(),
            45
        );
        // Batches without a producer id are never checked.
        assert_eq!(
            produce(&mut s, &mut end, &header(-1, -1, -1, 3, 0)).unwrap(),
            70
        );
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn gaps_are_out_of_order() {
        let mut s = ProducerStateManager::new();
        let mut end = 0;
        produce(&mut s, &mut end, &header(1, 0, 0, 5, 1)).unwrap();
        let e = produce(&mut s, &mut end, &header(1, 0, 6, 5, 1)).unwrap_err();
        assert_eq!(
            e,
            ProducerError::OutOfOrderSequence {
                producer_id: 1,
                first_seq: 6,
                last_seq: 4
            }
        );
        assert_eq!(
            produce(&mut s, &mut end, &header(1, 0, 5, 5, 1)).unwrap(),
            5
        );
        // Unknown producers are accepted at any sequence (no UNKNOWN_PRODUCER_ID since KIP-360).
        assert_eq!(
            produce(&mut s, &mut end, &header(2, 3, 1234, 1, 1)).unwrap(),
            10
        );
    }

    #[test]
    fn epochs() {
        let mut s = ProducerStateManager::new();
        let mut end = 0;
        produce(&mut s, &mut end, &header(1, 5, 0, 2, 1)).unwrap();
        produce(&mut s, &mut end, &header(1, 5, 2, 2, 1)).unwrap();
        // An older epoch is fenced.
        assert_eq!(
            produce(&mut s, &mut end, &header(1, 4, 4, 1, 1))
                .unwrap_err()
                .code(),
            47
        );
        // Even a retry of an old batch under an older epoch.
        assert_eq!(
            produce(&mut s, &mut end, &header(1, 4, 0, 2, 1))
                .unwrap_err()
                .code(),
            47
        );
        // A new epoch must start at 0 (KIP-360 bump).
        assert!(matches!(
            produce(&mut s, &mut end, &header(1, 6, 4, 1, 1)).unwrap_err(),
            ProducerError::NewEpochNotAtZero { .. }
        ));
        assert_eq!(
            produce(&mut s, &mut end, &header(1, 6, 0, 3, 1)).unwrap(),
            4
        );
        // The old epoch's batches are forgotten: its retry is now fenced, not a duplicate.
        assert_eq!(
            produce(&mut s, &mut end, &header(1, 5, 2, 2, 1))
                .unwrap_err()
                .code(),
            47
        );
        assert_eq!(s.get(1).unwrap().epoch, 6);
        assert_eq!(s.get(1).unwrap().batches().count(), 1);
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        let mut s = ProducerStateManager::new();
        let mut end = 0;
        // A batch of 4 from MAX-1 ends at 1 (wrapped); the next starts at 2.
        produce(&mut s, &mut end, &header(9, 0, i32::MAX - 1, 4, 1)).unwrap();
        assert_eq!(s.get(9).unwrap().last_seq(), 2 - 1);
        // Its retry is recognised across the wrap.
        assert_eq!(
            produce(&mut s, &mut end, &header(9, 0, i32::MAX - 1, 4, 1)).unwrap(),
            0
        );
        assert_eq!(
            produce(&mut s, &mut end, &header(9, 0, 2, 1, 1)).unwrap(),
            4
        );
        // A batch ending exactly at MAX is followed by 0.
        let mut s = ProducerStateManager::new();
        produce(&mut s, &mut end, &header(3, 0, i32::MAX - 1, 2, 1)).unwrap();
        assert_eq!(s.get(3).unwrap().last_seq(), i32::MAX);
        assert!(produce(&mut s, &mut end, &header(3, 0, 0, 1, 1)).is_ok());
    }

    #[test]
    fn idle_producers_expire() {
        let mut s = ProducerStateManager::new();
        let mut end = 0;
        produce(&mut s, &mut end, &header(1, 0, 0, 1, 1_000)).unwrap();
        produce(&mut s, &mut end, &header(2, 0, 0, 1, 5_000)).unwrap();
        assert_eq!(s.remove_expired(10_999, 10_000), 0);
        assert_eq!(s.remove_expired(11_000, 10_000), 1);
        assert!(s.get(1).is_none() && s.get(2).is_some());
        // An expired producer may continue at any sequence (Kafka: no state, accepted).
        assert!(produce(&mut s, &mut end, &header(1, 0, 77, 1, 12_000)).is_ok());
    }

    #[test]
    fn snapshot_round_trip() {
        let mut s = ProducerStateManager::new();
        let mut end = 0;
        for pid in 0..20i64 {
            for i in 0..(pid as i32 % 8) {
                produce(
                    &mut s,
                    &mut end,
                    &header(pid, (pid % 3) as i16, i * 2, 2, 100 + pid),
                )
                .unwrap();
            }
        }
        let bytes = s.to_snapshot();
        let back = ProducerStateManager::from_snapshot(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.to_snapshot(), bytes);
        // Duplicates are still found after the round trip.
        let mut end2 = end;
        assert_eq!(
            produce(&mut back.clone(), &mut end2, &header(7, 1, 12, 2, 107)).unwrap(),
            s.get(7).unwrap().last().unwrap().first_offset()
        );
        assert_eq!(end2, end);
        let empty = ProducerStateManager::new().to_snapshot();
        assert!(ProducerStateManager::from_snapshot(&empty)
            .unwrap()
            .is_empty());
    }

    fn txn_header(pid: i64, epoch: i16, seq: i32, records: i32) -> BatchHeader {
        BatchHeader {
            attributes: 0x10,
            ..header(pid, epoch, seq, records, 50)
        }
    }

    fn end(marker: TxnMarker, coordinator_epoch: i32) -> EndTxnMarker {
        EndTxnMarker {
            marker,
            coordinator_epoch,
        }
    }

    #[test]
    fn transactions_open_close_and_survive_snapshots() {
        let mut s = ProducerStateManager::new();
        let mut end_offset = 0;
        produce(&mut s, &mut end_offset, &txn_header(1, 0, 0, 3)).unwrap();
        produce(&mut s, &mut end_offset, &txn_header(2, 0, 0, 2)).unwrap();
        produce(&mut s, &mut end_offset, &txn_header(1, 0, 3, 1)).unwrap();
        assert_eq!(s.first_unstable_offset(), Some(0));
        assert_eq!(
            s.ongoing_transactions().collect::<Vec<_>>(),
            [(1, 0), (2, 3)]
        );
        // Non-transactional while open: INVALID_TXN_STATE.
        let e = s.check(&header(1, 0, 4, 1, 50)).unwrap_err();
        assert_eq!(e.code(), 48);
        // A marker-only producer (3) and producer 1's commit under epoch 1 (clears batches).
        let control = |pid: i64, epoch: i16| BatchHeader {
            attributes: 0x30,
            ..header(pid, epoch, -1, 1, 60)
        };
        assert_eq!(
            s.complete_txn(&control(3, 4), 6, end(TxnMarker::Abort, 2)),
            None
        );
        let done = s.complete_txn(&control(1, 1), 7, end(TxnMarker::Commit, 2));
        assert_eq!(
            done,
            Some(CompletedTxn {
                producer_id: 1,
                first_offset: 0,
                last_offset: 7,
                aborted: false
            })
        );
        assert_eq!(s.first_unstable_offset(), Some(3));
        assert_eq!(s.check_marker(1, 0, 2).unwrap_err().code(), 47);
        assert_eq!(s.check_marker(1, 1, 1).unwrap_err().code(), 52);
        assert!(s.check_marker(1, 1, 2).is_ok() && s.check_marker(42, 0, 0).is_ok());
        let bytes = s.to_snapshot();
        let back = ProducerStateManager::from_snapshot(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.to_snapshot(), bytes);
        let p3 = back.get(3).unwrap();
        assert_eq!((p3.epoch, p3.coordinator_epoch, p3.last_seq()), (4, 2, -1));
        assert_eq!(back.get(2).unwrap().current_txn_first_offset, Some(3));
        // Open transactions never expire.
        let mut back = back;
        assert_eq!(back.remove_expired(i64::MAX, 1), 2);
        assert_eq!(back.ongoing_transactions().collect::<Vec<_>>(), [(2, 3)]);
    }

    #[test]
    fn corrupt_snapshots_are_refused() {
        let mut s = ProducerStateManager::new();
        let mut end = 0;
        produce(&mut s, &mut end, &header(1, 0, 0, 3, 1)).unwrap();
        let good = s.to_snapshot();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(
                ProducerStateManager::from_snapshot(&bad).is_err(),
                "flip at {i}"
            );
        }
        for n in 0..good.len() {
            assert!(
                ProducerStateManager::from_snapshot(&good[..n]).is_err(),
                "cut at {n}"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(ProducerStateManager::from_snapshot(&longer).is_err());
    }
}
