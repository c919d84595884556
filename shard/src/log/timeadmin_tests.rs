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
