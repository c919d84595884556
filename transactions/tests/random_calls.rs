//! Random call sequences, including appends that fail: nothing panics, every completed
//! transition is one of Kafka's valid moves, the metadata stays well formed, and replaying
//! the records that were persisted rebuilds what the coordinator holds.

use proptest::prelude::*;
use transactions::{Coordinator, EndStep, InitStep, Transition, TxnConfig, TxnState};
use wire::ErrorCode;

const IDS: [&str; 3] = ["a", "b", "c"];

#[derive(Clone, Debug)]
enum Op {
    Init {
        id: usize,
        expected: Option<bool>,
        timeout_ms: i32,
    },
    Add {
        id: usize,
        current: bool,
        partitions: Vec<i32>,
        tv2: bool,
    },
    End {
        id: usize,
        commit: bool,
        current: bool,
        tv2: bool,
    },
    Verify {
        id: usize,
        current: bool,
    },
    Markers {
        id: usize,
    },
    TimedOut,
    Expire,
    Resolve {
        index: usize,
        success: bool,
    },
    Advance {
        ms: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    let current = || prop::bool::weighted(0.85);
    prop_oneof![
        2 => (id.clone(), proptest::option::of(current()), prop_oneof![8 => Just(1000), 1 => Just(0), 1 => Just(1_000_000)])
            .prop_map(|(id, expected, timeout_ms)| Op::Init { id, expected, timeout_ms }),
        4 => (id.clone(), current(), proptest::collection::vec(0..4i32, 1..3), any::<bool>())
            .prop_map(|(id, current, partitions, tv2)| Op::Add { id, current, partitions, tv2 }),
        3 => (id.clone(), any::<bool>(), current(), any::<bool>())
            .prop_map(|(id, commit, current, tv2)| Op::End { id, commit, current, tv2 }),
        1 => (id.clone(), current()).prop_map(|(id, current)| Op::Verify { id, current }),
        3 => id.prop_map(|id| Op::Markers { id }),
        1 => Just(Op::TimedOut),
        1 => Just(Op::Expire),
        10 => (0..4usize, prop::bool::weighted(0.85)).prop_map(|(index, success)| Op::Resolve { index, success }),
        2 => prop_oneof![Just(1i64), Just(600), Just(5000)].prop_map(|ms| Op::Advance { ms }),
    ]
}

struct World {
    c: Coordinator,
    outstanding: Vec<Transition>,
    log: Vec<(bytes::Bytes, Option<bytes::Bytes>)>,
    next_pid: i64,
    now: i64,
}

impl World {
    fn ids(&self, id: usize, current: bool) -> (i64, i16) {
        match self.c.describe(IDS[id]) {
            Some(m) if current => (m.producer_id, m.producer_epoch),
            Some(m) => (m.producer_id, m.producer_epoch.wrapping_sub(1)),
            None => (7, 0),
        }
    }

    fn hold(&mut self, t: Transition) {
        assert!(
            self.outstanding
                .iter()
                .all(|o| o.transactional_id != t.transactional_id),
            "two transitions in flight for {}",
            t.transactional_id
        );
        assert_eq!(
            self.c.pending_state(&t.transactional_id),
            Some(t.target.state)
        );
        self.outstanding.push(t);
    }

    fn apply(&mut self, op: Op) {
        let mut pid = self.next_pid;
        let mut alloc = || {
            pid += 1;
            Ok::<i64, ErrorCode>(pid)
        };
        match op {
            Op::Init {
                id,
                expected,
                timeout_ms,
            } => {
                let expected = expected.map(|current| self.ids(id, current));
                match self
                    .c
                    .init_producer_id(IDS[id], timeout_ms, expected, self.now, &mut alloc)
                {
                    InitStep::Err(_) => {}
                    InitStep::Persist(t) => {
                        assert_eq!(t.target.state, TxnState::Empty);
                        self.hold(t);
                    }
                    InitStep::AbortFirst(t, plan) => {
                        assert!(!plan.commit);
                        assert_eq!(plan.producer_epoch, t.target.producer_epoch);
                        self.hold(t);
                    }
                }
            }
            Op::Add {
                id,
                current,
                partitions,
                tv2,
            } => {
                let (producer_id, epoch) = self.ids(id, current);
                let tps: Vec<(String, i32)> =
                    partitions.iter().map(|p| ("t".to_owned(), *p)).collect();
                let version = if tv2 { 2 } else { 0 };
                if let Ok(Some(t)) = self.c.add_partitions_versioned(
                    IDS[id],
                    producer_id,
                    epoch,
                    &tps,
                    version,
                    self.now,
                ) {
                    self.hold(t);
                }
            }
            Op::End {
                id,
                commit,
                current,
                tv2,
            } => {
                let (producer_id, epoch) = self.ids(id, current);
                let version = if tv2 { 2 } else { 0 };
                let step = self.c.end_txn_versioned(
                    IDS[id],
                    producer_id,
                    epoch,
                    commit,
                    version,
                    self.now,
                    &mut alloc,
                );
                if let EndStep::Prepare(t, plan) = step {
                    assert_eq!(plan.commit, t.target.state == TxnState::PrepareCommit);
                    let partitions: Vec<(String, i32)> =
                        t.target.partitions.iter().cloned().collect();
                    assert_eq!(plan.partitions, partitions);
                    self.hold(t);
                }
            }
            Op::Verify { id, current } => {
                let (producer_id, epoch) = self.ids(id, current);
                let _ =
                    self.c
                        .verify_partitions(IDS[id], producer_id, epoch, &[("t".to_owned(), 0)]);
            }
            Op::Markers { id } => {
                if let Some(t) = self.c.markers_written(IDS[id], self.now) {
                    self.hold(t);
                }
            }
            Op::TimedOut => {
                for (t, _) in self.c.timed_out(self.now) {
                    self.hold(t);
                }
            }
            Op::Expire => {
                for t in self.c.expired_ids(self.now) {
                    self.hold(t);
                }
            }
            Op::Resolve { index, success } => {
                if self.outstanding.is_empty() {
                    return;
                }
                let t = self.outstanding.remove(index % self.outstanding.len());
                if success {
                    let from = self
                        .c
                        .describe(&t.transactional_id)
                        .expect("pending ids exist")
                        .state;
                    assert!(
                        TxnState::is_valid_transition(from, t.target.state),
                        "{from} -> {}",
                        t.target.state
                    );
                    self.log.push(t.record());
                    self.c.complete(t);
                } else {
                    self.c.abandon(&t);
                }
            }
            Op::Advance { ms } => self.now += ms,
        }
        self.next_pid = pid;
    }

    fn check(&self) {
        for m in self.c.list() {
            assert!(!matches!(
                m.state,
                TxnState::Dead | TxnState::PrepareEpochFence
            ));
            assert!(m.producer_epoch >= -1);
            match m.state {
                TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    assert!(m.partitions.is_empty(), "{m:?}")
                }
                _ => assert!(m.txn_start_timestamp >= 0, "{m:?}"),
            }
            if m.state == TxnState::Ongoing {
                assert!(!m.partitions.is_empty(), "{m:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_calls_keep_kafkas_invariants(ops in proptest::collection::vec(op(), 1..150)) {
        let mut world = World {
            c: Coordinator::new(1, TxnConfig {
                transaction_max_timeout_ms: 2000,
                transactional_id_expiration_ms: 10_000,
                transaction_version_level: 0,
            }),
            outstanding: Vec::new(),
            log: Vec::new(),
            next_pid: 100,
            now: 0,
        };
        for op in ops {
            world.apply(op);
            world.check();
        }
        // Replay what was persisted: what it rebuilds matches the live state; ids it lacks
        // were only ever created in memory (a first InitProducerId whose append is pending
        // or failed).
        let mut replayed = Coordinator::new(2, TxnConfig::default());
        for (key, value) in &world.log {
            replayed.replay(key, value.as_deref()).expect("our own records replay");
        }
        for m in world.c.list() {
            match replayed.describe(&m.transactional_id) {
                Some(r) => {
                    prop_assert_eq!(r.state, m.state);
                    prop_assert_eq!(&r.partitions, &m.partitions);
                    prop_assert_eq!(r.producer_id, m.producer_id);
                    prop_assert_eq!(r.txn_start_timestamp, m.txn_start_timestamp);
                    prop_assert_eq!(r.client_transaction_version, m.client_transaction_version);
                }
                None => prop_assert_eq!(m.state, TxnState::Empty),
            }
        }
        for r in replayed.list() {
            let pending_dead = world.c.pending_state(&r.transactional_id) == Some(TxnState::Dead);
            prop_assert!(world.c.describe(&r.transactional_id).is_some() || pending_dead);
        }
    }
}
