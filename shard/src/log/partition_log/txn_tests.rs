//! Transaction tests: markers, the first unstable offset, aborted transactions and their
//! `.txnindex`, through restarts, crashes, truncation, follower appends, retention and
//! producer expiry. On the simulated disk.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use wire::record_batch::{validate_batch, BatchBuilder, BatchHeader, Compression};

use super::tests::small_config;
use super::*;
use crate::config::LogConfig;
use crate::log::test_util::{run, sim_env, SIM_NOW as NOW};
use crate::log::txn_index::{txn_index_path, TXN_ENTRY_BYTES};
use crate::log::{AbortedTxn, LogError, TxnMarker};
use crate::storage::Env;

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 100,
        ..small_config()
    }
}

async fn open(env: &Env, dir: &Path, cfg: &LogConfig) -> PartitionLog {
    PartitionLog::open_in(env.clone(), dir.to_path_buf(), cfg.clone())
        .await
        .unwrap()
}

/// A batch of `records` records from producer `pid` (transactional or not), sequence `seq`.
fn data(pid: i64, seq: i32, records: usize, transactional: bool) -> (Bytes, BatchHeader) {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(pid, 0, seq)
        .transactional(transactional);
    for i in 0..records {
        b = b.push(Some(format!("k{i}").as_bytes()), Some(&[7u8; 20]), &[], NOW);
    }
    let bytes = b.build();
    let h = validate_batch(&bytes).unwrap();
    (bytes, h)
}

/// Appends a transactional batch; returns its base offset.
fn txn_append(log: &mut PartitionLog, pid: i64, seq: i32, records: usize) -> i64 {
    let (b, h) = data(pid, seq, records, true);
    log.append(&b, &h, 0).unwrap().base_offset
}

/// A non-idempotent filler batch of about `bytes` bytes.
fn filler(log: &mut PartitionLog, bytes: usize) {
    let b = BatchBuilder::new(Compression::None)
        .push(Some(b"f"), Some(&vec![1u8; bytes]), &[], NOW)
        .build();
    let h = validate_batch(&b).unwrap();
    log.append(&b, &h, 0).unwrap();
}

fn marker(log: &mut PartitionLog, pid: i64, m: TxnMarker) -> i64 {
    log.append_txn_marker(pid, 0, 0, m, 0).unwrap().base_offset
}

/// Everything a reader of transactions sees.
fn txn_view(log: &PartitionLog) -> (Option<i64>, Vec<(i64, i64)>, Vec<AbortedTxn>) {
    (
        log.first_unstable_offset(),
        log.ongoing_transactions(),
        log.aborted_transactions(0, log.log_end_offset()),
    )
}

fn aborted(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

fn producer_code(e: LogError) -> i16 {
    match e {
        LogError::Producer(p) => p.code(),
        other => panic!("not a producer error: {other}"),
    }
}

#[test]
fn committed_and_aborted_transactions() {
    run(async {
        let (_disk, env) = sim_env(1);
        let dir = PathBuf::from("/sim/t-0");
        let mut log = open(&env, &dir, &config()).await;
        for t in 0..3 {
            let base = txn_append(&mut log, 1, t * 1000, 1000);
            assert_eq!(base, i64::from(t) * 1001);
            assert_eq!(log.first_unstable_offset(), Some(base));
            assert_eq!(log.ongoing_transactions(), vec![(1, base)]);
            marker(&mut log, 1, TxnMarker::Commit);
        }
        assert_eq!(log.log_end_offset(), 3003);
        assert_eq!(txn_view(&log), (None, vec![], vec![]));
        // An open transaction of 10 records, in two batches.
        assert_eq!(txn_append(&mut log, 1, 3000, 4), 3003);
        txn_append(&mut log, 1, 3004, 6);
        assert_eq!(log.first_unstable_offset(), Some(3003));
        assert!(log.aborted_transactions(0, 3013).is_empty());
        let m = marker(&mut log, 1, TxnMarker::Abort);
        assert_eq!(m, 3013);
        assert_eq!(
            txn_view(&log),
            (None, vec![], vec![aborted(1, 3003, 3013, 3014)])
        );
        // The producer's entry shows no open transaction and the marker's coordinator epoch.
        let e = log.producers().get(1).unwrap();
        assert_eq!((e.current_txn_first_offset, e.coordinator_epoch), (None, 0));
        // Only the abort is indexed, in Kafka's 34-byte format.
        let path = txn_index_path(&dir, 0);
        assert_eq!(env.disk.file_len(&path).unwrap(), TXN_ENTRY_BYTES as u64);
        let bytes = env.disk.read_file(&path).unwrap();
        assert_eq!(&bytes[..2], &0i16.to_be_bytes());
        assert_eq!(&bytes[2..10], &1i64.to_be_bytes());
        assert_eq!(&bytes[10..18], &3003i64.to_be_bytes());
        assert_eq!(&bytes[18..26], &3013i64.to_be_bytes());
        assert_eq!(&bytes[26..34], &3014i64.to_be_bytes());
        // The marker as stored: a control batch of one record, producer fields as given.
        let stored = log.read(m, 1 << 20, i64::MAX).await.unwrap();
        let h = validate_batch(&stored).unwrap();
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id, h.base_sequence, h.records_count),
            (1, -1, 1)
        );
        assert_eq!((h.base_timestamp, h.max_timestamp), (NOW, NOW));
        let records = wire::record_batch::records(&stored).unwrap();
        let r = records.iter().next().unwrap().unwrap();
        assert_eq!(r.key, Some(&[0u8, 0, 0, 0][..]));
        assert_eq!(r.value, Some(&[0u8, 0, 0, 0, 0, 0][..]));
        // A new transaction after the abort continues the sequence.
        assert_eq!(txn_append(&mut log, 1, 3010, 1), 3014);
        assert_eq!(log.first_unstable_offset(), Some(3014));
    });
}

#[test]
fn aborted_transaction_spanning_segments() {
    run(async {
        let (_disk, env) = sim_env(2);
        let dir = PathBuf::from("/sim/t-0");
        let cfg = LogConfig {
            segment_bytes: 600,
            ..config()
        };
        let mut log = open(&env, &dir, &cfg).await;
        filler(&mut log, 300);
        let first = txn_append(&mut log, 5, 0, 3);
        let mut seq = 3;
        for _ in 0..6 {
            filler(&mut log, 300);
            txn_append(&mut log, 5, seq, 3);
            seq += 3;
        }
        let m = marker(&mut log, 5, TxnMarker::Abort);
        filler(&mut log, 300);
        filler(&mut log, 300);
        assert!(log.segment_count() >= 5, "{} segments", log.segment_count());
        let end = log.log_end_offset();
        let want = vec![aborted(5, first, m, m + 1)];
        // From the first segment, from a middle one, from the marker itself.
        for start in [0, first, first + 5, m - 1, m] {
            assert_eq!(log.aborted_transactions(start, end), want, "start {start}");
        }
        // The bound only has to pass the first offset.
        assert_eq!(log.aborted_transactions(0, first + 1), want);
        assert!(log.aborted_transactions(0, first).is_empty());
        // Past the marker: nothing.
        assert!(log.aborted_transactions(m + 1, end).is_empty());
        // The entry is in the marker's segment's index only.
        let with_index: Vec<i64> = log
            .segments()
            .iter()
            .filter(|s| env.disk.exists(&txn_index_path(&dir, s.base_offset)))
            .map(|s| s.base_offset)
            .collect();
        assert_eq!(with_index.len(), 1);
        assert!(with_index[0] <= m && m < with_index[0] + 100);
    });
}

#[test]
fn interleaved_producers() {
    run(async {
        let (_disk, env) = sim_env(3);
        let mut log = open(&env, Path::new("/sim/t-0"), &config()).await;
        let a = txn_append(&mut log, 1, 0, 2);
        let b = txn_append(&mut log, 2, 0, 2);
        filler(&mut log, 10);
        txn_append(&mut log, 1, 2, 2);
        assert_eq!(log.first_unstable_offset(), Some(a));
        assert_eq!(log.ongoing_transactions(), vec![(1, a), (2, b)]);
        // Aborting producer 1 while 2's transaction is open: its entry's last stable offset
        // is 2's first offset.
        let m1 = marker(&mut log, 1, TxnMarker::Abort);
        assert_eq!(log.first_unstable_offset(), Some(b));
        let c = txn_append(&mut log, 3, 0, 1);
        let m2 = marker(&mut log, 2, TxnMarker::Commit);
        assert_eq!(log.first_unstable_offset(), Some(c));
        let m3 = marker(&mut log, 3, TxnMarker::Abort);
        assert_eq!(
            txn_view(&log),
            (
                None,
                vec![],
                vec![aborted(1, a, m1, b), aborted(3, c, m3, m3 + 1)]
            )
        );
        assert!(m2 < m3);
        // A read bounded below producer 3's transaction sees producer 1's only.
        assert_eq!(log.aborted_transactions(0, c), vec![aborted(1, a, m1, b)]);
    });
}

#[test]
fn refusals_have_kafkas_codes() {
    run(async {
        let (_disk, env) = sim_env(4);
        let mut log = open(&env, Path::new("/sim/t-0"), &config()).await;
        txn_append(&mut log, 1, 0, 2);
        let end = log.log_end_offset();
        // A non-transactional batch during the open transaction: INVALID_TXN_STATE.
        let (b, h) = data(1, 2, 1, false);
        assert_eq!(producer_code(log.append(&b, &h, 0).unwrap_err()), 48);
        assert_eq!(log.log_end_offset(), end);
        // A client's control batch: INVALID_RECORD (87) at the handler.
        let control = BatchBuilder::new(Compression::None)
            .producer(1, 0, -1)
            .transactional(true)
            .control(true)
            .push(Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]), &[], NOW)
            .build();
        let ch = validate_batch(&control).unwrap();
        assert!(matches!(
            log.append(&control, &ch, 0),
            Err(LogError::ControlBatchFromClient)
        ));
        assert_eq!(log.log_end_offset(), end);
        // Coordinator epoch 5 ends it; epoch 1 of the producer from then on.
        log.append_txn_marker(1, 1, 5, TxnMarker::Commit, 0)
            .unwrap();
        let e = log.producers().get(1).unwrap();
        assert_eq!((e.epoch, e.coordinator_epoch), (1, 5));
        let end = log.log_end_offset();
        // An older producer epoch: INVALID_PRODUCER_EPOCH; an older coordinator:
        // TRANSACTION_COORDINATOR_FENCED. Nothing written.
        let err = log
            .append_txn_marker(1, 0, 5, TxnMarker::Abort, 0)
            .unwrap_err();
        assert_eq!(producer_code(err), 47);
        let err = log
            .append_txn_marker(1, 1, 4, TxnMarker::Abort, 0)
            .unwrap_err();
        assert_eq!(producer_code(err), 52);
        assert_eq!(log.log_end_offset(), end);
        // Markers without an open transaction (a retry, an unknown producer) are written.
        log.append_txn_marker(1, 1, 5, TxnMarker::Commit, 0)
            .unwrap();
        log.append_txn_marker(99, 0, 0, TxnMarker::Abort, 0)
            .unwrap();
        assert_eq!(log.log_end_offset(), end + 2);
        assert!(log.aborted_transactions(0, end + 2).is_empty());
        // The marker bumped the epoch and cleared the batches: the next starts at 0.
        let b = BatchBuilder::new(Compression::None)
            .producer(1, 1, 0)
            .transactional(true)
            .push(None, Some(b"v"), &[], NOW)
            .build();
        let h = validate_batch(&b).unwrap();
        assert_eq!(log.append(&b, &h, 0).unwrap().base_offset, end + 2);
    });
}

/// A log with an aborted transaction, a committed one and an open one, over several
/// segments. Returns the view it shows.
fn mixed(log: &mut PartitionLog) -> (Option<i64>, Vec<(i64, i64)>, Vec<AbortedTxn>) {
    let mut seqs = [0i32; 4];
    let mut t = |log: &mut PartitionLog, pid: usize, n: usize| {
        txn_append(log, pid as i64, seqs[pid], n);
        seqs[pid] += n as i32;
    };
    t(log, 1, 3);
    filler(log, 250);
    t(log, 2, 2);
    t(log, 1, 3);
    filler(log, 250);
    marker(log, 1, TxnMarker::Abort);
    filler(log, 250);
    t(log, 3, 2);
    marker(log, 2, TxnMarker::Commit);
    filler(log, 250);
    t(log, 2, 2);
    marker(log, 2, TxnMarker::Abort);
    filler(log, 250);
    let view = txn_view(log);
    assert_eq!(view.1.len(), 1);
    assert_eq!(view.2.len(), 2);
    view
}

#[test]
fn restarts_keep_transactions() {
    run(async {
        for seed in 0..6 {
            let (disk, env) = sim_env(10 + seed);
            let dir = PathBuf::from("/sim/t-0");
            let cfg = LogConfig {
                segment_bytes: 500,
                ..config()
            };
            let mut log = open(&env, &dir, &cfg).await;
            let view = mixed(&mut log);
            assert!(log.segment_count() >= 3);
            match seed % 3 {
                // Clean close: the state comes from the snapshot at the log end.
                0 => {
                    log.close().await.unwrap();
                    let log = open(&env, &dir, &cfg).await;
                    assert_eq!(log.recovery_report(), RecoveryReport::default());
                    assert_eq!(txn_view(&log), view, "seed {seed}");
                }
                // kill -9 without a sync: every segment is re-scanned, indexes rebuilt.
                1 => {
                    drop(log);
                    disk.crash();
                    let log = open(&env, &dir, &cfg).await;
                    assert!(log.recovery_report().segments_recovered > 0);
                    assert_eq!(txn_view(&log), view, "seed {seed}");
                }
                // Synced, then power loss: what the syncs made durable is enough.
                _ => {
                    log.sync().await.unwrap();
                    drop(log);
                    disk.power_loss();
                    let mut log = open(&env, &dir, &cfg).await;
                    assert_eq!(txn_view(&log), view, "seed {seed}");
                    // And again after more transactions and a crash with half of it synced.
                    let pid = view.1[0].0;
                    marker(&mut log, pid, TxnMarker::Abort);
                    let view = txn_view(&log);
                    assert_eq!(view.2.len(), 3);
                    log.sync().await.unwrap();
                    filler(&mut log, 300);
                    drop(log);
                    disk.power_loss();
                    let log = open(&env, &dir, &cfg).await;
                    let (fuo, ongoing, aborted) = txn_view(&log);
                    assert_eq!((fuo, ongoing, aborted), view, "seed {seed}");
                }
            }
        }
    });
}

#[test]
fn a_crash_rebuilds_torn_and_missing_index_entries() {
    run(async {
        let (disk, env) = sim_env(20);
        let dir = PathBuf::from("/sim/t-0");
        let cfg = LogConfig {
            segment_bytes: 1 << 20,
            ..config()
        };
        let mut log = open(&env, &dir, &cfg).await;
        let view = mixed(&mut log);
        drop(log);
        disk.crash();
        // Tear the last entry (no snapshot exists: no roll, no close): the re-scan of the
        // segment rebuilds the index from its markers.
        let path = txn_index_path(&dir, 0);
        let bytes = env.disk.read_file(&path).unwrap();
        env.disk
            .write_file(&path, &bytes[..bytes.len() - 10])
            .unwrap();
        let log = open(&env, &dir, &cfg).await;
        assert_eq!(txn_view(&log), view);
        assert_eq!(env.disk.read_file(&path).unwrap(), bytes);
    });
}

#[test]
fn truncation_reopens_transactions() {
    run(async {
        let (_disk, env) = sim_env(30);
        let dir = PathBuf::from("/sim/t-0");
        let cfg = LogConfig {
            segment_bytes: 400,
            ..config()
        };
        let mut log = open(&env, &dir, &cfg).await;
        let a = txn_append(&mut log, 1, 0, 3);
        filler(&mut log, 300);
        let b = txn_append(&mut log, 2, 0, 3);
        filler(&mut log, 300);
        let m1 = marker(&mut log, 1, TxnMarker::Abort);
        filler(&mut log, 300);
        let m2 = marker(&mut log, 2, TxnMarker::Abort);
        filler(&mut log, 300);
        assert_eq!(
            log.aborted_transactions(0, log.log_end_offset()),
            vec![aborted(1, a, m1, b), aborted(2, b, m2, m2 + 1)]
        );
        // Cut before the second marker: producer 2's transaction is open again.
        assert!(log.truncate_to(m2).unwrap());
        assert_eq!(
            txn_view(&log),
            (Some(b), vec![(2, b)], vec![aborted(1, a, m1, b)])
        );
        // Its marker again (a follower re-fetching), then a cut before both.
        marker(&mut log, 2, TxnMarker::Abort);
        assert_eq!(txn_view(&log).2.len(), 2);
        assert!(log.truncate_to(m1).unwrap());
        assert_eq!(txn_view(&log), (Some(a), vec![(1, a), (2, b)], vec![]));
        for s in log.segments() {
            let p = txn_index_path(&dir, s.base_offset);
            if env.disk.exists(&p) {
                assert_eq!(env.disk.file_len(&p).unwrap(), 0);
            }
        }
        // Durable: a clean restart shows the same.
        let view = txn_view(&log);
        log.close().await.unwrap();
        let mut log = open(&env, &dir, &cfg).await;
        assert_eq!(txn_view(&log), view);
        assert!(log.truncate_to(b).unwrap());
        assert_eq!(txn_view(&log), (Some(a), vec![(1, a)], vec![]));
        assert!(log.truncate_to(a).unwrap());
        assert_eq!(txn_view(&log), (None, vec![], vec![]));
    });
}

#[test]
fn followers_get_the_same_transactions() {
    run(async {
        let (_disk, env) = sim_env(40);
        let cfg = LogConfig {
            segment_bytes: 500,
            ..config()
        };
        let mut leader = open(&env, Path::new("/sim/leader-0"), &cfg).await;
        let view = mixed(&mut leader);
        let all = leader.read(0, 1 << 30, i64::MAX).await.unwrap();
        let dir = PathBuf::from("/sim/follower-0");
        let mut follower = open(&env, &dir, &cfg).await;
        follower.append_replica(&all).unwrap();
        assert_eq!(txn_view(&follower), view);
        // And after the follower restarts from a crash.
        follower.sync().await.unwrap();
        drop(follower);
        let follower = open(&env, &dir, &cfg).await;
        assert_eq!(txn_view(&follower), view);
    });
}

#[test]
fn producers_with_open_transactions_do_not_expire() {
    run(async {
        let (_disk, env) = sim_env(50);
        let cfg = LogConfig {
            producer_id_expiration_ms: 1_000,
            ..config()
        };
        let mut log = open(&env, Path::new("/sim/t-0"), &cfg).await;
        let a = txn_append(&mut log, 1, 0, 2);
        let (b, h) = data(2, 0, 1, false);
        log.append(&b, &h, 0).unwrap();
        assert_eq!(log.remove_expired_producers(NOW + 10_000), 1);
        assert!(log.producers().get(1).is_some() && log.producers().get(2).is_none());
        assert_eq!(log.first_unstable_offset(), Some(a));
        marker(&mut log, 1, TxnMarker::Commit);
        assert_eq!(log.remove_expired_producers(NOW + 10_000), 1);
        assert!(log.producers().is_empty());
    });
}

#[test]
fn retention_takes_index_entries_and_clamps_the_first_unstable_offset() {
    run(async {
        let (_disk, env) = sim_env(60);
        let dir = PathBuf::from("/sim/t-0");
        let cfg = LogConfig {
            segment_bytes: 400,
            ..config()
        };
        let mut log = open(&env, &dir, &cfg).await;
        let a = txn_append(&mut log, 1, 0, 2);
        let m = marker(&mut log, 1, TxnMarker::Abort);
        let b = txn_append(&mut log, 2, 0, 2);
        for _ in 0..4 {
            filler(&mut log, 300);
        }
        assert_eq!(
            log.aborted_transactions(0, log.log_end_offset()),
            vec![aborted(1, a, m, m + 1)]
        );
        let first_base = log.segments()[0].base_offset;
        assert!(env.disk.exists(&txn_index_path(&dir, first_base)));
        // DeleteRecords past producer 2's open transaction: the first segment goes with its
        // index; the transaction stays open, its first unstable offset is the log start.
        let start = log.delete_records(log.segments()[2].base_offset).unwrap();
        assert!(start > b);
        assert!(!env.disk.exists(&txn_index_path(&dir, first_base)));
        assert!(log.aborted_transactions(0, log.log_end_offset()).is_empty());
        assert_eq!(log.first_unstable_offset(), Some(start));
        assert_eq!(log.ongoing_transactions(), vec![(2, b)]);
        marker(&mut log, 2, TxnMarker::Commit);
        assert_eq!(log.first_unstable_offset(), None);
    });
}

#[test]
fn compaction_keeps_the_aborted_transactions() {
    run(async {
        let (disk, env) = sim_env(70);
        let dir = PathBuf::from("/sim/t-0");
        let cfg = LogConfig {
            segment_bytes: 700,
            cleanup_compact: true,
            cleanup_delete: false,
            min_cleanable_dirty_ratio: 0.01,
            ..config()
        };
        let mut log = open(&env, &dir, &cfg).await;
        let mut seq = 0;
        for round in 0..4 {
            for _ in 0..3 {
                filler(&mut log, 150);
            }
            txn_append(&mut log, 1, seq, 2);
            seq += 2;
            let m = if round % 2 == 0 {
                TxnMarker::Abort
            } else {
                TxnMarker::Commit
            };
            marker(&mut log, 1, m);
        }
        // A batch as large as a segment rolls, so everything before it is cleanable.
        filler(&mut log, 700);
        log.sync().await.unwrap();
        let view = txn_view(&log);
        assert_eq!(view.2.len(), 2);
        let segments = log.segment_count();
        // Groups of segments are merged while their sizes fit segment.bytes.
        log.set_config(LogConfig {
            segment_bytes: 1 << 20,
            ..cfg.clone()
        });
        let log = Rc::new(std::cell::RefCell::new(log));
        crate::log::cleaner::Cleaner::new(1 << 20)
            .clean_if_due(&log, NOW)
            .await
            .unwrap()
            .expect("a pass ran");
        let mut log = Rc::try_unwrap(log).ok().unwrap().into_inner();
        assert!(log.segment_count() < segments, "segments were merged");
        assert_eq!(txn_view(&log), view);
        // The merged segment's index holds both entries; no index of a removed segment
        // is left behind.
        let with_index: Vec<i64> = log
            .segments()
            .iter()
            .filter(|s| env.disk.exists(&txn_index_path(&dir, s.base_offset)))
            .map(|s| s.base_offset)
            .collect();
        let files = env.disk.read_dir(&dir).unwrap();
        let indexes = files
            .iter()
            .filter(|e| e.name.ends_with(".txnindex"))
            .count();
        assert_eq!(indexes, with_index.len());
        log.sync().await.unwrap();
        drop(log);
        disk.power_loss();
        let log = open(&env, &dir, &cfg).await;
        assert_eq!(txn_view(&log), view);
    });
}
