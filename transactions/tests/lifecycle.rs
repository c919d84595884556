//! Named scenarios through the public API: each request as the broker's glue drives it
//! (prepare, persist by calling `complete`, write markers, `markers_written`).

use transactions::records;
use transactions::{
    append_error, Coordinator, EndStep, InitStep, Transition, TxnConfig, TxnMetadata, TxnState,
};
use wire::ErrorCode;

const TIMEOUT_MS: i32 = 60_000;

struct Pids(i64);

impl Pids {
    fn alloc(&mut self) -> impl FnMut() -> Result<i64, ErrorCode> + '_ {
        move || {
            self.0 += 1;
            Ok(self.0)
        }
    }
}

fn coordinator() -> Coordinator {
    Coordinator::new(3, TxnConfig::default())
}

/// Every record the glue persisted, to replay.
#[derive(Default)]
struct Log(Vec<(bytes::Bytes, Option<bytes::Bytes>)>);

impl Log {
    fn persist(&mut self, c: &mut Coordinator, t: Transition) {
        self.0.push(t.record());
        c.complete(t);
    }
}

fn init(c: &mut Coordinator, log: &mut Log, pids: &mut Pids, id: &str, now: i64) -> (i64, i16) {
    match c.init_producer_id(id, TIMEOUT_MS, None, now, &mut pids.alloc()) {
        InitStep::Persist(t) => {
            let answer = t.producer_id_and_epoch();
            log.persist(c, t);
            answer
        }
        other => panic!("init: {other:?}"),
    }
}

fn add(
    c: &mut Coordinator,
    log: &mut Log,
    id: &str,
    pid: i64,
    epoch: i16,
    tps: &[(&str, i32)],
    now: i64,
) {
    let tps: Vec<(String, i32)> = tps.iter().map(|(t, p)| (t.to_string(), *p)).collect();
    match c.add_partitions(id, pid, epoch, &tps, now) {
        Ok(Some(t)) => log.persist(c, t),
        Ok(None) => {}
        Err(e) => panic!("add: {e:?}"),
    }
}

fn state(c: &Coordinator, id: &str) -> TxnState {
    c.describe(id).expect("known id").state
}

fn tp(t: &str, p: i32) -> (String, i32) {
    (t.to_owned(), p)
}

#[test]
fn commit_lifecycle() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(999));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 10);
    assert_eq!((pid, epoch), (1000, 0));
    assert_eq!(state(&c, "a"), TxnState::Empty);
    add(&mut c, &mut log, "a", pid, epoch, &[("t", 0), ("t", 1)], 20);
    assert_eq!(state(&c, "a"), TxnState::Ongoing);
    assert_eq!(c.describe("a").unwrap().txn_start_timestamp, 20);
    // Already in the transaction: answered at once.
    assert_eq!(
        c.add_partitions("a", pid, epoch, &[tp("t", 0)], 25),
        Ok(None)
    );
    add(&mut c, &mut log, "a", pid, epoch, &[("u", 0)], 30);
    assert_eq!(c.describe("a").unwrap().txn_start_timestamp, 20);

    let EndStep::Prepare(t, plan) = c.end_txn("a", pid, epoch, true, 40) else {
        panic!("end")
    };
    assert_eq!(t.target.state, TxnState::PrepareCommit);
    assert!(plan.commit);
    assert_eq!(
        (
            plan.producer_id,
            plan.producer_epoch,
            plan.coordinator_epoch
        ),
        (pid, 0, 3)
    );
    assert_eq!(plan.partitions, vec![tp("t", 0), tp("t", 1), tp("u", 0)]);
    log.persist(&mut c, t);
    // Markers are being written: everything waits.
    assert_eq!(
        c.end_txn("a", pid, epoch, true, 41),
        EndStep::Err(ErrorCode::ConcurrentTransactions)
    );
    assert_eq!(
        c.add_partitions("a", pid, epoch, &[tp("t", 0)], 41),
        Err(ErrorCode::ConcurrentTransactions)
    );
    assert!(matches!(
        c.init_producer_id("a", TIMEOUT_MS, None, 41, &mut pids.alloc()),
        InitStep::Err(ErrorCode::ConcurrentTransactions)
    ));

    let t = c.markers_written("a", 50).expect("prepared");
    assert!(
        c.markers_written("a", 50).is_none(),
        "one complete transition at a time"
    );
    assert_eq!(t.target.state, TxnState::CompleteCommit);
    log.persist(&mut c, t);
    let m = c.describe("a").unwrap();
    assert!(m.partitions.is_empty());
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.txn_last_update_timestamp),
        (pid, 0, 50)
    );

    // A retried EndTxn(commit) is answered OK; an abort is a state error.
    assert_eq!(c.end_txn("a", pid, epoch, true, 60), EndStep::AlreadyDone);
    assert_eq!(
        c.end_txn("a", pid, epoch, false, 60),
        EndStep::Err(ErrorCode::InvalidTxnState)
    );
    // The next transaction starts from CompleteCommit.
    add(&mut c, &mut log, "a", pid, epoch, &[("t", 0)], 70);
    assert_eq!(c.describe("a").unwrap().txn_start_timestamp, 70);
}

#[test]
fn abort_lifecycle_and_state_errors() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    assert_eq!(
        c.end_txn("a", pid, epoch, true, 1),
        EndStep::Err(ErrorCode::InvalidTxnState)
    );
    assert_eq!(
        c.end_txn("a", pid, epoch, false, 1),
        EndStep::Err(ErrorCode::InvalidTxnState)
    );
    add(&mut c, &mut log, "a", pid, epoch, &[("t", 0)], 2);
    let EndStep::Prepare(t, plan) = c.end_txn("a", pid, epoch, false, 3) else {
        panic!()
    };
    assert!(!plan.commit);
    log.persist(&mut c, t);
    assert_eq!(
        c.end_txn("a", pid, epoch, false, 4),
        EndStep::Err(ErrorCode::ConcurrentTransactions)
    );
    let t = c.markers_written("a", 5).unwrap();
    log.persist(&mut c, t);
    assert_eq!(state(&c, "a"), TxnState::CompleteAbort);
    assert_eq!(c.end_txn("a", pid, epoch, false, 6), EndStep::AlreadyDone);
    assert_eq!(
        c.end_txn("a", pid, epoch, true, 6),
        EndStep::Err(ErrorCode::InvalidTxnState)
    );
}

#[test]
fn unknown_ids_wrong_producer_ids_and_timeouts() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    assert_eq!(
        c.add_partitions("x", 1, 0, &[tp("t", 0)], 0),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.end_txn("x", 1, 0, true, 0),
        EndStep::Err(ErrorCode::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.verify_partitions("x", 1, 0, &[tp("t", 0)]),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    assert_eq!(
        c.add_partitions("a", pid + 1, epoch, &[tp("t", 0)], 0),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.end_txn("a", pid + 1, epoch, true, 0),
        EndStep::Err(ErrorCode::InvalidProducerIdMapping)
    );
    for bad in [0, -1, 900_001] {
        assert_eq!(
            c.init_producer_id("b", bad, None, 0, &mut pids.alloc()),
            InitStep::Err(ErrorCode::InvalidTransactionTimeout)
        );
    }
    assert!(c.describe("b").is_none());
    let mut failing = || Err(ErrorCode::CoordinatorLoadInProgress);
    assert_eq!(
        c.init_producer_id("b", TIMEOUT_MS, None, 0, &mut failing),
        InitStep::Err(ErrorCode::CoordinatorLoadInProgress)
    );
}

#[test]
fn second_init_fences_the_zombie() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, old) = init(&mut c, &mut log, &mut pids, "a", 0);
    let (pid2, new) = init(&mut c, &mut log, &mut pids, "a", 1);
    assert_eq!((pid2, new), (pid, old + 1));
    assert_eq!(
        c.add_partitions("a", pid, old, &[tp("t", 0)], 2),
        Err(ErrorCode::ProducerFenced)
    );
    add(&mut c, &mut log, "a", pid, new, &[("t", 0)], 3);
    assert_eq!(
        c.end_txn("a", pid, old, true, 4),
        EndStep::Err(ErrorCode::ProducerFenced)
    );
    assert_eq!(
        c.verify_partitions("a", pid, old, &[tp("t", 0)]),
        Err(ErrorCode::ProducerFenced)
    );
    assert_eq!(
        c.verify_partitions("a", pid, new, &[tp("t", 0), tp("t", 1)]),
        Ok(vec![
            (tp("t", 0), ErrorCode::None),
            (tp("t", 1), ErrorCode::TransactionAbortable)
        ])
    );
}

#[test]
fn init_while_ongoing_aborts_with_a_bumped_epoch() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    add(&mut c, &mut log, "a", pid, epoch, &[("t", 0)], 1);
    let InitStep::AbortFirst(t, plan) =
        c.init_producer_id("a", TIMEOUT_MS, None, 2, &mut pids.alloc())
    else {
        panic!()
    };
    assert!(t.is_fence());
    assert_eq!(t.target.state, TxnState::PrepareAbort);
    assert_eq!((plan.producer_epoch, plan.commit), (epoch + 1, false));
    assert_eq!(plan.partitions, vec![tp("t", 0)]);
    // The zombie cannot end or add while (or after) the abort is persisted.
    assert_eq!(
        c.end_txn("a", pid, epoch, true, 3),
        EndStep::Err(ErrorCode::ProducerFenced)
    );
    log.persist(&mut c, t);
    assert_eq!(
        c.end_txn("a", pid, epoch, true, 3),
        EndStep::Err(ErrorCode::ProducerFenced)
    );
    assert!(matches!(
        c.init_producer_id("a", TIMEOUT_MS, None, 4, &mut pids.alloc()),
        InitStep::Err(ErrorCode::ConcurrentTransactions)
    ));
    let t = c.markers_written("a", 5).unwrap();
    log.persist(&mut c, t);
    assert_eq!(state(&c, "a"), TxnState::CompleteAbort);
    // The retry gets the epoch after the fence.
    assert_eq!(init(&mut c, &mut log, &mut pids, "a", 6), (pid, epoch + 2));
}

#[test]
fn a_failed_fence_keeps_its_bump_and_does_not_bump_twice() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    add(&mut c, &mut log, "a", pid, epoch, &[("t", 0)], 1);
    let InitStep::AbortFirst(t, _) =
        c.init_producer_id("a", TIMEOUT_MS, None, 2, &mut pids.alloc())
    else {
        panic!()
    };
    c.abandon(&t);
    let m = c.describe("a").unwrap();
    assert_eq!((m.state, m.producer_epoch), (TxnState::Ongoing, epoch + 1));
    let InitStep::AbortFirst(t, plan) =
        c.init_producer_id("a", TIMEOUT_MS, None, 3, &mut pids.alloc())
    else {
        panic!()
    };
    assert_eq!(plan.producer_epoch, epoch + 1);
    log.persist(&mut c, t);
}

#[test]
fn timed_out_transactions_are_aborted_and_fenced() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    init(&mut c, &mut log, &mut pids, "idle", 0);
    add(&mut c, &mut log, "a", pid, epoch, &[("t", 0)], 100);
    assert!(c.timed_out(100 + i64::from(TIMEOUT_MS)).is_empty());
    let mut out = c.timed_out(101 + i64::from(TIMEOUT_MS));
    assert_eq!(out.len(), 1);
    let (t, plan) = out.pop().unwrap();
    assert_eq!(
        (
            plan.transactional_id.as_str(),
            plan.producer_epoch,
            plan.commit
        ),
        ("a", epoch + 1, false)
    );
    // Pending: not offered twice, and the producer waits.
    assert!(c.timed_out(i64::MAX / 2).is_empty());
    assert_eq!(
        c.add_partitions("a", pid, epoch, &[tp("t", 1)], 0),
        Err(ErrorCode::ProducerFenced)
    );
    log.persist(&mut c, t);
    assert_eq!(
        c.end_txn("a", pid, epoch, false, 0),
        EndStep::Err(ErrorCode::ProducerFenced)
    );
    let t = c.markers_written("a", 200_000).unwrap();
    log.persist(&mut c, t);
    assert_eq!(state(&c, "a"), TxnState::CompleteAbort);
}

#[test]
fn idle_ids_expire_as_tombstones() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let week = TxnConfig::default().transactional_id_expiration_ms;
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    init(&mut c, &mut log, &mut pids, "b", 0);
    add(&mut c, &mut log, "b", 2, 0, &[("t", 0)], 0);
    assert!(c.expired_ids(week - 1).is_empty());
    let expired = c.expired_ids(week);
    assert_eq!(expired.len(), 1, "an Ongoing id never expires");
    let t = expired.into_iter().next().unwrap();
    assert_eq!(t.target.state, TxnState::Dead);
    let (key, value) = t.record();
    assert_eq!(records::decode_key(&key).unwrap().as_deref(), Some("a"));
    assert!(value.is_none());
    assert_eq!(
        c.add_partitions("a", pid, epoch, &[tp("t", 0)], 0),
        Err(ErrorCode::ConcurrentTransactions)
    );
    assert!(
        c.expired_ids(week * 2).is_empty(),
        "pending ids are not offered again"
    );
    log.persist(&mut c, t);
    assert!(c.describe("a").is_none());
    // A failed tombstone leaves the id as it was.
    let mut c2 = coordinator();
    init(&mut c2, &mut Log::default(), &mut pids, "z", 0);
    let t = c2.expired_ids(week).pop().unwrap();
    c2.abandon(&t);
    assert_eq!(state(&c2, "z"), TxnState::Empty);
}

#[test]
fn pending_transitions_answer_concurrent_transactions() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    let t = c
        .add_partitions("a", pid, epoch, &[tp("t", 0)], 1)
        .unwrap()
        .unwrap();
    assert_eq!(c.pending_state("a"), Some(TxnState::Ongoing));
    assert_eq!(
        c.add_partitions("a", pid, epoch, &[tp("t", 1)], 2),
        Err(ErrorCode::ConcurrentTransactions)
    );
    assert_eq!(
        c.end_txn("a", pid, epoch, true, 2),
        EndStep::Err(ErrorCode::ConcurrentTransactions)
    );
    assert!(matches!(
        c.init_producer_id("a", TIMEOUT_MS, None, 2, &mut pids.alloc()),
        InitStep::Err(ErrorCode::ConcurrentTransactions)
    ));
    c.abandon(&t);
    assert_eq!(state(&c, "a"), TxnState::Empty);
    assert!(c
        .add_partitions("a", pid, epoch, &[tp("t", 1)], 3)
        .unwrap()
        .is_some());
}

#[test]
fn kip_360_expected_producer_id_and_epoch() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    let step = c.init_producer_id(
        "a",
        TIMEOUT_MS,
        Some((pid + 7, epoch)),
        1,
        &mut pids.alloc(),
    );
    assert_eq!(step, InitStep::Err(ErrorCode::ProducerFenced));
    let InitStep::Persist(t) =
        c.init_producer_id("a", TIMEOUT_MS, Some((pid, epoch)), 1, &mut pids.alloc())
    else {
        panic!()
    };
    assert_eq!(t.producer_id_and_epoch(), (pid, epoch + 1));
    log.persist(&mut c, t);
    // A retry of that call (the client never saw the answer) gets the same epoch.
    let InitStep::Persist(t) =
        c.init_producer_id("a", TIMEOUT_MS, Some((pid, epoch)), 2, &mut pids.alloc())
    else {
        panic!()
    };
    assert_eq!(t.producer_id_and_epoch(), (pid, epoch + 1));
    log.persist(&mut c, t);
    // A stale epoch that is neither current nor the last is fenced.
    init(&mut c, &mut log, &mut pids, "a", 3);
    let step = c.init_producer_id("a", TIMEOUT_MS, Some((pid, epoch)), 4, &mut pids.alloc());
    assert_eq!(step, InitStep::Err(ErrorCode::ProducerFenced));
}

fn with_metadata(c: &mut Coordinator, m: &TxnMetadata) {
    let value = records::encode_value(m, 1).expect("encodable");
    c.replay(&records::encode_key(&m.transactional_id), Some(&value))
        .expect("replayable");
}

#[test]
fn epoch_exhaustion_rotates_the_producer_id() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(5000));
    let mut m = TxnMetadata::new_empty("a", 77, TIMEOUT_MS, 0);
    m.producer_epoch = i16::MAX - 2;
    m.state = TxnState::CompleteCommit;
    m.txn_start_timestamp = 0;
    with_metadata(&mut c, &m);
    assert_eq!(
        init(&mut c, &mut log, &mut pids, "a", 1),
        (77, i16::MAX - 1)
    );
    assert_eq!(init(&mut c, &mut log, &mut pids, "a", 2), (5001, 0));
    assert_eq!(c.describe("a").unwrap().previous_producer_id, 77);

    // KIP-360 with an exhausted epoch: rotation records the last epoch, and its retry (the old
    // producer id at the exhausted epoch) is answered the same.
    let mut c = coordinator();
    m.producer_epoch = i16::MAX - 1;
    with_metadata(&mut c, &m);
    let InitStep::Persist(t) = c.init_producer_id(
        "a",
        TIMEOUT_MS,
        Some((77, i16::MAX - 1)),
        3,
        &mut pids.alloc(),
    ) else {
        panic!()
    };
    assert_eq!(t.producer_id_and_epoch(), (5002, 0));
    log.persist(&mut c, t);
    let InitStep::Persist(t) = c.init_producer_id(
        "a",
        TIMEOUT_MS,
        Some((77, i16::MAX - 1)),
        4,
        &mut pids.alloc(),
    ) else {
        panic!()
    };
    assert_eq!(t.producer_id_and_epoch(), (5002, 0));
}

#[test]
fn replay_rebuilds_the_state_and_lists_unfinished_transactions() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    for (i, id) in ["done", "prepared", "open", "gone"].iter().enumerate() {
        let now = i as i64;
        let (pid, epoch) = init(&mut c, &mut log, &mut pids, id, now);
        if *id == "gone" {
            let t = c.expired_ids(now + TxnConfig::default().transactional_id_expiration_ms);
            for t in t.into_iter().filter(|t| t.transactional_id == "gone") {
                log.persist(&mut c, t);
            }
            continue;
        }
        add(
            &mut c,
            &mut log,
            id,
            pid,
            epoch,
            &[("t", i as i32), ("u", 0)],
            now,
        );
        if *id == "open" {
            continue;
        }
        let EndStep::Prepare(t, _) = c.end_txn(id, pid, epoch, true, now) else {
            panic!()
        };
        log.persist(&mut c, t);
        if *id == "done" {
            let t = c.markers_written(id, now).unwrap();
            log.persist(&mut c, t);
        }
    }
    // An unknown key version is skipped.
    let mut replayed = Coordinator::new(4, TxnConfig::default());
    replayed.replay(&[0, 9, 0, 0], Some(&[1, 2])).unwrap();
    for (key, value) in &log.0 {
        replayed.replay(key, value.as_deref()).unwrap();
    }
    let mut ids: Vec<&str> = replayed
        .list()
        .map(|m| m.transactional_id.as_str())
        .collect();
    ids.sort();
    assert_eq!(ids, ["done", "open", "prepared"]);
    for id in ids {
        let mut want = c.describe(id).unwrap().clone();
        want.last_producer_epoch = -1;
        want.previous_producer_id = -1;
        assert_eq!(replayed.describe(id), Some(&want));
    }
    let unfinished = replayed.unfinished();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].transactional_id, "prepared");
    assert_eq!(unfinished[0].coordinator_epoch, 4);
    assert_eq!(unfinished[0].partitions, vec![tp("t", 1), tp("u", 0)]);
    let t = replayed.markers_written("prepared", 10).unwrap();
    replayed.complete(t);
    assert_eq!(state(&replayed, "prepared"), TxnState::CompleteCommit);
    assert!(replayed.unfinished().is_empty());
    assert!(replayed
        .replay(&[0, 0, 0, 1, b'x'], Some(&[0, 0, 1]))
        .is_err());
}

#[test]
fn transaction_version_2_bumps_the_epoch_at_every_end() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let (pid, epoch) = init(&mut c, &mut log, &mut pids, "a", 0);
    let t = c
        .add_partitions_versioned("a", pid, epoch, &[tp("t", 0)], 2, 1)
        .unwrap()
        .unwrap();
    assert_eq!(t.value_version, 1);
    log.persist(&mut c, t);
    let EndStep::Prepare(t, plan) =
        c.end_txn_versioned("a", pid, epoch, true, 2, 2, &mut pids.alloc())
    else {
        panic!()
    };
    assert_eq!(t.producer_id_and_epoch(), (pid, epoch + 1));
    assert_eq!(plan.producer_epoch, epoch + 1);
    log.persist(&mut c, t);
    let retry = c.end_txn_versioned("a", pid, epoch, true, 2, 3, &mut pids.alloc());
    assert_eq!(retry, EndStep::Err(ErrorCode::ConcurrentTransactions));
    let t = c.markers_written("a", 4).unwrap();
    log.persist(&mut c, t);
    let retry = c.end_txn_versioned("a", pid, epoch, true, 2, 5, &mut pids.alloc());
    assert_eq!(retry, EndStep::AlreadyDone);
    let retry = c.end_txn_versioned("a", pid, epoch, false, 2, 5, &mut pids.alloc());
    assert_eq!(retry, EndStep::Err(ErrorCode::InvalidTxnState));
    // An abort with no transaction open is allowed in TV2 and bumps again.
    let EndStep::Prepare(t, plan) =
        c.end_txn_versioned("a", pid, epoch + 1, false, 2, 6, &mut pids.alloc())
    else {
        panic!()
    };
    assert!(plan.partitions.is_empty());
    assert_eq!(t.target.txn_start_timestamp, 6);
    log.persist(&mut c, t);
    let t = c.markers_written("a", 7).unwrap();
    log.persist(&mut c, t);
    let m = c.describe("a").unwrap();
    assert_eq!(
        (m.state, m.producer_epoch, m.client_transaction_version),
        (TxnState::CompleteAbort, epoch + 2, 2)
    );
}

#[test]
fn transaction_version_2_epoch_overflow_moves_to_the_next_producer_id() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(900));
    let mut m = TxnMetadata::new_empty("a", 77, TIMEOUT_MS, 0);
    m.producer_epoch = i16::MAX - 1;
    m.state = TxnState::Ongoing;
    m.partitions.insert(tp("t", 0));
    m.txn_start_timestamp = 0;
    m.client_transaction_version = 2;
    with_metadata(&mut c, &m);
    let EndStep::Prepare(t, plan) =
        c.end_txn_versioned("a", 77, i16::MAX - 1, true, 2, 1, &mut pids.alloc())
    else {
        panic!()
    };
    assert_eq!(plan.producer_epoch, i16::MAX);
    assert_eq!(t.producer_id_and_epoch(), (901, 0));
    log.persist(&mut c, t);
    let t = c.markers_written("a", 2).unwrap();
    log.persist(&mut c, t);
    let m = c.describe("a").unwrap();
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.previous_producer_id),
        (901, 0, 77)
    );
    let retry = c.end_txn_versioned("a", 77, i16::MAX - 1, true, 2, 3, &mut pids.alloc());
    assert_eq!(retry, EndStep::AlreadyDone);
}

#[test]
fn value_versions_follow_the_cluster_transaction_version() {
    let (mut c, mut log, mut pids) = (coordinator(), Log::default(), Pids(0));
    let InitStep::Persist(t) = c.init_producer_id("a", TIMEOUT_MS, None, 0, &mut pids.alloc())
    else {
        panic!()
    };
    assert_eq!(t.value_version, 0);
    assert_eq!(&t.record().1.unwrap()[..2], &[0, 0]);
    log.persist(&mut c, t);
    let config = TxnConfig {
        transaction_version_level: 2,
        ..TxnConfig::default()
    };
    let mut c = Coordinator::new(0, config);
    let InitStep::Persist(t) = c.init_producer_id("a", TIMEOUT_MS, None, 0, &mut pids.alloc())
    else {
        panic!()
    };
    assert_eq!(&t.record().1.unwrap()[..2], &[0, 1]);
    c.complete(t);
    // The cluster is at TV2: its own aborts bump twice (fence, then end).
    let (pid, epoch) = (c.describe("a").unwrap().producer_id, 0);
    let t = c
        .add_partitions("a", pid, epoch, &[tp("t", 0)], 1)
        .unwrap()
        .unwrap();
    c.complete(t);
    let (t, plan) = c.timed_out(i64::MAX / 2).pop().unwrap();
    assert_eq!(plan.producer_epoch, epoch + 2);
    c.complete(t);
}

#[test]
fn append_errors_map_as_kafka_maps_them() {
    assert_eq!(
        append_error(ErrorCode::NotEnoughReplicas),
        ErrorCode::CoordinatorNotAvailable
    );
    assert_eq!(
        append_error(ErrorCode::NotLeaderOrFollower),
        ErrorCode::NotCoordinator
    );
    assert_eq!(
        append_error(ErrorCode::MessageTooLarge),
        ErrorCode::UnknownServerError
    );
    assert_eq!(
        append_error(ErrorCode::InvalidTxnState),
        ErrorCode::InvalidTxnState
    );
}
