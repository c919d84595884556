//! Tests of the timestamp rules (restamped headers, the time index), DeleteRecords' log start
//! offset, retention and `segment.ms` on `PartitionLog`.

use wire::record_batch::{records, validate_batch, TimestampType, BATCH_HEADER_BYTES};

use super::partition_log::{BatchStamp, PartitionLog};
use super::test_util::{batch, run, tmp};
use crate::config::LogConfig;

fn config() -> LogConfig {
    LogConfig {
        segment_index_bytes: 4096,
        index_interval_bytes: 1,
        ..LogConfig::default()
    }
}

/// LogAppendTime: the stored batch has the append time as max timestamp, the attribute bit
/// set, a valid CRC, and every other byte as sent; it survives a crash-recovery (whose CRC
/// check would truncate it otherwise). CreateTime(max) rewrites only a wrong max.
#[test]
fn append_stamped_rewrites_header_only() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let mut log = PartitionLog::open(dir.clone(), config()).await.unwrap();
        let (b, h) = batch(3, 20, 1_000);
        let info = log
            .append_stamped(&b, &h, 5, BatchStamp::LogAppendTime, 777_000)
            .unwrap();
        assert_eq!(info.log_append_time_ms, 777_000);
        let (b2, h2) = batch(2, 20, 2_000);
        log.append_stamped(&b2, &h2, 5, BatchStamp::CreateTime(2_500), 778_000)
            .unwrap();
        let (b3, h3) = batch(1, 20, 3_000);
        log.append_stamped(&b3, &h3, 5, BatchStamp::CreateTime(3_000), 779_000)
            .unwrap();
        assert_eq!(log.max_timestamp(), Some((2, 777_000)));
        log.sync().await.unwrap();
        drop(log); // crash: recovery re-checks every CRC
        let log = PartitionLog::open(dir.clone(), config()).await.unwrap();
        assert_eq!(log.log_end_offset(), 6);
        let bytes = log.read(0, 1 << 20, i64::MAX).await.unwrap();
        let mut at = 0;
        for (sent, ts_type, max) in [
            (&b, TimestampType::LogAppendTime, 777_000),
            (&b2, TimestampType::CreateTime, 2_500),
            (&b3, TimestampType::CreateTime, 3_000),
        ] {
            let stored = &bytes[at..at + sent.len()];
            let header = validate_batch(stored).expect("CRC valid");
            assert_eq!(header.timestamp_type(), ts_type);
            assert_eq!(header.max_timestamp, max);
            assert_eq!(&stored[BATCH_HEADER_BYTES..], &sent[BATCH_HEADER_BYTES..]);
            let sent_header = validate_batch(sent).unwrap();
            assert_eq!(header.base_timestamp, sent_header.base_timestamp);
            assert_eq!(header.partition_leader_epoch, 5);
            if ts_type == TimestampType::LogAppendTime {
                for r in records(stored).unwrap().iter() {
                    assert_eq!(r.unwrap().timestamp, 777_000);
                }
            }
            at += sent.len();
        }
        assert_eq!(at, bytes.len());
    });
}

/// The seed's example: stamps :00 :04 :02 :09 :07 :15 one batch each. The time index holds
/// only increasing stamps (00, 04, 09, 15), and the lookup by time starts at the right batch.
#[test]
fn time_index_holds_only_increasing_stamps() {
    run(async {
        let d = tmp();
        let mut log = PartitionLog::open(d.path().join("t-0"), config())
            .await
            .unwrap();
        for s in [0, 4, 2, 9, 7, 15] {
            let (b, h) = batch(1, 10, 1_000 * s);
            log.append_at(&b, &h, 0, 1).unwrap();
        }
        let entries = log.time_index_entries();
        let stamps: Vec<i64> = entries.iter().map(|e| e.0).collect();
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{entries:?}");
        for (t, o) in &entries {
            assert!(
                [(0, 0), (4_000, 1), (9_000, 3), (15_000, 5)].contains(&(*t, *o)),
                "{entries:?}"
            );
        }
        for (t, want) in [(0, 0), (3_000, 1), (5_000, 3), (8_000, 3), (10_000, 5)] {
            let (offset, _) = log.offset_for_timestamp(t).await.unwrap().unwrap();
            assert_eq!(offset, want, "T={t}");
        }
        assert_eq!(log.offset_for_timestamp(16_000).await.unwrap(), None);
    });
}

fn append_ts(log: &mut PartitionLog, ts: i64, now: i64) -> i64 {
    let (b, h) = batch(1, 100, ts);
    log.append_at(&b, &h, 0, now).unwrap().base_offset
}

const DAY: i64 = 86_400_000;

/// Retention by time reads each closed segment's largest stamp, from the front, and stops at
/// the first segment not old enough: a future-stamped segment keeps every later one, however
/// old. Size retention still deletes it. The active segment is never deleted.
#[test]
fn retention_stops_at_the_first_segment_not_eligible() {
    run(async {
        let d = tmp();
        let cfg = LogConfig {
            segment_bytes: 200, // one batch (about 170 bytes) per segment
            retention_ms: 7 * DAY,
            retention_bytes: -1,
            ..config()
        };
        let now = 1_000 * DAY;
        let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
        // Stamps (days before now): 11, 10, +3 years, 8, active.
        for ts in [
            now - 11 * DAY,
            now - 10 * DAY,
            now + 1_000 * DAY,
            now - 8 * DAY,
            now,
        ] {
            append_ts(&mut log, ts, now);
        }
        assert_eq!(log.segment_count(), 5);
        assert_eq!(log.apply_retention(now).unwrap(), 2);
        assert_eq!(log.log_start_offset(), 2);
        assert_eq!(log.segment_count(), 3); // the future one, the 8-day one behind it, active
                                            // Everything old enough once the clock passes the future stamp; never the active one.
        assert_eq!(log.apply_retention(now + 1_008 * DAY).unwrap(), 2);
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.log_start_offset(), 4);
    });
}

/// Kafka runs the time pass, then the size pass: a segment that only the time rule would
/// delete, behind one it may not delete by time, is kept when size is satisfied by removing
/// the first (a single combined predicate would have deleted both).
#[test]
fn retention_time_then_size_passes() {
    run(async {
        let d = tmp();
        let now = 1_000 * DAY;
        let seg = batch(1, 100, 0).0.len() as i64;
        let cfg = LogConfig {
            segment_bytes: 200,
            retention_ms: 7 * DAY,
            retention_bytes: 3 * seg, // deleting one segment satisfies it
            ..config()
        };
        let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
        for ts in [now + DAY, now - 30 * DAY, now, now] {
            append_ts(&mut log, ts, now);
        }
        assert_eq!(log.size_bytes() as i64, 4 * seg);
        assert_eq!(log.apply_retention(now).unwrap(), 1);
        assert_eq!(log.log_start_offset(), 1);
        // The 30-day-old segment is now first: the next check deletes it by time.
        assert_eq!(log.apply_retention(now).unwrap(), 1);
        assert_eq!(log.log_start_offset(), 2);
    });
}

/// segment.ms counts from the first batch's stamp (Kafka's `timeWaitedForRoll`): the
/// incoming batch's stamp minus it, strictly greater than segment.ms rolls; a segment opened
/// by a future stamp does not roll by time while later stamps trail it, whatever the clock.
#[test]
fn segment_ms_from_the_first_stamp() {
    run(async {
        let d = tmp();
        let cfg = LogConfig {
            segment_ms: 1_000,
            ..config()
        };
        let t0 = 1_000 * DAY;
        let mut log = PartitionLog::open(d.path().join("t-0"), cfg.clone())
            .await
            .unwrap();
        append_ts(&mut log, t0, t0);
        append_ts(&mut log, t0 + 1_000, t0 + 5_000); // waited exactly segment.ms: no roll
        assert_eq!(log.segment_count(), 1);
        append_ts(&mut log, t0 + 1_001, t0 + 5_000);
        assert_eq!(log.segment_count(), 2);
        // A segment opened by a future stamp.
        append_ts(&mut log, t0 + 100 * DAY, t0 + 5_000);
        assert_eq!(log.segment_count(), 3);
        for i in 1..5 {
            append_ts(&mut log, t0 + i * 10_000, t0 + i * DAY);
        }
        assert_eq!(log.segment_count(), 3);
        // After a restart the first stamp is read back from the active segment.
        log.close().await.unwrap();
        let mut log = PartitionLog::open(d.path().join("t-0"), cfg).await.unwrap();
        append_ts(&mut log, t0 + 50 * DAY, t0 + 200 * DAY);
        assert_eq!(log.segment_count(), 3);
        append_ts(&mut log, t0 + 100 * DAY + 1_001, t0);
        assert_eq!(log.segment_count(), 4);
    });
}

/// DeleteRecords: the start moves (never back), survives a crash, segments wholly below it go
/// (never the active one), reads below it are out of range; -1 is the high watermark; past the
/// high watermark and compact-only logs are refused. Leader epochs follow the start.
#[test]
fn delete_records_moves_the_log_start() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let cfg = LogConfig {
            segment_bytes: 200,
            ..config()
        };
        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        log.assign_leader_epoch(0).unwrap();
        for i in 0..6 {
            append_ts(&mut log, 1_000 + i, 1);
        }
        assert_eq!(log.segment_count(), 6);
        assert_eq!(log.delete_records(3).unwrap(), 3);
        assert_eq!(log.segment_count(), 3);
        assert_eq!(log.delete_records(1).unwrap(), 3);
        assert!(matches!(
            log.read(2, 1 << 20, i64::MAX).await,
            Err(super::LogError::OffsetOutOfRange { .. })
        ));
        assert_eq!(log.leader_epoch_entries(), vec![(0, 3)]);
        assert!(matches!(
            log.delete_records(7),
            Err(super::LogError::LogStartOutOfRange { .. })
        ));
        assert!(matches!(
            log.delete_records(-2),
            Err(super::LogError::LogStartOutOfRange { .. })
        ));
        log.sync().await.unwrap();
        drop(log); // crash
        let mut log = PartitionLog::open(dir.clone(), cfg.clone()).await.unwrap();
        log.assign_leader_epoch(0).unwrap();
        assert_eq!(log.log_start_offset(), 3);
        assert_eq!(log.log_end_offset(), 6);
        assert_eq!(log.leader_epoch_entries(), vec![(0, 3)]);
        assert_eq!(log.delete_records(-1).unwrap(), 6);
        assert_eq!(log.leader_epoch_entries(), vec![(0, 6)]);
        assert_eq!(log.segment_count(), 1); // only the active segment, now empty of records
        assert_eq!(log.read(6, 1 << 20, i64::MAX).await.unwrap().len(), 0);
        assert_eq!(log.end_offset_for_epoch(0), Some((0, 6)));
        log.close().await.unwrap();
        let mut log = PartitionLog::open(
            dir,
            LogConfig {
                cleanup_delete: false,
                ..cfg
            },
        )
        .await
        .unwrap();
        assert_eq!(log.log_start_offset(), 6);
        assert!(matches!(
            log.delete_records(6),
            Err(super::LogError::DeletePolicy)
        ));
    });
}
