//! `PartitionLog` tests: restarts, recovery, retention, deletion, producer state.

use std::path::Path;

use bytes::Bytes;
use wire::record_batch::BatchHeader;

use super::recovery::{list_segments, list_snapshots};
use super::tests::*;
use super::*;
use crate::config::LogConfig;
use crate::log::checkpoint;
use crate::log::dir::{self, TopicId};
use crate::log::test_util::{run, tmp};
use crate::log::{segment_paths, snapshot_path, LogError};
use crate::storage::Disk;
use rand::{rngs::StdRng, Rng, SeedableRng};
use wire::record_batch::validate_batch;
#[test]
fn restart_after_clean_close_keeps_everything() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: 3000,
            ..small_config()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        let mut model: Vec<Written> = (0..30)
            .map(|i| append(&mut log, 2, 90, 100 * i as i64))
            .collect();
        let (end, segs, max_ts) = (
            log.log_end_offset(),
            log.segment_count(),
            log.max_timestamp(),
        );
        log.close().await.unwrap();
        assert!(dir.join(".clean_shutdown").exists());

        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        // Kept while the log is as the close left it (see `checkpoint`).
        assert!(dir.join(".clean_shutdown").exists());
        assert_eq!(
            (
                log.log_end_offset(),
                log.segment_count(),
                log.max_timestamp()
            ),
            (end, segs, max_ts)
        );
        assert_eq!(log.durable_offset(), end);
        assert_eq!(
            &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
        for o in [0, 1, 17, 33, end - 1] {
            let w = model.iter().find(|w| w.base <= o && o <= w.last).unwrap();
            assert_eq!(&log.read(o, 1, i64::MAX).await.unwrap()[..], &w.bytes[..]);
        }
        model.push(append(&mut log, 1, 5, 99_999));
        assert_eq!(model.last().unwrap().base, end);
        log.close().await.unwrap();
        let log = PartitionLog::open(dir, cfg).await.unwrap();
        assert_eq!(
            &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
        assert_eq!(log.max_timestamp(), Some((end, 99_999)));
    });
}

/// Crash (no close), then the active segments are cut at a random byte and/or get random
/// garbage appended; recovery keeps exactly the batches wholly before the cut.
#[test]
fn recovery_after_random_cut() {
    for seed in 0..120u64 {
        run(async move { recovery_case(seed).await });
    }
}

async fn recovery_case(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let d = tmp();
    let dir = d.path().join("t-0");
    let cfg = LogConfig {
        segment_bytes: rng.gen_range(1_500..6_000),
        index_interval_bytes: rng.gen_range(1..500),
        segment_index_bytes: 1024,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
    let mut model = Vec::new();
    let n = rng.gen_range(1..60);
    let sync_at = rng.gen_range(0..=n);
    // Segment base and position of each batch, to know where a cut falls.
    let mut placed: Vec<(i64, u64)> = Vec::new();
    for i in 0..n {
        if i == sync_at {
            log.sync().await.unwrap();
        }
        let w = append(
            &mut log,
            rng.gen_range(1..5),
            rng.gen_range(0..300),
            rng.gen_range(0..1_000),
        );
        let a = log.active();
        placed.push((a.base_offset, a.size - w.bytes.len() as u64));
        model.push(w);
    }
    let cp_segment = log.last_checkpoint.map_or(0, |c| c.segment_base);
    drop(log); // kill -9: no close, no marker

    // Cut a segment at or after the recovery point's (earlier ones are trusted by design).
    let files = log_files(&dir);
    let cuttable: Vec<&String> = files
        .iter()
        .filter(|f| f[..20].parse::<i64>().unwrap() >= cp_segment)
        .collect();
    let victim = cuttable[rng.gen_range(0..cuttable.len())].clone();
    let victim_base: i64 = victim[..20].parse().unwrap();
    let path = dir.join(&victim);
    let len = std::fs::metadata(&path).unwrap().len();
    let cut = if rng.gen_bool(0.2) {
        len
    } else {
        rng.gen_range(0..=len)
    };
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(cut).unwrap();
    let garbage = rng.gen_bool(0.5);
    if garbage {
        let garbage: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.gen()).collect();
        std::os::unix::fs::FileExt::write_all_at(&f, &garbage, cut).unwrap();
    }
    drop(f);

    let keep: Vec<Written> = model
        .iter()
        .zip(&placed)
        .filter(|(w, (seg, pos))| {
            let untouched = cut == len && !garbage; // then later segments survive too
            untouched
                || *seg < victim_base
                || (*seg == victim_base && pos + w.bytes.len() as u64 <= cut)
        })
        .map(|(w, _)| w.clone())
        .collect();
    let want_end = keep.last().map_or(0, |w| w.last + 1);

    let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
    assert_eq!(
        log.log_end_offset(),
        want_end,
        "seed {seed}: cut {victim} at {cut}/{len}"
    );
    assert_eq!(log.durable_offset(), want_end);
    let all = log.read(0, 1 << 24, i64::MAX).await.unwrap();
    assert!(all[..] == concat(&keep)[..], "seed {seed}: content");
    assert!(log_files(&dir)
        .iter()
        .all(|f| f[..20].parse::<i64>().unwrap() <= victim_base.max(want_end)));
    // Appends continue at the right offset, and survive another crash + recovery.
    let w = append(&mut log, 2, 10, 5);
    assert_eq!(w.base, want_end);
    log.sync().await.unwrap();
    drop(log);
    let log = PartitionLog::open(dir, cfg).await.unwrap();
    assert_eq!(log.log_end_offset(), want_end + 2);
    let got = log.read(want_end, 1, i64::MAX).await.unwrap();
    assert_eq!(&got[..], &w.bytes[..]);
}

#[test]
fn flipped_byte_in_last_batch_truncates_there() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let mut log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        let model: Vec<Written> = (0..10).map(|_| append(&mut log, 3, 50, 1)).collect();
        log.sync().await.unwrap(); // even synced bytes are re-validated in the recovery point's segment
        let last_pos: u64 = model[..9].iter().map(|w| w.bytes.len() as u64).sum();
        drop(log);
        let path = dir.join("00000000000000000000.log");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[last_pos as usize + 70] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        assert_eq!(log.log_end_offset(), model[9].base);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), last_pos);
        assert_eq!(
            &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model[..9])[..]
        );
    });
}

#[test]
fn offset_for_timestamp_and_max_timestamp() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: 600,
            index_interval_bytes: 1,
            ..small_config()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        assert_eq!(log.max_timestamp(), None);
        assert_eq!(log.offset_for_timestamp(0).await.unwrap(), None);
        let ts = [100, 200, 200, 300, 150, 400, 50, 400, 500];
        let model: Vec<Written> = ts.iter().map(|&t| append(&mut log, 2, 100, t)).collect();
        assert!(log.segment_count() > 2);
        let check = |log: &PartitionLog| {
            let cases = [
                (0, Some(0)),
                (100, Some(0)),
                (101, Some(1)),
                (200, Some(1)),
                (250, Some(3)),
                (301, Some(5)),
                (450, Some(8)),
                (501, None),
            ];
            let futs: Vec<_> = cases
                .iter()
                .map(|&(t, _)| log.offset_for_timestamp(t))
                .collect();
            (cases, futs)
        };
        for round in 0..2 {
            let (cases, futs) = check(&log);
            for ((t, want), f) in cases.into_iter().zip(futs) {
                let got = f.await.unwrap();
                let want = want.map(|i: usize| (model[i].base, ts[i]));
                assert_eq!(got, want, "round {round} ts {t}");
            }
            // Largest timestamp 500 is the last batch; ties (400) resolve to the first.
            assert_eq!(log.max_timestamp(), Some((model[8].last, 500)));
            if round == 0 {
                log.close().await.unwrap();
                log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            }
        }
    });
}

/// A stored log start past the log end (a DeleteRecords answered for records a power loss
/// undid): open restarts the log empty at that start, and appends continue from it.
#[test]
fn open_with_log_end_below_stored_start_restarts_at_it() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: 500,
            ..small_config()
        };
        for clean in [false, true] {
            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            for _ in 0..10 {
                append(&mut log, 2, 100, 1);
            }
            log.sync().await.unwrap();
            assert!(log.segment_count() > 1);
            let start = log.log_end_offset() + 7;
            checkpoint::write_log_start(&log.env().disk, &dir, start).unwrap();
            if clean {
                log.close().await.unwrap();
            } else {
                drop(log); // a crash
            }
            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            assert_eq!(
                (log.log_start_offset(), log.log_end_offset()),
                (start, start)
            );
            assert_eq!(log_files(&dir), vec![format!("{start:020}.log")]);
            assert!(matches!(
                log.read(start - 1, 1 << 20, start).await,
                Err(LogError::OffsetOutOfRange { .. })
            ));
            let w = append(&mut log, 1, 10, 1);
            assert_eq!(w.base, start);
            log.close().await.unwrap();
            let log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            assert_eq!(
                (log.log_start_offset(), log.log_end_offset()),
                (start, start + 1)
            );
            log.close().await.unwrap();
        }
    });
}

#[test]
fn retention_and_delete() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: 500,
            retention_bytes: 1000,
            retention_ms: -1,
            ..small_config()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg).await.unwrap();
        let model: Vec<Written> = (0..20).map(|_| append(&mut log, 1, 100, 1)).collect();
        let before = log.segment_count();
        let deleted = log.apply_retention(crate::log::now_ms()).unwrap();
        assert!(deleted > 0 && log.segment_count() == before - deleted);
        assert!(
            log.size_bytes() >= 1000 && log.size_bytes() < 1500,
            "{}",
            log.size_bytes()
        );
        let start = log.log_start_offset();
        assert_eq!(start, log.segments[0].base_offset);
        assert_eq!(log_files(&dir).len(), log.segment_count());
        assert!(matches!(
            log.read(start - 1, 1, i64::MAX).await,
            Err(LogError::OffsetOutOfRange { .. })
        ));
        let w = model.iter().find(|w| w.base == start).unwrap();
        assert_eq!(
            &log.read(start, 1, i64::MAX).await.unwrap()[..],
            &w.bytes[..]
        );
        log.delete().await.unwrap();
        assert!(!dir.exists());
        // Renamed to `*-delete`, then removed: nothing is left behind.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    });
}

/// `cleanup.policy=compact` (no `delete`): retention never deletes, however old or large
/// the log; `compact,delete` (cleanup_delete) deletes as usual.
#[test]
fn retention_keeps_compact_only_logs() {
    run(async {
        for cleanup_delete in [false, true] {
            let d = tmp();
            let cfg = LogConfig {
                segment_bytes: 500,
                retention_bytes: 100,
                retention_ms: 1,
                cleanup_delete,
                ..small_config()
            };
            let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
            let model: Vec<Written> = (0..20).map(|_| append(&mut log, 1, 100, 1)).collect();
            let before = log.segment_count();
            assert!(before > 3);
            let deleted = log.apply_retention(crate::log::now_ms() + 10_000).unwrap();
            if cleanup_delete {
                assert_eq!(deleted, before - 1);
                assert_eq!(log.segment_count(), 1);
                assert!(log.log_start_offset() > 0);
            } else {
                assert_eq!(deleted, 0);
                assert_eq!(log.segment_count(), before);
                assert_eq!(log.log_start_offset(), 0);
                assert_eq!(
                    &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                    &concat(&model)[..]
                );
            }
        }
    });
}

/// A directory left by an earlier topic of the same name (its deletion never finished) is
/// not adopted by the new topic: it is deleted and the new log starts empty. The same id
/// keeps its data, and a directory without `partition.metadata` is adopted.
#[test]
fn reopen_with_other_topic_id_starts_empty() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let (old_id, new_id): (TopicId, TopicId) = ([1; 16], [2; 16]);
        // Written before partition.metadata existed: adopted, and the file is added.
        let mut log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        append(&mut log, 3, 10, 1);
        log.close().await.unwrap();
        assert!(!dir.join(dir::PARTITION_METADATA_FILE).exists());
        let mut log = PartitionLog::open_for_topic(dir.clone(), small_config(), old_id)
            .await
            .unwrap();
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(dir::read_topic_id(&Disk::Real, &dir).unwrap(), Some(old_id));
        append(&mut log, 2, 10, 1);
        drop(log); // crash: no clean close either

        let log = PartitionLog::open_for_topic(dir.clone(), small_config(), old_id)
            .await
            .unwrap();
        assert_eq!(log.log_end_offset(), 5);
        log.close().await.unwrap();

        let mut log = PartitionLog::open_for_topic(dir.clone(), small_config(), new_id)
            .await
            .unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        assert_eq!(log.read(0, 1 << 20, i64::MAX).await.unwrap().len(), 0);
        assert_eq!(dir::read_topic_id(&Disk::Real, &dir).unwrap(), Some(new_id));
        assert_eq!(
            log_files(&dir),
            vec!["00000000000000000000.log".to_string()]
        );
        assert_eq!(
            std::fs::metadata(dir.join("00000000000000000000.log"))
                .unwrap()
                .len(),
            0
        );
        // Only the new directory remains: the old one went through `*-delete`.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let w = append(&mut log, 1, 10, 1);
        assert_eq!(w.base, 0);
    });
}

/// After a clean close nothing is re-validated. The tail walk starts AT the batch of the
/// active segment's last index entry, which ends at the entry's offset; it used to expect
/// that batch to start after the entry's offset, which none does, so every clean restart
/// re-checked each active segment that had an index entry. After a crash, recovery runs.
#[test]
fn clean_reopen_skips_recovery() {
    run(async {
        for (records, interval) in [(1, 1), (3, 1), (5, 256), (4, 100_000)] {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                segment_bytes: 4_000,
                index_interval_bytes: interval,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            assert_eq!(log.recovery_report(), RecoveryReport::default());
            let mut model: Vec<Written> =
                (0..40).map(|i| append(&mut log, records, 50, i)).collect();
            assert!(log.segment_count() > 1);
            let end = log.log_end_offset();
            log.close().await.unwrap();

            let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            assert_eq!(
                log.recovery_report(),
                RecoveryReport::default(),
                "records {records} interval {interval}"
            );
            assert_eq!(log.log_end_offset(), end);
            assert_eq!(
                &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                &concat(&model)[..]
            );
            model.push(append(&mut log, records, 50, 1000));
            log.sync().await.unwrap();
            let active_size = log.active().size;
            let active_path = log.active().log_path.to_path_buf();
            drop(log); // crash

            // The crash left the active segment's preallocated zeros after its batches.
            assert!(std::fs::metadata(&active_path).unwrap().len() > active_size);
            let log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
            let report = log.recovery_report();
            assert_eq!(report.segments_recovered, 1);
            assert!(report.bytes_scanned >= active_size);
            assert_eq!(
                std::fs::metadata(&active_path).unwrap().len(),
                active_size,
                "recovery cuts the zero tail"
            );
            assert_eq!(log.log_end_offset(), end + records as i64);
            assert_eq!(
                &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                &concat(&model)[..]
            );
        }
    });
}

/// Indexes that fail the sanity check, and a clean-shutdown marker whose log tail is torn
/// anyway: both fall back to full recovery of the segment.
#[test]
fn bad_index_and_lying_marker_recover() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: 2_000,
            index_interval_bytes: 1,
            ..small_config()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        let model: Vec<Written> = (0..30).map(|_| append(&mut log, 2, 60, 5)).collect();
        log.close().await.unwrap();
        let files = log_files(&dir);
        let index = dir.join(files[0].replace(".log", ".index"));
        let len = std::fs::metadata(&index).unwrap().len() as usize;
        std::fs::write(&index, vec![0u8; len]).unwrap();
        let last = dir.join(files.last().unwrap());
        let last_len = std::fs::metadata(&last).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
        f.set_len(last_len - 3).unwrap();
        drop(f);
        assert!(dir.join(".clean_shutdown").exists());

        let log = PartitionLog::open(dir.clone(), cfg).await.unwrap();
        let keep = &model[..model.len() - 1];
        assert_eq!(log.log_end_offset(), keep.last().unwrap().last + 1);
        assert_eq!(
            &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(keep)[..]
        );
        for w in keep {
            assert_eq!(
                &log.read(w.last, 1, i64::MAX).await.unwrap()[..],
                &w.bytes[..]
            );
        }
    });
}

fn producer_batch(pid: i64, epoch: i16, seq: i32, records: usize) -> (Bytes, BatchHeader) {
    let mut b = wire::record_batch::BatchBuilder::new(wire::record_batch::Compression::None)
        .producer(pid, epoch, seq);
    for i in 0..records {
        b = b.push(
            None,
            Some(format!("v{i}").as_bytes()),
            &[],
            1_000 + i as i64,
        );
    }
    let bytes = b.build();
    let h = validate_batch(&bytes).unwrap();
    (bytes, h)
}

fn snapshots(dir: &Path) -> Vec<i64> {
    let mut v = list_snapshots(&Disk::Real, dir).unwrap();
    v.sort_unstable();
    v
}

/// Producer state: snapshot at every roll and at close, rebuilt at open from the newest
/// readable snapshot plus the batch headers after it; snapshots past a truncation point
/// and corrupt ones are dropped; retention removes them with their segments.
#[test]
fn producer_state_survives_restarts_and_truncation() {
    let dir = tmp();
    let path = dir.path().join("p-0");
    run(async move {
        let config = LogConfig {
            segment_bytes: 250,
            producer_id_expiration_ms: i64::MAX,
            ..small_config()
        };
        let mut log = PartitionLog::open(path.clone(), config.clone())
            .await
            .unwrap();
        let mut seq = 0;
        let mut appended = Vec::new();
        for _ in 0..12 {
            let (b, h) = producer_batch(42, 0, seq, 3);
            let info = log.append(&b, &h, 0).unwrap();
            appended.push((b, h, info.base_offset));
            seq += 3;
        }
        assert!(log.segment_count() > 2, "test needs rolls");
        let rolled = snapshots(&path);
        assert!(!rolled.is_empty());
        let state = log.producers().clone();
        // Clean close: a snapshot at the log end; reopen restores the same state.
        let end = log.log_end_offset();
        log.close().await.unwrap();
        assert!(snapshots(&path).contains(&end));
        let mut log = PartitionLog::open(path.clone(), config.clone())
            .await
            .unwrap();
        assert_eq!(*log.producers(), state);
        // Retries of the last five batches are answered with their offsets.
        for (b, h, base) in &appended[7..] {
            let info = log.append(b, h, 0).unwrap();
            assert!(info.duplicate);
            assert_eq!(info.base_offset, *base);
        }
        assert_eq!(log.log_end_offset(), end);
        // Crash (no close), with the newest snapshot corrupt: an older one plus the
        // headers after it give the same state.
        log.sync().await.unwrap();
        drop(log);
        std::fs::remove_file(checkpoint::clean_marker(&path)).ok();
        let newest = *snapshots(&path).last().unwrap();
        std::fs::write(snapshot_path(&path, newest), b"garbage").unwrap();
        let log = PartitionLog::open(path.clone(), config.clone())
            .await
            .unwrap();
        assert_eq!(*log.producers(), state);
        assert!(
            !snapshots(&path).contains(&newest),
            "corrupt snapshot deleted"
        );
        drop(log);
        // Truncation (recovery cuts the log below the last batches): state past the cut is
        // gone, as are snapshots past it.
        let last_seg = *list_segments(&Disk::Real, &path).unwrap().last().unwrap();
        let (log_file, _, _) = segment_paths(&path, last_seg);
        let len = std::fs::metadata(&log_file).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&log_file)
            .unwrap();
        f.set_len(len - 5).unwrap(); // tear the last batch
        drop(f);
        std::fs::write(snapshot_path(&path, end + 100), state.to_snapshot()).unwrap();
        let mut log = PartitionLog::open(path.clone(), config.clone())
            .await
            .unwrap();
        assert!(log.log_end_offset() < end);
        let entry = log.producers().get(42).unwrap();
        assert_eq!(entry.last_offset(), log.log_end_offset() - 1);
        assert_eq!(entry.last_seq(), 32);
        assert!(snapshots(&path).iter().all(|&o| o <= log.log_end_offset()));
        // The torn batch can be sent again and is appended (not a duplicate).
        let (b, h, _) = &appended[11];
        let info = log.append(b, h, 0).unwrap();
        assert!(!info.duplicate);
        // Retention takes snapshots below the new log start with their segments.
        log.config.retention_bytes = 1;
        log.apply_retention(crate::log::now_ms()).unwrap();
        let start = log.log_start_offset();
        assert!(start > 0);
        assert!(snapshots(&path).iter().all(|&o| o >= start));
        // Expiry by the last batch's timestamp (1,000 + records - 1 ms).
        log.config.producer_id_expiration_ms = 10;
        assert_eq!(log.remove_expired_producers(1_011), 0);
        assert_eq!(log.remove_expired_producers(1_012), 1);
        assert!(log.producers().is_empty());
    });
}

/// `preallocate=false`: the active segment's file ends at its last batch while the log is
/// open (what kafka-dump-log needs to read a live broker's active segment); with the
/// default it reserves space ahead.
#[test]
fn preallocate_false_keeps_the_file_at_its_batches() {
    run(async {
        for preallocate in [false, true] {
            let d = tmp();
            let dir = d.path().join("t-0");
            let cfg = LogConfig {
                preallocate,
                ..small_config()
            };
            let mut log = PartitionLog::open(dir.clone(), cfg).await.unwrap();
            append(&mut log, 5, 50, 1000);
            let size = log.active().size;
            let len = std::fs::metadata(&log.active().log_path).unwrap().len();
            if preallocate {
                assert!(len > size, "reserved ahead: {len} > {size}");
            } else {
                assert_eq!(len, size);
            }
        }
    });
}
