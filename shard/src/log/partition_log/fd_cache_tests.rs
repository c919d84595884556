//! `PartitionLog` with a small fd cache: files reopened after eviction, reads in flight across
//! an eviction, and the clean-shutdown marker that lets a restart open no file.

use std::os::unix::fs::FileExt;

use super::tests::*;
use super::*;
use crate::log::fd_cache::{self, shard_stats};
use crate::log::test_util::{run, tmp};
use crate::storage::Piece;

/// Appends one batch to `log` and syncs it (the sync reopens nothing: the append's fd is hot).
async fn write(log: &mut PartitionLog, ts: i64) -> Written {
    let w = append(log, 3, 50, ts);
    log.sync().await.unwrap();
    w
}

/// Uses `others` so that every file `victim` had cached is evicted.
async fn evict_by_using(others: &mut [PartitionLog]) {
    for (i, log) in others.iter_mut().enumerate() {
        write(log, 1_000 + i as i64).await;
    }
}

async fn open_logs(root: &std::path::Path, names: &[&str]) -> Vec<PartitionLog> {
    let mut logs = Vec::new();
    for name in names {
        logs.push(
            PartitionLog::open(root.join(name), small_config())
                .await
                .unwrap(),
        );
    }
    logs
}

#[test]
fn files_reopen_after_eviction_and_data_reads_back() {
    run(async {
        fd_cache::set_shard_capacity(2);
        let d = tmp();
        let mut a = PartitionLog::open(d.path().join("a-0"), small_config())
            .await
            .unwrap();
        let mut model = vec![write(&mut a, 10).await, write(&mut a, 11).await];
        assert!(a.active().is_open());
        let mut others = open_logs(d.path(), &["b-0", "c-0", "d-0"]).await;
        evict_by_using(&mut others).await;
        assert!(!a.active().is_open(), "a's .log was evicted");
        assert!(shard_stats().cached <= 2);
        assert!(shard_stats().evicted > 0);

        // Reads reopen it and see what was written before the eviction.
        assert_eq!(
            &a.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
        // Appends reopen it too (and the recovery point with the sync).
        evict_by_using(&mut others).await;
        model.push(write(&mut a, 12).await);
        evict_by_using(&mut others).await;
        assert_eq!(
            &a.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
        assert!(shard_stats().cached <= 2);

        // A crash (no close) while evicted: recovery finds every synced batch.
        let dir = a.dir().to_path_buf();
        drop(a);
        evict_by_using(&mut others).await;
        let a = PartitionLog::open(dir, small_config()).await.unwrap();
        assert!(a.recovery_report().segments_recovered > 0);
        assert_eq!(
            &a.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
    });
}

#[test]
fn a_read_in_flight_keeps_its_file_across_an_eviction() {
    run(async {
        fd_cache::set_shard_capacity(2);
        let d = tmp();
        let mut a = PartitionLog::open(d.path().join("a-0"), small_config())
            .await
            .unwrap();
        let model = vec![write(&mut a, 10).await, write(&mut a, 11).await];
        // Both reads take the fd when they are planned, then wait.
        let copied = a.read(0, 1 << 20, i64::MAX);
        let ranges = a.read_ranges(0, 1 << 20, i64::MAX, true);
        let mut others = open_logs(d.path(), &["b-0", "c-0", "d-0"]).await;
        evict_by_using(&mut others).await;
        assert!(shard_stats().cached <= 2);
        assert!(
            a.active().is_open(),
            "the planned read still holds the evicted fd"
        );
        assert_eq!(&copied.await.unwrap()[..], &concat(&model)[..]);
        let pieces = ranges.await.unwrap();
        let mut sent = Vec::new();
        for piece in pieces {
            match piece {
                Piece::File(range) => {
                    let file = std::fs::File::from(range.shared_fd().try_clone().unwrap());
                    let mut buf = vec![0u8; range.len() as usize];
                    file.read_exact_at(&mut buf, range.pos()).unwrap();
                    sent.extend_from_slice(&buf);
                }
                Piece::Bytes(b) => sent.extend_from_slice(&b),
            }
        }
        assert_eq!(sent, concat(&model));
        // Once the reads are done, nothing but the cache held it: it is closed.
        assert!(!a.active().is_open());
    });
}

#[test]
fn a_sync_in_flight_keeps_its_file_across_an_eviction() {
    run(async {
        fd_cache::set_shard_capacity(2);
        let d = tmp();
        let mut a = PartitionLog::open(d.path().join("a-0"), small_config())
            .await
            .unwrap();
        let w = append(&mut a, 2, 10, 5);
        let job = a.begin_sync().unwrap();
        let mut others = open_logs(d.path(), &["b-0", "c-0", "d-0"]).await;
        evict_by_using(&mut others).await;
        assert!(a.active().is_open(), "the sync job holds the fd");
        let r = job.run().await;
        a.finish_sync(job, r).unwrap();
        assert_eq!(a.durable_offset(), w.last + 1);
    });
}

#[test]
fn a_clean_restart_opens_no_file_and_keeps_the_marker_until_the_log_changes() {
    run(async {
        fd_cache::set_shard_capacity(64);
        let d = tmp();
        let dir = d.path().join("t-0");
        let mut log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        let mut model = vec![write(&mut log, 10).await, write(&mut log, 20).await];
        let end = log.log_end_offset();
        log.close().await.unwrap();

        let opened = shard_stats().opened;
        let log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        assert_eq!(shard_stats().opened, opened, "a clean open opens no file");
        assert!(!log.active().is_open());
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.durable_offset(), end);
        assert_eq!(log.max_timestamp(), Some((end - 1, 20)));
        assert_eq!(log.recovery_report(), RecoveryReport::default());
        // Closing an untouched log writes nothing: the marker still describes it.
        let marker = std::fs::read(dir.join(".clean_shutdown")).unwrap();
        log.close().await.unwrap();
        assert_eq!(std::fs::read(dir.join(".clean_shutdown")).unwrap(), marker);
        assert_eq!(shard_stats().opened, opened, "nor does its close");

        // An append after a clean open, then a crash: the marker no longer matches the
        // `.log`, so the active segment is re-validated and the append is there.
        let mut log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        model.push(write(&mut log, 30).await);
        drop(log);
        let mut log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        assert!(log.recovery_report().segments_recovered > 0);
        assert!(!dir.join(".clean_shutdown").exists(), "a stale marker goes");
        assert_eq!(
            &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
        model.push(write(&mut log, 40).await);
        log.close().await.unwrap();
        let log = PartitionLog::open(dir, small_config()).await.unwrap();
        assert_eq!(log.recovery_report(), RecoveryReport::default());
        assert_eq!(
            &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
    });
}

#[test]
fn an_empty_marker_is_not_trusted() {
    run(async {
        let d = tmp();
        let dir = d.path().join("t-0");
        let mut log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        let model = vec![write(&mut log, 10).await];
        log.close().await.unwrap();
        // An older version's marker, or one whose content a power loss took after the log
        // was appended to: the active segment is re-validated.
        std::fs::write(dir.join(".clean_shutdown"), b"").unwrap();
        let log = PartitionLog::open(dir.clone(), small_config())
            .await
            .unwrap();
        assert!(log.recovery_report().segments_recovered > 0);
        assert!(!dir.join(".clean_shutdown").exists());
        assert_eq!(
            &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
            &concat(&model)[..]
        );
    });
}
