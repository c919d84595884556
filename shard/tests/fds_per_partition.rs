//! The file descriptors of partition logs are bounded by the shard's fd cache
//! (`log.fd.cache.size`), not by the partition count: every log file is opened on demand
//! through it, an idle partition holds none of its own, and a clean restart opens no file.
//! (Before, each partition held two, the active `.log` and the recovery point, so 10,000
//! partitions exhausted a 20,000 fd limit.)
//!
//! Counts the entries of /proc/self/fd that point into the test's own directory, so tests
//! running in parallel threads do not disturb each other (each test's thread has its own
//! shard cache, see `shard::log::fd_cache`).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::path::Path;
use std::time::Duration;

use shard::log::fd_cache;
use shard::{LogConfig, PartitionLog, RecoveryReport};
use wire::record_batch::{validate_batch, BatchBuilder, Compression};

fn fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

fn batch(value: u8) -> bytes::Bytes {
    BatchBuilder::new(Compression::None)
        .push(Some(b"k"), Some(&[value; 1000]), &[], 1_700_000_000_000)
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

async fn fill(log: &mut PartitionLog, batches: usize, value: u8) {
    let bytes = batch(value);
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
            fill(&mut log, 40, 1).await;
            assert!(
                log.segment_count() >= 10,
                "segments: {}",
                log.segment_count()
            );
            settle().await;
            // The active `.log` and the recovery point, cached (the cache is far from full);
            // rolled segments left the cache when they were synced.
            let idle = fds_under(&root);
            assert!(
                idle <= 2,
                "a partition with {} segments holds {idle} fds",
                log.segment_count()
            );

            // Reading old segments opens their .log through the cache, and works.
            let read = log.read(0, 64 << 10, i64::MAX).await.unwrap();
            assert!(
                read.len() > 4096,
                "read {} bytes across segments",
                read.len()
            );
            let (ts_offset, _) = log.offset_for_timestamp(0).await.unwrap().unwrap();
            assert_eq!(ts_offset, 0);

            // A clean close leaves nothing open; a clean restart opens nothing.
            log.close().await.unwrap();
            settle().await;
            assert_eq!(fds_under(&root), 0);
            let mut log = PartitionLog::open(path.clone(), config()).await.unwrap();
            settle().await;
            assert_eq!(fds_under(&root), 0, "after a clean restart");
            fill(&mut log, 5, 2).await;
            let end = log.log_end_offset();
            // A restart that must recover (no close).
            drop(log);
            settle().await;
            let log = PartitionLog::open(path, config()).await.unwrap();
            assert_eq!(log.log_end_offset(), end);
            drop(log);
            settle().await;
            assert_eq!(fds_under(&root), 0, "a dropped log leaves nothing open");
        });
}

/// Many more partitions than the cache holds, each written, read, closed and reopened: the
/// descriptors under the data directory never pass the cache size, and every record reads
/// back after its files were evicted and reopened.
/// The soft fd limit while `many_partitions_stay_within_the_fd_cache` closes its logs: well
/// above the cache and this process's other fds, well below three per partition.
const FD_LIMIT: u64 = 1_024;

/// Sets the soft RLIMIT_NOFILE to `soft` (never above the hard one); returns the old one.
fn lower_fd_limit(soft: u64) -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with valid pointers to rlimit structs on the stack.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut old), 0);
        let new = libc::rlimit {
            rlim_cur: soft.min(old.rlim_max),
            rlim_max: old.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &new), 0);
    }
    old
}

fn restore_fd_limit(old: libc::rlimit) {
    // SAFETY: setrlimit with a valid pointer to an rlimit struct on the stack.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &old), 0);
    }
}

#[test]
fn many_partitions_stay_within_the_fd_cache() {
    const PARTITIONS: usize = 2_000;
    const CACHE: usize = 64;
    /// Logs opened at once (each new partition waits for an fsync of the directory).
    const CONCURRENT_OPENS: usize = 32;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap()
        .run(async move {
            fd_cache::set_shard_capacity(CACHE);
            let cfg = config();
            let open_all = || async {
                let mut logs = Vec::with_capacity(PARTITIONS);
                for chunk in (0..PARTITIONS).collect::<Vec<_>>().chunks(CONCURRENT_OPENS) {
                    let opens = chunk
                        .iter()
                        .map(|p| PartitionLog::open(root.join(format!("t-{p}")), cfg.clone()));
                    for log in futures::future::join_all(opens).await {
                        logs.push(log.unwrap());
                    }
                    settle().await;
                    assert!(fds_under(&root) <= CACHE, "{} fds", fds_under(&root));
                }
                logs
            };
            let mut logs = open_all().await;
            for (p, log) in logs.iter_mut().enumerate() {
                fill(log, 1, p as u8).await;
                if p % 100 == 0 {
                    settle().await;
                    assert!(fds_under(&root) <= CACHE, "{} fds", fds_under(&root));
                }
            }
            settle().await;
            let fds = fds_under(&root);
            assert!(
                fds <= CACHE,
                "{PARTITIONS} partitions hold {fds} fds, cache {CACHE}"
            );
            let stats = fd_cache::shard_stats();
            assert!(stats.cached <= CACHE && stats.evicted > 0, "{stats:?}");
            // Closed as a shard's shutdown closes them (together, two file-system syncs),
            // under an fd limit far below three files per log: the close must not hold
            // every log's files at once (it did, and 10,000 logs under a 20,000 fd limit
            // then lost their clean-shutdown markers to EMFILE).
            let limit = lower_fd_limit(FD_LIMIT);
            PartitionLog::close_all(logs).await;
            restore_fd_limit(limit);
            settle().await;
            assert_eq!(fds_under(&root), 0);

            // A clean restart opens no file at all.
            let logs = open_all().await;
            settle().await;
            assert_eq!(fds_under(&root), 0);
            for (p, log) in logs.iter().enumerate() {
                assert_eq!(log.recovery_report(), RecoveryReport::default());
                let read = log.read(0, 1 << 20, i64::MAX).await.unwrap();
                assert_eq!(
                    read.len(),
                    batch(0).len(),
                    "partition {p}: log end {}, start {}, size {}",
                    log.log_end_offset(),
                    log.log_start_offset(),
                    log.size_bytes()
                );
                // As appended, past the 16 bytes the log patches (base offset, length, epoch).
                assert_eq!(read[16..], batch(p as u8)[16..], "partition {p}");
                if p % 100 == 0 {
                    settle().await;
                    assert!(fds_under(&root) <= CACHE, "{} fds", fds_under(&root));
                }
            }
        });
}
