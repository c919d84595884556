#![allow(clippy::unwrap_used)]

use std::rc::Rc;
use std::time::Duration;

use raft::eraftpb::{Entry, HardState, Snapshot};
use raft::{GetEntriesContext, Storage, StorageError};
use storage::sim::FaultOp;
use storage::{Disk, SimClock, SimDisk};

use super::*;

const DIR: &str = "/q/voter-1";

fn entry(index: u64, term: u64) -> Entry {
    Entry {
        index,
        term,
        data: format!("e{index}t{term}").into_bytes().into(),
        ..Default::default()
    }
}

fn entries(from: u64, to: u64, term: u64) -> Vec<Entry> {
    (from..=to).map(|i| entry(i, term)).collect()
}

fn hs(term: u64, vote: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote,
        commit,
        ..Default::default()
    }
}

struct Env {
    sim: Rc<SimDisk>,
    disk: Disk,
    clock: Rc<SimClock>,
}

fn env(seed: u64) -> Env {
    let sim = SimDisk::new(seed);
    let clock = SimClock::new(0);
    sim.set_sync_latency(&clock, Duration::from_micros(100), Duration::from_millis(1));
    Env {
        disk: Disk::Sim(sim.clone()),
        sim,
        clock,
    }
}

impl Env {
    fn open(&self) -> Result<LogStore> {
        self.clock
            .block_on(LogStore::open(&self.disk, DIR.as_ref(), &[1, 2, 3]))
    }
    fn run<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.clock.block_on(f)
    }
}

fn terms(s: &LogStore) -> Vec<(u64, u64)> {
    s.entries_held().iter().map(|e| (e.index, e.term)).collect()
}

#[test]
fn reopen_recovers_entries_hard_state_and_conf_state() {
    let e = env(1);
    let mut s = e.open().unwrap();
    assert_eq!(s.conf_state().voters, vec![1, 2, 3]);
    e.run(s.persist(&entries(1, 5, 1), Some(&hs(1, 2, 3))))
        .unwrap();
    // A conflicting suffix from 4 on is replaced (logically: the file only grows).
    e.run(s.persist(&entries(4, 6, 2), Some(&hs(2, 2, 4))))
        .unwrap();
    s.set_commit(5);
    e.run(s.append(&[entry(7, 2)])).unwrap();
    let before = s.mirror.clone();
    assert_eq!(
        terms(&s),
        vec![(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2), (7, 2)]
    );
    drop(s);
    e.sim.power_loss();
    let s = e.open().unwrap();
    assert_eq!(s.mirror, before);
    assert_eq!(
        s.hard_state().commit,
        5,
        "the in-memory commit went with the next write"
    );
    assert_eq!(s.term(3).unwrap(), 1);
    assert_eq!(s.term(7).unwrap(), 2);
    assert!(matches!(
        s.term(8),
        Err(raft::Error::Store(StorageError::Unavailable))
    ));
    let got = s
        .entries(2, 5, None, GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(got, vec![entry(2, 1), entry(3, 1), entry(4, 2)]);
}

#[test]
fn appends_that_do_not_continue_the_log_are_refused() {
    let e = env(2);
    let mut s = e.open().unwrap();
    e.run(s.append(&entries(1, 3, 1))).unwrap();
    assert!(matches!(
        e.run(s.append(&[entry(5, 1)])),
        Err(LogStoreError::NotContiguous { .. })
    ));
    assert!(matches!(
        e.run(s.append(&[entry(4, 1), entry(6, 1)])),
        Err(LogStoreError::NotContiguous { .. })
    ));
    let mut big = entry(4, 1);
    big.data = vec![0; MAX_ENTRY_BYTES + 1].into();
    assert!(matches!(
        e.run(s.append(&[big])),
        Err(LogStoreError::EntryTooLarge { .. })
    ));
    assert_eq!(s.last_index(), 3);
}

/// A crash in the middle of an append leaves part of a frame at the end: reopening
/// truncates it (and only it), durably.
#[test]
fn torn_tail_is_truncated() {
    let e = env(3);
    let mut s = e.open().unwrap();
    e.run(s.persist(&entries(1, 4, 1), Some(&hs(1, 1, 2))))
        .unwrap();
    let valid = s.file_len();
    drop(s);
    // Half of the next append's frame reached the page cache, then kill -9.
    let mut frame = Vec::new();
    push_frame(&mut frame, FrameKind::Entry, &encode(&entry(5, 1)).unwrap()).unwrap();
    let path = std::path::Path::new(DIR).join(LOG_FILE);
    let (f, len) = e.disk.open(&path, false).unwrap();
    f.write_at(&frame[..frame.len() / 2], len).unwrap();
    e.sim.crash();
    let s = e.open().unwrap();
    assert_eq!(s.last_index(), 4);
    assert_eq!(s.file_len(), valid);
    assert_eq!(e.disk.file_len(&path).unwrap(), valid);
    drop(s);
    e.sim.power_loss();
    let s = e.open().unwrap();
    assert_eq!(s.last_index(), 4);
    assert_eq!(s.hard_state().commit, 2);
}

/// Power loss between an append's write and its fdatasync: every outcome (kept, lost, torn)
/// recovers to the durable entries plus a prefix of the new ones, never an error.
#[test]
fn power_loss_between_append_and_fsync() {
    let (mut kept, mut lost, mut partial) = (0, 0, 0);
    for seed in 0..200 {
        let e = env(seed);
        let mut s = e.open().unwrap();
        e.run(s.persist(&entries(1, 3, 1), Some(&hs(1, 1, 3))))
            .unwrap();
        e.sim.fail_nth(FaultOp::Sync, 0, libc_eio());
        assert!(e.run(s.append(&entries(4, 9, 1))).is_err());
        assert!(matches!(
            e.run(s.append(&entries(4, 4, 1))),
            Err(LogStoreError::Poisoned)
        ));
        drop(s);
        e.sim.power_loss();
        let s = e.open().unwrap();
        let last = s.last_index();
        assert!((3..=9).contains(&last), "seed {seed}: last {last}");
        assert_eq!(terms(&s), (1..=last).map(|i| (i, 1)).collect::<Vec<_>>());
        match last {
            9 => kept += 1,
            3 => lost += 1,
            _ => partial += 1,
        }
    }
    assert!(
        kept > 0 && lost > 0 && partial > 0,
        "{kept} {lost} {partial}"
    );
}

/// After a kill -9 between write and fdatasync, the reopened store has read the unsynced
/// append back from the page cache; raft will treat it as persisted, so the open itself must
/// make it durable: a power loss right after the reopen keeps it.
#[test]
fn reopen_after_crash_makes_what_it_read_durable() {
    for seed in 0..50 {
        let e = env(seed);
        let mut s = e.open().unwrap();
        e.run(s.append(&entries(1, 2, 1))).unwrap();
        e.sim.fail_nth(FaultOp::Sync, 0, libc_eio());
        assert!(e.run(s.append(&entries(3, 6, 1))).is_err());
        drop(s);
        e.sim.crash();
        let s = e.open().unwrap();
        assert_eq!(s.last_index(), 6);
        drop(s);
        e.sim.power_loss();
        let s = e.open().unwrap();
        assert_eq!(s.last_index(), 6, "seed {seed}");
    }
}

#[test]
fn corruption_before_the_tail_is_an_error() {
    let e = env(4);
    let mut s = e.open().unwrap();
    e.run(s.persist(&entries(1, 5, 1), Some(&hs(1, 1, 5))))
        .unwrap();
    drop(s);
    let path = std::path::Path::new(DIR).join(LOG_FILE);
    let mut bytes = e.disk.read_file(&path).unwrap();
    // A bit flips inside the second frame's payload (the first entry).
    let second = bytes.len() / 3;
    bytes[second] ^= 0x40;
    e.disk.write_file(&path, &bytes).unwrap();
    match e.open() {
        Err(LogStoreError::Corrupt { offset, .. }) => assert!(offset <= second as u64),
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, the store opened"),
    }
}

#[test]
fn commit_past_the_log_is_an_error() {
    let e = env(5);
    let mut s = e.open().unwrap();
    e.run(s.persist(&entries(1, 3, 1), Some(&hs(1, 1, 9))))
        .unwrap();
    drop(s);
    assert!(matches!(
        e.open(),
        Err(LogStoreError::CommitBeyondLog {
            commit: 9,
            last_index: 3
        })
    ));
}

#[test]
fn compaction_survives_reopen_and_power_loss() {
    let e = env(6);
    let mut s = e.open().unwrap();
    e.run(s.persist(&entries(1, 10, 1), Some(&hs(1, 1, 8))))
        .unwrap();
    let before_len = s.file_len();
    assert!(matches!(
        e.run(s.compact(9, 1, b"too far".to_vec())),
        Err(LogStoreError::BadCompaction { .. })
    ));
    e.run(s.compact(6, 1, b"state at 6".to_vec())).unwrap();
    assert_eq!((s.first_index(), s.last_index()), (7, 10));
    assert!(s.file_len() < before_len);
    assert!(matches!(
        s.term(5),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    assert_eq!(s.term(6).unwrap(), 1);
    assert!(matches!(
        s.entries(6, 8, None, GetEntriesContext::empty(false)),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    e.run(s.append(&[entry(11, 2)])).unwrap();
    let before = s.mirror.clone();
    drop(s);
    e.sim.power_loss();
    let s = e.open().unwrap();
    assert_eq!(s.mirror, before);
    let snap = s.snapshot(6, 2).unwrap();
    assert_eq!(&snap.data[..], b"state at 6");
    assert_eq!(snap.get_metadata().get_conf_state().voters, vec![1, 2, 3]);
    assert!(matches!(
        s.snapshot(7, 2),
        Err(raft::Error::Store(
            StorageError::SnapshotTemporarilyUnavailable
        ))
    ));
}

/// A compaction that fails before its rename leaves the old log in force.
#[test]
fn failed_compaction_keeps_the_old_log() {
    let e = env(7);
    let mut s = e.open().unwrap();
    e.run(s.persist(&entries(1, 6, 1), Some(&hs(1, 1, 6))))
        .unwrap();
    let before = s.mirror.clone();
    e.sim.fail_nth(FaultOp::Rename, 0, libc_eio());
    assert!(e.run(s.compact(4, 1, b"s".to_vec())).is_err());
    drop(s);
    e.sim.power_loss();
    let s = e.open().unwrap();
    assert_eq!(s.mirror, before);
    assert!(!e
        .disk
        .exists(&std::path::Path::new(DIR).join("raft.log.tmp")));
}

#[test]
fn a_snapshot_from_the_leader_replaces_the_log() {
    let e = env(8);
    let mut s = e.open().unwrap();
    e.run(s.persist(&entries(1, 5, 1), Some(&hs(1, 1, 3))))
        .unwrap();
    let mut snap = Snapshot {
        data: b"leader state".to_vec().into(),
        ..Default::default()
    };
    snap.mut_metadata().index = 8;
    snap.mut_metadata().term = 2;
    snap.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
    e.run(s.apply_snapshot(snap.clone())).unwrap();
    assert_eq!((s.first_index(), s.last_index()), (9, 8));
    assert_eq!(s.hard_state().commit, 8);
    e.run(s.append(&[entry(9, 2)])).unwrap();
    let mut old = snap.clone();
    old.mut_metadata().index = 7;
    assert!(matches!(
        e.run(s.apply_snapshot(old)),
        Err(LogStoreError::SnapshotOutOfDate { .. })
    ));
    let before = s.mirror.clone();
    drop(s);
    e.sim.power_loss();
    let s = e.open().unwrap();
    assert_eq!(s.mirror, before);
    assert_eq!(
        terms(&s),
        vec![(9, 2)],
        "the old entries 6.. are gone for good"
    );
}

fn libc_eio() -> i32 {
    5 // EIO
}
