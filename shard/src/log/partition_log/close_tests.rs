//! `PartitionLog::close_all` (a shard's shutdown) on the simulated disk: a power loss right
//! after it, or after either of its file-system syncs failed, loses nothing it was given.

use std::path::PathBuf;
use std::rc::Rc;

use super::tests::*;
use super::*;
use crate::config::LogConfig;
use crate::log::checkpoint;
use crate::log::test_util::{run, sim_env};
use crate::storage::sim::FaultOp;
use crate::storage::{Env, SimDisk};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1_500,
        index_interval_bytes: 100,
        ..small_config()
    }
}

const LOGS: usize = 4;

/// `LOGS` logs, each written a different amount (the first not at all, some across segment
/// rolls), half of each synced; closed with `close_all` after `fail` (the nth file-system
/// sync fails), then a power loss. Returns each log's directory, written batches and end.
async fn write_and_close(
    seed: u64,
    fail: Option<u64>,
) -> (Rc<SimDisk>, Env, Vec<(PathBuf, Vec<Written>, i64)>) {
    let (disk, env) = sim_env(seed);
    let mut logs = Vec::new();
    let mut wrote = Vec::new();
    for i in 0..LOGS {
        let dir = PathBuf::from(format!("/sim/t-{i}"));
        let mut log = PartitionLog::open_in(env.clone(), dir.clone(), config())
            .await
            .unwrap();
        let batches = i * (3 + seed as usize % 5) * 2;
        let mut model = Vec::new();
        for b in 0..batches {
            model.push(append(&mut log, 1 + b % 3, 60, b as i64));
            if b + 1 == batches / 2 {
                log.sync().await.unwrap();
            }
        }
        wrote.push((dir, model, log.log_end_offset()));
        logs.push(log);
    }
    if let Some(n) = fail {
        disk.fail_nth(FaultOp::Sync, n, libc::EIO);
    }
    PartitionLog::close_all(logs).await;
    disk.power_loss();
    (disk, env, wrote)
}

#[test]
fn close_all_then_a_power_loss_reopens_every_log_clean_and_whole() {
    run(async {
        for seed in 0..8 {
            let (_disk, env, wrote) = write_and_close(seed, None).await;
            for (dir, model, end) in wrote {
                let log = PartitionLog::open_in(env.clone(), dir.clone(), config())
                    .await
                    .unwrap();
                assert_eq!(
                    log.recovery_report(),
                    RecoveryReport::default(),
                    "seed {seed} {}: opened clean",
                    dir.display()
                );
                assert_eq!(log.log_end_offset(), end, "seed {seed}");
                assert_eq!(
                    &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                    &concat(&model)[..],
                    "seed {seed}"
                );
            }
        }
    });
}

#[test]
fn a_failed_first_file_system_sync_leaves_no_marker_and_the_synced_records() {
    run(async {
        for seed in 0..8 {
            let (disk, env, wrote) = write_and_close(seed, Some(0)).await;
            for (dir, model, _) in wrote {
                assert!(!disk.exists(&checkpoint::clean_marker(&dir)), "seed {seed}");
                let log = PartitionLog::open_in(env.clone(), dir.clone(), config())
                    .await
                    .unwrap();
                // What the log kept is a prefix of what was written, at least the synced half.
                let kept = log.read(0, 1 << 20, i64::MAX).await.unwrap();
                let all = concat(&model);
                assert_eq!(&all[..kept.len()], &kept[..], "seed {seed}");
                let synced = model.len() / 2;
                assert!(
                    log.log_end_offset() >= model.get(synced).map_or(0, |w| w.base),
                    "seed {seed} {}: lost synced records",
                    dir.display()
                );
            }
        }
    });
}

#[test]
fn a_failed_second_file_system_sync_still_keeps_every_record() {
    run(async {
        for seed in 0..8 {
            let (_disk, env, wrote) = write_and_close(seed, Some(1)).await;
            for (dir, model, end) in wrote {
                // The markers may or may not have reached the disk; either way the data did.
                let log = PartitionLog::open_in(env.clone(), dir.clone(), config())
                    .await
                    .unwrap();
                assert_eq!(log.log_end_offset(), end, "seed {seed} {}", dir.display());
                assert_eq!(
                    &log.read(0, 1 << 20, i64::MAX).await.unwrap()[..],
                    &concat(&model)[..],
                    "seed {seed}"
                );
            }
        }
    });
}
