//! Follower tests: `append_replica`, `truncate_to`, `truncate_fully_and_start_at`, on the
//! simulated disk (power loss at every step of a truncation) and, for file ranges, the real
//! one.

use std::path::PathBuf;

use bytes::Bytes;
use wire::record_batch::{stored_batches, BatchBuilder, Compression};

use super::tests::small_config;
use super::*;
use crate::config::LogConfig;
use crate::log::test_util::{run, sim_env, tmp};
use crate::log::LogError;
use crate::storage::sim::FaultOp;
use crate::storage::{Env, Piece};

/// One batch as the leader stored it.
#[derive(Clone, Debug)]
struct Stored {
    base: i64,
    last: i64,
    epoch: i32,
    bytes: Bytes,
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 100,
        producer_id_expiration_ms: i64::MAX,
        ..small_config()
    }
}

/// The leader's log: `n` batches (1-3 records; every other one from idempotent producer 7
/// or 9), under epochs 0, 0, 0, 2, 2, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, ... Returns its stored
/// batches.
async fn leader_batches(env: &Env, n: usize) -> Vec<Stored> {
    let mut leader = PartitionLog::open_in(env.clone(), PathBuf::from("/sim/leader-0"), config())
        .await
        .unwrap();
    let mut seqs = [0i32; 2];
    for i in 0..n {
        let records = 1 + i % 3;
        let mut b = BatchBuilder::new(Compression::None);
        if i % 2 == 0 {
            let p = (i / 2) % 2;
            b = b.producer(7 + 2 * p as i64, 0, seqs[p]);
            seqs[p] += records as i32;
        }
        for r in 0..records {
            b = b.push(
                Some(format!("k{i}-{r}").as_bytes()),
                Some(&[b'v'; 40]),
                &[],
                1_000 + i as i64,
            );
        }
        let bytes = b.build();
        let h = wire::record_batch::validate_batch(&bytes).unwrap();
        let epoch = match i {
            0..=2 => 0,
            3..=4 => 2,
            // Epoch 7 from batch 13 on: a truncation past batch 13 changes no epoch entry.
            _ => 5 + (i.min(13) as i32 - 5) / 4,
        };
        leader.append(&bytes, &h, epoch).unwrap();
    }
    let all = leader.read(0, 1 << 30, i64::MAX).await.unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    for r in stored_batches(&all) {
        let (h, b) = r.unwrap();
        out.push(Stored {
            base: h.base_offset,
            last: h.last_offset(),
            epoch: h.partition_leader_epoch,
            bytes: all.slice(pos..pos + b.len()),
        });
        pos += b.len();
    }
    assert_eq!(out.len(), n);
    out
}

fn concat(batches: &[Stored]) -> Vec<u8> {
    batches
        .iter()
        .flat_map(|b| b.bytes.iter().copied())
        .collect()
}

async fn all_bytes(log: &PartitionLog) -> Vec<u8> {
    log.read(log.log_start_offset(), 1 << 30, i64::MAX)
        .await
        .unwrap()
        .to_vec()
}

/// Kafka's epoch cache for these batches: (epoch, first offset) at each epoch change.
fn epochs_of(batches: &[Stored]) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = Vec::new();
    for b in batches {
        if out.last().is_none_or(|&(e, _)| e != b.epoch) {
            out.push((b.epoch, b.base));
        }
    }
    out
}

async fn open_follower(env: &Env, name: &str) -> PartitionLog {
    PartitionLog::open_in(env.clone(), PathBuf::from(format!("/sim/{name}")), config())
        .await
        .unwrap()
}

/// A follower holding exactly `batches` (appended as the leader stored them).
async fn follower_with(env: &Env, name: &str, batches: &[Stored]) -> PartitionLog {
    let mut log = open_follower(env, name).await;
    log.append_replica(&concat(batches)).unwrap();
    log
}

#[test]
fn append_replica_stores_the_leaders_bytes() {
    run(async {
        let (_disk, env) = sim_env(1);
        let batches = leader_batches(&env, 24).await;
        let mut log = open_follower(&env, "f-0").await;
        // Half, then all of it again (the first half is held: skipped), ending in a partial
        // batch (a fetch response may end in one).
        let half = concat(&batches[..12]);
        let r = log.append_replica(&half).unwrap();
        assert_eq!((r.appended, r.skipped), (12, 0));
        assert_eq!(r.log_end_offset, batches[11].last + 1);
        let mut fetched = concat(&batches);
        let whole = fetched.len();
        fetched.extend_from_slice(&batches[0].bytes[..30]);
        let r = log.append_replica(&fetched).unwrap();
        assert_eq!((r.appended, r.skipped, r.valid_bytes), (12, 12, whole));
        assert_eq!(r.last_epoch, batches[23].epoch);
        assert_eq!(r.log_end_offset, batches[23].last + 1);
        assert!(log.segment_count() > 2, "rolls like a leader append");
        // Byte for byte the leader's, offsets, epochs, CRCs untouched.
        assert_eq!(all_bytes(&log).await, concat(&batches));
        for b in &batches {
            let got = log.read(b.base, 1, i64::MAX).await.unwrap();
            assert_eq!(got, b.bytes);
        }
        // Epochs and producers as the leader's batches say.
        assert_eq!(log.leader_epoch_entries(), epochs_of(&batches));
        let leader = PartitionLog::open_in(env.clone(), PathBuf::from("/sim/leader-0"), config())
            .await
            .unwrap();
        assert_eq!(log.producers(), leader.producers());
        assert_eq!(log.producers().len(), 2);
        // Reopened (crash: no close): the same log.
        drop(log);
        let log = open_follower(&env, "f-0").await;
        assert_eq!(all_bytes(&log).await, concat(&batches));
        assert_eq!(log.leader_epoch_entries(), epochs_of(&batches));
        assert_eq!(log.producers(), leader.producers());
    });
}

#[test]
fn append_replica_refuses_gaps_overlaps_and_corruption() {
    run(async {
        let (_disk, env) = sim_env(2);
        let batches = leader_batches(&env, 6).await;
        let mut log = follower_with(&env, "f-0", &batches[..2]).await;
        let end = log.log_end_offset();
        // A gap after the log end.
        let e = log.append_replica(&batches[3].bytes).unwrap_err();
        assert!(
            matches!(e, LogError::ReplicaOffsetMismatch { log_end, base_offset, .. } if log_end == end && base_offset == batches[3].base),
            "{e}"
        );
        // A batch straddling the log end (the leader's batch 1 and 2 merged into one range).
        let mut straddle = batches[1].bytes.to_vec();
        straddle[..8].copy_from_slice(&(end - 1).to_be_bytes()); // base offset: outside the CRC
        let e = log.append_replica(&straddle).unwrap_err();
        assert!(matches!(e, LogError::ReplicaOffsetMismatch { .. }), "{e}");
        // A flipped record byte: CRC.
        let mut bad = batches[2].bytes.to_vec();
        let at = bad.len() - 3;
        bad[at] ^= 1;
        assert!(matches!(
            log.append_replica(&bad).unwrap_err(),
            LogError::InvalidBatch(_)
        ));
        assert_eq!(log.log_end_offset(), end);
        // Only a partial batch: nothing, no error.
        let r = log.append_replica(&batches[2].bytes[..20]).unwrap();
        assert_eq!((r.appended, r.valid_bytes, r.last_epoch), (0, 0, -1));
        assert!(log.append_replica(&[]).is_ok());
        // The right one still goes in.
        let r = log.append_replica(&batches[2].bytes).unwrap();
        assert_eq!(r.appended, 1);
        assert_eq!(all_bytes(&log).await, concat(&batches[..3]));
    });
}

#[test]
fn a_compacted_followers_log_takes_the_leaders_offset_gaps_and_recovers_with_them() {
    run(async {
        let (disk, env) = sim_env(3);
        let batches = leader_batches(&env, 6).await;
        let compacted = LogConfig {
            cleanup_compact: true,
            ..config()
        };
        let dir = PathBuf::from("/sim/fc-0");
        let mut log = PartitionLog::open_in(env.clone(), dir.clone(), compacted.clone())
            .await
            .unwrap();
        log.append_replica(&concat(&batches[..2])).unwrap();
        // Batch 2 compacted away on the leader: batch 3 follows a gap.
        let mut thinned = concat(&batches[3..]);
        let r = log.append_replica(&thinned).unwrap();
        assert_eq!(r.appended, 3);
        assert_eq!(log.log_end_offset(), batches[5].last + 1);
        let got = log.read(batches[2].base, 1, i64::MAX).await.unwrap();
        assert_eq!(
            got, batches[3].bytes,
            "a read in the gap finds the next batch"
        );
        log.sync().await.unwrap();
        // Power loss: recovery accepts the gap (the log is marked as compacted).
        drop(log);
        disk.power_loss();
        let log = PartitionLog::open_in(env.clone(), dir, compacted)
            .await
            .unwrap();
        assert_eq!(log.log_end_offset(), batches[5].last + 1);
        let mut want = concat(&batches[..2]);
        want.append(&mut thinned);
        assert_eq!(all_bytes(&log).await, want);
    });
}

/// Where a truncation cuts, for a follower holding `batches`: keep batches whose last
/// offset is below `offset`.
fn kept(batches: &[Stored], offset: i64) -> &[Stored] {
    let n = batches.iter().take_while(|b| b.last < offset).count();
    &batches[..n]
}

/// Checks `log` holds exactly `want`: bytes, end, epochs, producers (against a follower that
/// never had the removed batches), and that it still takes the removed batches again.
async fn check_truncated(env: &Env, log: &mut PartitionLog, want: &[Stored], all: &[Stored]) {
    let end = want.last().map_or(0, |b| b.last + 1);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(all_bytes(log).await, concat(want));
    assert_eq!(log.leader_epoch_entries(), epochs_of(want));
    let reference = follower_with(env, "reference-0", want).await;
    assert_eq!(log.producers(), reference.producers());
    reference.delete().await.unwrap();
    // Appends continue at the new end.
    let r = log.append_replica(&concat(all)).unwrap();
    assert_eq!(r.appended, all.len() - want.len());
    assert_eq!(all_bytes(log).await, concat(all));
    assert_eq!(
        log.producers(),
        follower_with(env, "again-0", all).await.producers()
    );
}

#[test]
fn truncate_to_cuts_at_batch_boundaries() {
    run(async {
        let (_disk, env) = sim_env(3);
        let batches = leader_batches(&env, 32).await;
        let log = follower_with(&env, "probe-0", &batches).await;
        let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset).collect();
        assert!(bases.len() >= 4, "{bases:?}");
        let active = *bases.last().unwrap();
        let end = log.log_end_offset();
        drop(log);
        let in_active: Vec<i64> = batches
            .iter()
            .filter(|b| b.base >= active)
            .map(|b| b.base)
            .collect();
        assert!(in_active.len() >= 2, "{in_active:?}");
        let mid_active = in_active[1];
        let mid_old = batches.iter().find(|b| b.base > bases[1]).unwrap().base;
        let straddle = batches.iter().find(|b| b.last > b.base).unwrap().base + 1;
        let cases = [
            ("middle of the active segment", mid_active),
            ("middle of an older segment", mid_old),
            ("at a segment base", bases[2]),
            ("at the active segment's base", active),
            ("inside a batch", straddle),
            ("to zero", 0),
            ("beyond the end", end + 5),
            ("at the end", end),
        ];
        for (i, (what, offset)) in cases.into_iter().enumerate() {
            let name = format!("f-{i}");
            let mut log = follower_with(&env, &name, &batches).await;
            let want = kept(&batches, offset);
            let removed = log.truncate_to(offset).unwrap();
            assert_eq!(removed, offset < end, "{what}");
            let new_end = want.last().map_or(0, |b| b.last + 1);
            assert_eq!(log.log_end_offset(), new_end, "{what}");
            assert_eq!(all_bytes(&log).await, concat(want), "{what}");
            assert!(
                log.segments().iter().all(|s| s.base_offset <= new_end),
                "{what}"
            );
            // Before any reopen: epochs and producers as a log that never had the rest.
            assert_eq!(log.leader_epoch_entries(), epochs_of(want), "{what}");
            let reference = follower_with(&env, &format!("ref-{i}"), want).await;
            assert_eq!(log.producers(), reference.producers(), "{what}");
            assert!(!log.producers().is_empty() || want.is_empty(), "{what}");
            let names: Vec<String> = env
                .disk
                .read_dir(&PathBuf::from(format!("/sim/{name}")))
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            assert!(
                !names
                    .iter()
                    .any(|n| n.ends_with(".swap") || n == "truncate-offset"),
                "{what}: {names:?}"
            );
            // Reopen after a crash, and after a clean close: the same log.
            drop(log);
            let log = open_follower(&env, &name).await;
            assert_eq!(all_bytes(&log).await, concat(want), "{what}");
            log.close().await.unwrap();
            let mut log = open_follower(&env, &name).await;
            check_truncated(&env, &mut log, want, &batches).await;
        }
    });
}

#[test]
fn truncate_fully_and_start_at_restarts_the_log() {
    run(async {
        let (_disk, env) = sim_env(4);
        let batches = leader_batches(&env, 12).await;
        for (i, offset) in [0i64, batches[4].base, 1_000].into_iter().enumerate() {
            let name = format!("f-{i}");
            let mut log = follower_with(&env, &name, &batches).await;
            log.truncate_fully_and_start_at(offset).unwrap();
            let check = |log: &PartitionLog| {
                assert_eq!(
                    (log.log_start_offset(), log.log_end_offset()),
                    (offset, offset)
                );
                assert!(log.leader_epoch_entries().is_empty());
                assert!(log.producers().is_empty());
                assert_eq!(log.segment_count(), 1);
            };
            check(&log);
            drop(log);
            let mut log = open_follower(&env, &name).await;
            check(&log);
            // The leader's batches from `offset` on follow.
            let from: Vec<Stored> = batches
                .iter()
                .filter(|b| b.base >= offset)
                .cloned()
                .collect();
            let r = log.append_replica(&concat(&from)).unwrap();
            assert_eq!(r.appended, from.len());
            assert_eq!(all_bytes(&log).await, concat(&from));
            if offset == 0 {
                assert_eq!(log.leader_epoch_entries(), epochs_of(&batches));
            }
        }
    });
}

/// A fetch holding a file range of the active segment before a truncation still reads the
/// old bytes after it: the truncation wrote a new file instead of shrinking the old one.
#[test]
fn file_ranges_taken_before_a_truncation_keep_their_bytes() {
    use std::os::unix::fs::FileExt;
    run(async {
        let d = tmp();
        let (_disk, sim) = sim_env(5);
        let batches = leader_batches(&sim, 10).await;
        let cfg = LogConfig {
            segment_bytes: 1 << 20,
            ..config()
        };
        let mut log = PartitionLog::open(d.path().join("f-0"), cfg).await.unwrap();
        log.append_replica(&concat(&batches)).unwrap();
        let pieces = log.read_ranges(0, 1 << 20, i64::MAX, true).await.unwrap();
        let Piece::File(range) = &pieces[0] else {
            panic!("a file range on the real disk");
        };
        let before = concat(&batches);
        assert_eq!(range.len(), before.len() as u64);
        assert!(log.truncate_to(batches[3].base).unwrap());
        assert_eq!(all_bytes(&log).await, concat(&batches[..3]));
        let file = std::fs::File::from(range.shared_fd().try_clone().unwrap());
        let mut got = vec![0u8; range.len() as usize];
        file.read_exact_at(&mut got, range.pos()).unwrap();
        assert_eq!(got, before);
        // New reads see the new file.
        let pieces = log.read_ranges(0, 1 << 20, i64::MAX, true).await.unwrap();
        let Piece::File(range) = &pieces[0] else {
            panic!("a file range");
        };
        assert_eq!(range.len(), concat(&batches[..3]).len() as u64);
    });
}

/// Power loss at every step of a truncation: the `n`-th call of each kind of disk operation
/// fails (the truncation stops there, as if the power went just before it), then the power
/// goes. The log reopens to the old one or the truncated one, never anything else, and to
/// the truncated one whenever the truncation returned Ok.
#[test]
fn power_loss_at_every_step_of_a_truncation() {
    run(async {
        let ops = [
            FaultOp::Open,
            FaultOp::Write,
            FaultOp::Read,
            FaultOp::Sync,
            FaultOp::SyncDir,
            FaultOp::Truncate,
            FaultOp::Rename,
            FaultOp::Remove,
        ];
        let mut completed = 0;
        let mut interrupted = 0;
        let mut seed = 100;
        for full in [false, true] {
            for op in ops {
                // Each step under several seeds (a power loss keeps or loses each pending
                // operation at random); more for the directory syncs, which decide what
                // metadata survives.
                let seeds = if op == FaultOp::SyncDir { 48 } else { 12 };
                for case in 0..10 * seeds {
                    let n = case / seeds;
                    seed += 1;
                    let (disk, env) = sim_env(seed);
                    let batches = leader_batches(&env, 20).await;
                    let mut log = follower_with(&env, "f-0", &batches).await;
                    log.sync().await.unwrap();
                    // Where epochs end (the epoch file changes too), and inside the last epoch.
                    let offset = batches[if seed % 2 == 0 { 7 } else { 15 }].base;
                    let (old, new): (&[Stored], &[Stored]) = if full {
                        (&batches, &[])
                    } else {
                        (&batches, kept(&batches, offset))
                    };
                    disk.fail_nth(op, n, libc::EIO);
                    let result = if full {
                        log.truncate_fully_and_start_at(offset).map(|()| true)
                    } else {
                        log.truncate_to(offset)
                    };
                    drop(log);
                    disk.power_loss();
                    let what = format!("full {full} op {op:?} n {n} result {result:?}");
                    let log = open_follower(&env, "f-0").await;
                    let got = all_bytes(&log).await;
                    let start = log.log_start_offset();
                    let is_new = if full {
                        (start, log.log_end_offset()) == (offset, offset)
                    } else {
                        got == concat(new) && start == 0
                    };
                    let is_old = got == concat(old) && start == 0;
                    assert!(is_new || is_old, "{what}: a log that is neither");
                    if result.is_ok() {
                        assert!(is_new, "{what}: truncation came back");
                        completed += 1;
                    } else {
                        interrupted += 1;
                    }
                    let want = if is_new { new } else { old };
                    if !full {
                        assert_eq!(log.leader_epoch_entries(), epochs_of(want), "{what}");
                    }
                    // A second power loss changes nothing (the finished truncation is
                    // durable), and appends continue.
                    drop(log);
                    disk.power_loss();
                    let mut log = open_follower(&env, "f-0").await;
                    assert_eq!(all_bytes(&log).await, got, "{what}");
                    if !full || !is_new {
                        check_truncated(&env, &mut log, want, &batches).await;
                        // What was appended after the truncation and synced survives a
                        // power loss (no truncation record comes back to cut it).
                        log.sync().await.unwrap();
                        drop(log);
                        disk.power_loss();
                        let log = open_follower(&env, "f-0").await;
                        assert_eq!(all_bytes(&log).await, concat(&batches), "{what}");
                    }
                }
            }
        }
        assert!(
            completed > 10 && interrupted > 10,
            "{completed} {interrupted}"
        );
    });
}

/// Records appended (without a roll, so without a directory sync) and synced after a
/// truncation survive a power loss: the truncation's commit record is gone durably, so no
/// reopen truncates them again.
#[test]
fn appends_after_a_truncation_survive_power_loss() {
    run(async {
        for seed in 0..8 {
            let (disk, env) = sim_env(200 + seed);
            let batches = leader_batches(&env, 10).await;
            let cfg = LogConfig {
                segment_bytes: 1 << 20,
                ..config()
            };
            let dir = PathBuf::from("/sim/f-0");
            let mut log = PartitionLog::open_in(env.clone(), dir.clone(), cfg.clone())
                .await
                .unwrap();
            log.append_replica(&concat(&batches)).unwrap();
            log.sync().await.unwrap();
            // Batch 6 has batch 5's epoch: appending it again writes no epoch file.
            assert_eq!(batches[5].epoch, batches[6].epoch);
            assert!(log.truncate_to(batches[6].base).unwrap());
            log.append_replica(&batches[6].bytes).unwrap();
            log.sync().await.unwrap();
            drop(log);
            disk.power_loss();
            let log = PartitionLog::open_in(env.clone(), dir, cfg).await.unwrap();
            assert_eq!(all_bytes(&log).await, concat(&batches[..7]), "seed {seed}");
        }
    });
}

/// The leader-epoch checkpoint is durable once it holds more than its first entry: a power
/// loss after a follower took new epochs keeps them all.
#[test]
fn leader_epochs_survive_power_loss() {
    run(async {
        for seed in 0..8 {
            let (disk, env) = sim_env(300 + seed);
            let batches = leader_batches(&env, 12).await;
            let mut log = follower_with(&env, "f-0", &batches).await;
            log.sync().await.unwrap();
            drop(log);
            disk.power_loss();
            let log = open_follower(&env, "f-0").await;
            assert_eq!(all_bytes(&log).await, concat(&batches), "seed {seed}");
            assert_eq!(
                log.leader_epoch_entries(),
                epochs_of(&batches),
                "seed {seed}"
            );
        }
    });
}

/// Creating a partition stays cheap: the epoch file's first entry is written without an
/// fsync (page cache only); the next change is synced.
#[test]
fn first_epoch_entry_is_not_synced() {
    run(async {
        let (disk, env) = sim_env(400);
        let mut log = open_follower(&env, "f-0").await;
        let path = PathBuf::from("/sim/f-0").join(crate::log::leader_epoch::LEADER_EPOCH_FILE);
        log.assign_leader_epoch(3).unwrap();
        assert!(disk.unsynced_ops(&path) > 0, "first entry: not synced");
        log.assign_leader_epoch(4).unwrap();
        assert_eq!(disk.unsynced_ops(&path), 0, "a leader change: synced");
        assert_eq!(log.leader_epoch_entries(), vec![(4, 0)]);
    });
}

#[test]
fn truncating_at_the_end_drops_an_epoch_that_led_nothing() {
    // A follower that led epoch 9 and appended nothing before losing leadership: its cache
    // ends with (9, end), which its next leader never had. Truncation to the end (the
    // DivergingEpoch answer) removes the entry, as Kafka's `truncateTo` does; kept, it is
    // sent again and diverges again on every fetch.
    run(async {
        let (_disk, env) = sim_env(5);
        let batches = leader_batches(&env, 8).await;
        let mut log = follower_with(&env, "led-0", &batches).await;
        let end = log.log_end_offset();
        log.assign_leader_epoch(9).unwrap();
        assert_eq!(log.leader_epoch_entries().last(), Some(&(9, end)));
        assert!(!log.truncate_to(end).unwrap(), "no records removed");
        assert_eq!(log.leader_epoch_entries(), epochs_of(&batches));
        assert_eq!(log.log_end_offset(), end);
        // Beyond the end, the same.
        log.assign_leader_epoch(10).unwrap();
        assert!(!log.truncate_to(end + 3).unwrap());
        assert_eq!(log.leader_epoch_entries(), epochs_of(&batches));
        // Durably: a reopened log agrees.
        drop(log);
        let log = PartitionLog::open_in(env.clone(), PathBuf::from("/sim/led-0"), config())
            .await
            .unwrap();
        assert_eq!(log.leader_epoch_entries(), epochs_of(&batches));
    });
}
