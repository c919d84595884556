//! `read_committed` for `broker consume`: which fetched batches belong to aborted
//! transactions, decided as Kafka's consumer does from the Fetch response's
//! `aborted_transactions` (producer id and first offset of each aborted transaction that
//! overlaps the fetched range) and the ABORT markers (control batches) that end them.

use std::collections::HashSet;

use wire::generated::fetch_response::AbortedTransaction;
use wire::record_batch::{self, BatchHeader};

/// The control record type of an ABORT marker (COMMIT is 1).
const CONTROL_ABORT: i16 = 0;

/// The filter over one partition's batches of one Fetch response, fed every batch in order.
#[derive(Debug, Default)]
pub struct TxnFilter {
    /// Aborted transactions not reached yet, the lowest first offset last (popped first).
    pending: Vec<(i64, i64)>,
    /// Producers whose transaction is aborted and whose ABORT marker is not yet seen.
    aborted: HashSet<i64>,
}

impl TxnFilter {
    /// `read_uncommitted`: skips nothing but control batches.
    pub fn none() -> TxnFilter {
        TxnFilter::default()
    }

    /// `read_committed` over a response that named `aborted` transactions.
    pub fn read_committed(aborted: &[AbortedTransaction]) -> TxnFilter {
        let mut pending: Vec<(i64, i64)> = aborted
            .iter()
            .map(|a| (a.first_offset, a.producer_id))
            .collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        TxnFilter {
            pending,
            aborted: HashSet::new(),
        }
    }

    /// Whether the batch (`header` of `batch`) is left out: a control batch, or a
    /// transactional batch of a producer whose transaction there was aborted.
    pub fn skips(&mut self, header: &BatchHeader, batch: &[u8]) -> bool {
        if header.has_producer_id() {
            while let Some(&(first, producer)) = self.pending.last() {
                if first > header.last_offset() {
                    break;
                }
                self.aborted.insert(producer);
                self.pending.pop();
            }
        }
        if header.is_control() {
            if is_abort_marker(batch) {
                self.aborted.remove(&header.producer_id);
            }
            return true;
        }
        header.is_transactional() && self.aborted.contains(&header.producer_id)
    }
}

/// Whether a control batch holds an ABORT marker: its record's key is `version: i16,
/// type: i16`.
fn is_abort_marker(batch: &[u8]) -> bool {
    let Ok(records) = record_batch::records(batch) else {
        return false;
    };
    let first = records.iter().next();
    matches!(first, Some(Ok(r)) if r.key.is_some_and(|k| k.len() >= 4
        && i16::from_be_bytes([k[2], k[3]]) == CONTROL_ABORT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::record_batch::{BatchBuilder, Compression};

    fn txn_batch(base: i64, producer: i64, values: &[&[u8]]) -> bytes::Bytes {
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(base)
            .producer(producer, 0, 0)
            .transactional(true);
        for v in values {
            b = b.push(None, Some(v), &[], 1_000);
        }
        b.build()
    }

    fn marker(base: i64, producer: i64, kind: i16) -> bytes::Bytes {
        let mut key = 0i16.to_be_bytes().to_vec();
        key.extend_from_slice(&kind.to_be_bytes());
        BatchBuilder::new(Compression::None)
            .base_offset(base)
            .producer(producer, 0, 0)
            .transactional(true)
            .control(true)
            .push(Some(&key), Some(&[0, 0, 0, 0, 0, 0]), &[], 1_000)
            .build()
    }

    /// Which batches (by base offset) the filter keeps.
    fn kept(filter: &mut TxnFilter, batches: &[bytes::Bytes]) -> Vec<i64> {
        batches
            .iter()
            .filter_map(|b| {
                let h = BatchHeader::parse(b).unwrap();
                (!filter.skips(&h, b)).then_some(h.base_offset)
            })
            .collect()
    }

    #[test]
    fn aborted_transactions_are_dropped_and_committed_ones_kept() {
        // Producer 7 aborts [0, 2) (marker at 2); producer 8 commits [3, 5) (marker at 5);
        // producer 7 then writes [6, 7) in a new transaction that is not aborted.
        let batches = [
            txn_batch(0, 7, &[b"a0", b"a1"]),
            marker(2, 7, CONTROL_ABORT),
            txn_batch(3, 8, &[b"c3", b"c4"]),
            marker(5, 8, 1),
            txn_batch(6, 7, &[b"n6"]),
        ];
        let aborted = [AbortedTransaction {
            producer_id: 7,
            first_offset: 0,
            ..Default::default()
        }];
        assert_eq!(
            kept(&mut TxnFilter::read_committed(&aborted), &batches),
            vec![3, 6]
        );
        // read_uncommitted keeps every data batch, and no control batch.
        assert_eq!(kept(&mut TxnFilter::none(), &batches), vec![0, 3, 6]);
    }

    #[test]
    fn markers_are_told_apart() {
        assert!(is_abort_marker(&marker(0, 1, CONTROL_ABORT)));
        assert!(!is_abort_marker(&marker(0, 1, 1)));
    }
}
