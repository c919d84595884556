//! `PartitionLog` tests: append, read plans, rolls and index lookups.

use std::path::Path;

use bytes::Bytes;
use wire::record_batch::patched_prefix;

use super::*;
use crate::config::LogConfig;
use crate::log::test_util::{batch, run, tmp};
use crate::log::LogError;
use crate::storage::Piece;
use rand::{rngs::StdRng, Rng, SeedableRng};
use wire::record_batch::validate_batch;

pub(super) fn small_config() -> LogConfig {
    LogConfig {
        segment_index_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// What the test wrote: (base offset, last offset, bytes as the log stores them).
#[derive(Clone)]
pub(super) struct Written {
    pub(super) base: i64,
    pub(super) last: i64,
    pub(super) bytes: Bytes,
}

pub(super) fn append(log: &mut PartitionLog, records: usize, value_len: usize, ts: i64) -> Written {
    let (b, h) = batch(records, value_len, ts);
    let info = log.append(&b, &h, 7).unwrap();
    let mut stored = b.to_vec();
    stored[..16].copy_from_slice(&patched_prefix(&b, info.base_offset, 7));
    Written {
        base: info.base_offset,
        last: info.last_offset,
        bytes: Bytes::from(stored),
    }
}

/// What `read(offset, max_bytes, limit)` must return, from the model.
pub(super) fn expected(model: &[Written], offset: i64, max_bytes: usize, limit: i64) -> Vec<u8> {
    let mut out = Vec::new();
    for w in model.iter().filter(|w| w.last >= offset) {
        if w.last >= limit || (!out.is_empty() && out.len() + w.bytes.len() > max_bytes) {
            break;
        }
        if out.is_empty() || out.len() + w.bytes.len() <= max_bytes {
            out.extend_from_slice(&w.bytes);
        }
        if out.len() >= max_bytes {
            break;
        }
    }
    out
}

pub(super) fn concat(model: &[Written]) -> Vec<u8> {
    model.iter().flat_map(|w| w.bytes.iter().copied()).collect()
}

pub(super) fn log_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    v.sort();
    v
}

#[test]
fn append_read_round_trip() {
    run(async {
        let d = tmp();
        let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
            .await
            .unwrap();
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        let w1 = append(&mut log, 3, 10, 1000);
        let w2 = append(&mut log, 2, 10, 2000);
        assert_eq!((w1.base, w1.last, w2.base, w2.last), (0, 2, 3, 4));
        assert_eq!(log.log_end_offset(), 5);
        let got = log.read(0, 1 << 20, i64::MAX).await.unwrap();
        assert_eq!(&got[..], &concat(&[w1.clone(), w2.clone()])[..]);
        // The stored batch is still valid (patches are outside the CRC) and carries the
        // assigned offset and epoch.
        let h = validate_batch(&got).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (0, 7));
        assert_eq!(
            validate_batch(&got[w1.bytes.len()..]).unwrap().base_offset,
            3
        );
        log.close().await.unwrap();
    });
}

#[test]
fn read_inside_batch_and_small_max_bytes() {
    run(async {
        let d = tmp();
        let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
            .await
            .unwrap();
        let model: Vec<Written> = (0..5).map(|_| append(&mut log, 5, 20, 1)).collect();
        // Offset 7 is inside the second batch [5, 9]: that whole batch comes back.
        let got = log.read(7, model[1].bytes.len(), i64::MAX).await.unwrap();
        assert_eq!(&got[..], &model[1].bytes[..]);
        // max_bytes smaller than a batch: still the whole first batch, only it.
        let got = log.read(0, 10, i64::MAX).await.unwrap();
        assert_eq!(&got[..], &model[0].bytes[..]);
        let got = log.read(0, 0, i64::MAX).await.unwrap();
        assert_eq!(&got[..], &model[0].bytes[..]);
        // Just under two batches: one.
        let got = log
            .read(0, model[0].bytes.len() * 2 - 1, i64::MAX)
            .await
            .unwrap();
        assert_eq!(got.len(), model[0].bytes.len());
        // Limit (high watermark) 10: batches up to offset 9 only.
        let got = log.read(0, 1 << 20, 10).await.unwrap();
        assert_eq!(&got[..], &concat(&model[..2])[..]);
        assert!(log.read(12, 1 << 20, 10).await.unwrap().is_empty());
    });
}

#[test]
fn out_of_range() {
    run(async {
        let d = tmp();
        let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
            .await
            .unwrap();
        assert!(log.read(0, 100, i64::MAX).await.unwrap().is_empty());
        append(&mut log, 3, 1, 1);
        assert!(log.read(3, 100, i64::MAX).await.unwrap().is_empty());
        for bad in [4, 100, -1] {
            match log.read(bad, 100, i64::MAX).await {
                Err(LogError::OffsetOutOfRange {
                    offset,
                    log_start: 0,
                    log_end: 3,
                }) => assert_eq!(offset, bad),
                other => panic!("{bad}: {other:?}"),
            }
        }
    });
}

#[test]
fn rejects_bad_input() {
    run(async {
        let d = tmp();
        let cfg = LogConfig {
            max_message_bytes: 200,
            ..small_config()
        };
        let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
        let (b, h) = batch(1, 500, 1);
        assert!(matches!(
            log.append(&b, &h, 0),
            Err(LogError::RecordTooLarge { .. })
        ));
        let (b, h) = batch(1, 5, 1);
        assert!(matches!(
            log.append(&b[..b.len() - 1], &h, 0),
            Err(LogError::InvalidBatch(_))
        ));
        assert_eq!(log.log_end_offset(), 0);
    });
}

#[test]
fn roll_by_size_and_read_across_segments() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-3");
        let cfg = LogConfig {
            segment_bytes: 1000,
            ..small_config()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        let model: Vec<Written> = (0..40)
            .map(|i| append(&mut log, 1 + i % 3, 60, 1000 + i as i64))
            .collect();
        assert!(log.segment_count() > 5, "{}", log.segment_count());
        let files = log_files(&dir);
        assert_eq!(files.len(), log.segment_count());
        assert_eq!(files[0], "00000000000000000000.log");
        for f in &files {
            assert_eq!(f.len(), 24, "{f}");
            let size = std::fs::metadata(dir.join(f)).unwrap().len();
            assert!(size <= 1000, "{f}: {size}");
            let base: i64 = f[..20].parse().unwrap();
            assert!(
                model.iter().any(|w| w.base == base),
                "{f} not at a batch boundary"
            );
        }
        // Inactive segments' indexes are trimmed to their entries.
        let idx = std::fs::metadata(dir.join(files[0].replace(".log", ".index")))
            .unwrap()
            .len();
        assert!(idx < 4096, "{idx}");
        assert_eq!(idx % 8, 0);
        let tidx = std::fs::metadata(dir.join(files[0].replace(".log", ".timeindex")))
            .unwrap()
            .len();
        assert!(tidx < 4096 && tidx > 0, "{tidx}");
        assert_eq!(tidx % 12, 0);
        // Everything, across every segment, in one read.
        let all = log.read(0, 1 << 20, i64::MAX).await.unwrap();
        assert_eq!(&all[..], &concat(&model)[..]);
        for o in 0..log.log_end_offset() {
            let got = log.read(o, 1, i64::MAX).await.unwrap();
            let w = model.iter().find(|w| w.base <= o && o <= w.last).unwrap();
            assert_eq!(&got[..], &w.bytes[..], "offset {o}");
        }
    });
}

#[test]
fn roll_by_time() {
    run(async {
        let d = tmp();
        let cfg = LogConfig {
            segment_ms: 1000,
            ..small_config()
        };
        let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
        // Batches without a timestamp: segment.ms counts wall time since the first append
        // and rolls once strictly more than segment.ms passed (Kafka's shouldRoll).
        let (b, h) = batch(1, 1, -1);
        log.append_at(&b, &h, 0, 10_000).unwrap();
        log.append_at(&b, &h, 0, 11_000).unwrap();
        assert_eq!(log.segment_count(), 1);
        log.append_at(&b, &h, 0, 11_001).unwrap();
        assert_eq!(log.segment_count(), 2);
        assert_eq!(log.segments[1].base_offset, 2);
    });
}

/// Property: for random batch sizes, segment sizes and index densities, every read agrees
/// with a linear scan of the model (which batch contains the offset, how many fit).
#[test]
fn index_lookup_matches_linear_scan() {
    for seed in 0..12u64 {
        run(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let d = tmp();
            let cfg = LogConfig {
                segment_bytes: rng.gen_range(2_000..20_000),
                index_interval_bytes: rng.gen_range(1..600),
                segment_index_bytes: rng.gen_range(64..2048),
                ..LogConfig::default()
            };
            let mut log = PartitionLog::open(d.path().join("p-0"), cfg).await.unwrap();
            let mut model = Vec::new();
            for _ in 0..rng.gen_range(50..250) {
                let (n, len) = (rng.gen_range(1..8), rng.gen_range(0..400));
                model.push(append(&mut log, n, len, rng.gen_range(0..1000)));
            }
            let end = log.log_end_offset();
            assert_eq!(end, model.last().unwrap().last + 1);
            for _ in 0..300 {
                let offset = rng.gen_range(0..end);
                let max_bytes = rng.gen_range(0..5_000);
                let limit = if rng.gen_bool(0.3) {
                    rng.gen_range(0..=end)
                } else {
                    i64::MAX
                };
                let got = log.read(offset, max_bytes, limit).await.unwrap();
                let want = if offset >= limit {
                    Vec::new()
                } else {
                    expected(&model, offset, max_bytes, limit)
                };
                assert_eq!(
                    got.len(),
                    want.len(),
                    "seed {seed} offset {offset} max {max_bytes} limit {limit}"
                );
                assert!(got[..] == want[..], "seed {seed} offset {offset}");
            }
        });
    }
}

/// The bytes of a range read's pieces, read through the descriptors the ranges hold.
pub(super) fn piece_bytes(pieces: &[Piece]) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut out = Vec::new();
    for piece in pieces {
        let Piece::File(range) = piece else {
            panic!("the real disk gives file ranges, got {piece:?}");
        };
        let file = std::fs::File::from(range.shared_fd().try_clone().unwrap());
        let mut buf = vec![0u8; range.len() as usize];
        file.read_exact_at(&mut buf, range.pos()).unwrap();
        out.extend_from_slice(&buf);
    }
    out
}

/// Property: a range read returns exactly the batches a copying read returns (same
/// boundaries, max_bytes, KIP-74 first batch, limit, across segments), as file ranges.
#[test]
fn read_ranges_match_copying_reads() {
    for seed in 0..12u64 {
        run(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let d = tmp();
            let cfg = LogConfig {
                segment_bytes: rng.gen_range(1_500..20_000),
                index_interval_bytes: rng.gen_range(1..2000),
                segment_index_bytes: rng.gen_range(64..2048),
                ..LogConfig::default()
            };
            let mut log = PartitionLog::open(d.path().join("p-0"), cfg).await.unwrap();
            for _ in 0..rng.gen_range(50..250) {
                let (n, len) = (rng.gen_range(1..8), rng.gen_range(0..900));
                append(&mut log, n, len, rng.gen_range(0..1000));
            }
            let end = log.log_end_offset();
            for _ in 0..400 {
                let offset = rng.gen_range(0..=end);
                let max_bytes = rng.gen_range(0..12_000);
                let limit = if rng.gen_bool(0.3) {
                    rng.gen_range(0..=end + 1)
                } else {
                    end
                };
                let min_one = rng.gen_bool(0.7);
                let want = log
                    .read_bounded(offset, max_bytes, limit, min_one)
                    .await
                    .unwrap();
                let pieces = log
                    .read_ranges(offset, max_bytes, limit, min_one)
                    .await
                    .unwrap();
                let got = piece_bytes(&pieces);
                let case = format!(
                    "seed {seed} offset {offset} max {max_bytes} limit {limit} min_one {min_one}"
                );
                assert_eq!(got.len(), want.len(), "{case}");
                assert!(got[..] == want[..], "{case}");
                assert!(pieces.iter().all(|piece| !piece.is_empty()), "{case}");
            }
            log.close().await.unwrap();
        });
    }
}

#[test]
fn read_ranges_first_batch_whole_only_with_min_one() {
    run(async {
        let d = tmp();
        let mut log = PartitionLog::open(d.path().join("t-0"), small_config())
            .await
            .unwrap();
        let big = append(&mut log, 4, 500, 1);
        append(&mut log, 1, 10, 1);
        let whole = log.read_ranges(0, 100, i64::MAX, true).await.unwrap();
        assert_eq!(piece_bytes(&whole), big.bytes.to_vec());
        let none = log.read_ranges(0, 100, i64::MAX, false).await.unwrap();
        assert!(none.is_empty());
        // Nothing at or past the limit, even the first batch.
        let limited = log.read_ranges(0, 100, 0, true).await.unwrap();
        assert!(limited.is_empty());
        log.close().await.unwrap();
    });
}

/// A range holds its segment's file: deleting the segment (DeleteRecords, then the
/// deletion of the segments below the log start, as retention does) leaves the bytes of a
/// range read before readable and unchanged.
#[test]
fn held_range_survives_segment_deletion() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: 1500,
            ..small_config()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg).await.unwrap();
        let model: Vec<Written> = (0..20).map(|_| append(&mut log, 3, 100, 1)).collect();
        assert!(log.segments.len() > 3);
        let pieces = log.read_ranges(0, 1 << 20, i64::MAX, true).await.unwrap();
        assert_eq!(pieces.len(), log.segments.len(), "one range per segment");
        let before = log_files(&dir);
        let last_base = log.segments.last().unwrap().base_offset;
        // DeleteRecords deletes the segments below the new log start at once.
        log.delete_records(last_base).unwrap();
        assert!(
            log_files(&dir).len() < before.len(),
            "segment files unlinked"
        );
        assert_eq!(piece_bytes(&pieces), concat(&model));
        log.close().await.unwrap();
    });
}
