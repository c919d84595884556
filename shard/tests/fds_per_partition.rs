//! An idle partition holds at most two file descriptors, however many segments it has: the
//! active segment's `.log` and the recovery-point file. Indexes are memory-mapped and keep no
//! fd; rolled segments reopen their `.log` only while a read or a sync uses it. (Before, each
//! segment held three fds, so 5,000 partitions exhausted a 20,000 fd limit.)
//!
//! Counts the entries of /proc/self/fd that point into the test's own directory, so tests
//! running in parallel threads do not disturb each other.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::path::Path;
use std::time::Duration;

use shard::{LogConfig, PartitionLog};
use wire::record_batch::{validate_batch, BatchBuilder, Compression};

fn fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

fn batch() -> bytes::Bytes {
    BatchBuilder::new(Compression::None)
        .push(Some(b"k"), Some(&[7u8; 1000]), &[], 1_700_000_000_000)
        .build()
}

/// Small segments so a few appends roll many of them.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

/// glommio closes dropped files through io_uring: let the executor run the closes.
async fn settle() {
    glommio::timer::sleep(Duration::from_millis(20)).await;
}

async fn fill(log: &mut PartitionLog, batches: usize) {
    let bytes = batch();
    for _ in 0..batches {
        let header = validate_batch(&bytes).expect("valid batch");
        log.append(&bytes, &header, 0).expect("append");
    }
    log.sync().await.expect("sync");
}

#[test]
fn rolled_segments_and_indexes_hold_no_fd() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap()
        .run(async move {
            let path = root.join("t-0");
            let mut log = PartitionLog::open(path.clone(), config()).await.unwrap();
            fill(&mut log, 40).await;
            assert!(
                log.segment_count() >= 10,
                "segments: {}",
                log.segment_count()
            );
            settle().await;
            let idle = fds_under(&root);
            assert!(
                idle <= 2,
                "an idle partition with {} segments holds {idle} fds",
                log.segment_count()
            );

            // Reading old segments reopens their .log for the read only, and works.
            let read = log.read(0, 64 << 10, i64::MAX).await.unwrap();
            assert!(
                read.len() > 4096,
                "read {} bytes across segments",
                read.len()
            );
            let (ts_offset, _) = log.offset_for_timestamp(0).await.unwrap().unwrap();
            assert_eq!(ts_offset, 0);
            settle().await;
            assert!(
                fds_under(&root) <= 2,
                "after reads: {} fds",
                fds_under(&root)
            );

            // A clean restart, then one that must recover (no close): still two fds.
            log.close().await.unwrap();
            settle().await;
            assert_eq!(fds_under(&root), 0);
            let mut log = PartitionLog::open(path.clone(), config()).await.unwrap();
            fill(&mut log, 5).await;
            let end = log.log_end_offset();
            settle().await;
            assert!(
                fds_under(&root) <= 2,
                "after a clean restart: {} fds",
                fds_under(&root)
            );
            drop(log);
            settle().await;
            let log = PartitionLog::open(path, config()).await.unwrap();
            assert_eq!(log.log_end_offset(), end);
            settle().await;
            assert!(
                fds_under(&root) <= 2,
                "after recovery: {} fds",
                fds_under(&root)
            );
        });
}

#[test]
fn many_partitions_two_fds_each() {
    const PARTITIONS: usize = 64;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap()
        .run(async move {
            let mut logs = Vec::new();
            for p in 0..PARTITIONS {
                let mut log = PartitionLog::open(root.join(format!("t-{p}")), config())
                    .await
                    .unwrap();
                fill(&mut log, 5).await;
                logs.push(log);
            }
            settle().await;
            let fds = fds_under(&root);
            assert!(
                fds <= 2 * PARTITIONS,
                "{PARTITIONS} partitions hold {fds} fds"
            );
        });
}
