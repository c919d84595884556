//! One simulated voter: a task on the virtual clock that opens its `QuorumNode` from its own
//! simulated disk, then loops: snapshot reports, messages due, ticks, client proposals,
//! `advance`. Its state machine is a hash chain checked against the committed sequence.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use quorum::log_store::LogStoreError;
use quorum::{Message, Outbox, QuorumConfig, QuorumError, QuorumNode, RestoreError, StateMachine};
use storage::sim_clock::Sleep;
use storage::{Clock, Disk, SimClock};

use super::world::{Committed, Shared};

/// Virtual time between ticks.
pub(crate) const TICK_US: u64 = 10_000;

/// The test's state machine: the applied index and a hash chain over (index, term, data);
/// every application and every restore is checked against the committed sequence.
pub(crate) struct ChainSm {
    id: u64,
    world: Shared,
    applied: u64,
    hash: u64,
    /// Bytes appended to each snapshot (snapshots of some size travel and are stored).
    padding: usize,
}

pub(crate) fn chain(hash: u64, index: u64, term: u64, data: &[u8]) -> u64 {
    let mut h = hash ^ 0xcbf2_9ce4_8422_2325;
    for b in index
        .to_le_bytes()
        .iter()
        .chain(term.to_le_bytes().iter())
        .chain(data)
    {
        h = (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl StateMachine for ChainSm {
    fn apply(&mut self, index: u64, term: u64, data: &[u8]) {
        assert_eq!(
            index,
            self.applied + 1,
            "voter {}: applied out of order",
            self.id
        );
        self.hash = chain(self.hash, index, term, data);
        self.applied = index;
        self.world.borrow_mut().applied(
            self.id,
            index,
            Committed {
                term,
                data: data.to_vec(),
                hash: self.hash,
            },
        );
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + self.padding);
        b.extend_from_slice(&self.applied.to_le_bytes());
        b.extend_from_slice(&self.hash.to_le_bytes());
        b.resize(16 + self.padding, self.hash as u8);
        b
    }

    fn restore(&mut self, data: &[u8]) -> Result<(), RestoreError> {
        if data.len() < 16 {
            return Err(RestoreError(format!("{} bytes", data.len())));
        }
        let applied = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
        let hash = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
        let w = self.world.borrow();
        let c = w.committed.get(&applied).unwrap_or_else(|| {
            panic!(
                "voter {} restored a snapshot at {applied}, never committed",
                self.id
            )
        });
        assert_eq!(
            c.hash, hash,
            "voter {}: snapshot at {applied} disagrees with the committed sequence",
            self.id
        );
        drop(w);
        self.applied = applied;
        self.hash = hash;
        self.world.borrow_mut().stats.snapshots_restored += 1;
        Ok(())
    }
}

struct NetOutbox(Shared);

impl Outbox for NetOutbox {
    fn send(&mut self, msg: Message) {
        self.0.borrow_mut().send(msg);
    }
}

/// Waits until `id` has input, or until `sleep` (its next tick or message due) fires.
struct WaitInput {
    world: Shared,
    id: u64,
    sleep: Sleep,
}

impl Future for WaitInput {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        {
            let mut w = self.world.borrow_mut();
            if w.has_input(self.id) {
                return Poll::Ready(());
            }
            w.wakers.insert(self.id, cx.waker().clone());
        }
        Pin::new(&mut self.sleep).poll(cx)
    }
}

/// Records what the voter looks like now; checks leader uniqueness per term.
fn report(world: &Shared, node: &QuorumNode, sm: &ChainSm) {
    let mut w = world.borrow_mut();
    if node.is_leader() {
        w.saw_leader(node.term(), node.id());
    }
    let snapshot_index = node.log().snapshot_ref().get_metadata().index;
    let v = w.views.get_mut(&node.id()).expect("a voter");
    if snapshot_index > v.snapshot_index && v.up {
        w.stats.compactions += 1;
    }
    let v = w.views.get_mut(&node.id()).expect("a voter");
    v.up = true;
    v.leader = node.is_leader();
    v.term = node.term();
    v.leader_hint = node.leader_id();
    v.applied = sm.applied;
    v.hash = sm.hash;
    v.snapshot_index = snapshot_index;
    v.progress = node.voter_progress();
}

pub(crate) fn voter_dir(id: u64) -> PathBuf {
    PathBuf::from(format!("/quorum/voter-{id}"))
}

/// The voter's life from (re)start to the next crash (the task is aborted then).
pub(crate) async fn run_voter(
    world: Shared,
    disk: Disk,
    clock: Rc<SimClock>,
    config: QuorumConfig,
    padding: usize,
) {
    let id = config.id;
    let mut sm = ChainSm {
        id,
        world: world.clone(),
        applied: 0,
        hash: 0,
        padding,
    };
    let opened = QuorumNode::open(
        &disk,
        Clock::Sim(clock.clone()),
        &voter_dir(id),
        config,
        &mut sm,
    )
    .await;
    let mut node = match opened {
        Ok(node) => node,
        Err(e) => return failed(&world, id, e),
    };
    report(&world, &node, &sm);
    let mut next_tick = clock.now_us() + TICK_US;
    loop {
        let wake_at = world
            .borrow()
            .next_due(id)
            .map_or(next_tick, |t| t.min(next_tick));
        let wait = WaitInput {
            world: world.clone(),
            id,
            sleep: clock.sleep(Duration::from_micros(
                wake_at.saturating_sub(clock.now_us()),
            )),
        };
        wait.await;
        let reports = world
            .borrow_mut()
            .snapshot_reports
            .remove(&id)
            .unwrap_or_default();
        for (to, delivered) in reports {
            node.report_snapshot(to, delivered);
        }
        let msgs = world.borrow_mut().take_due(id);
        for m in msgs {
            match node.step(m) {
                Ok(()) => {}
                // raft refuses some stale messages (e.g. from a retired term); harmless.
                Err(QuorumError::Raft(_)) => {}
                Err(e) => panic!("voter {id}: step: {e}"),
            }
            if node.is_leader() {
                world.borrow_mut().saw_leader(node.term(), id);
            }
        }
        while clock.now_us() >= next_tick {
            node.tick();
            next_tick += TICK_US;
        }
        let proposals: Vec<Vec<u8>> = world
            .borrow_mut()
            .proposals
            .get_mut(&id)
            .expect("a voter")
            .drain(..)
            .collect();
        for data in proposals {
            match node.propose(data) {
                Ok(_) => world.borrow_mut().stats.proposals += 1,
                Err(QuorumError::NotLeader { .. })
                | Err(QuorumError::TooManyInFlight { .. })
                | Err(QuorumError::ProposalDropped) => {}
                Err(e) => panic!("voter {id}: propose: {e}"),
            }
        }
        let mut out = NetOutbox(world.clone());
        if let Err(e) = node.advance(&mut sm, &mut out).await {
            return failed(&world, id, e);
        }
        report(&world, &node, &sm);
    }
}

/// The voter stopped on an error: an injected disk error (EIO, ENOSPC) ends its life as a
/// process exit would (the driver restarts it from disk); anything else is a failed check.
/// Corruption is never acceptable: injected errors never touch synced bytes.
fn failed(world: &Shared, id: u64, e: QuorumError) {
    match e {
        QuorumError::Log(LogStoreError::Io(_)) => {
            let mut w = world.borrow_mut();
            w.failed.push(id);
            w.stats.io_failures += 1;
            if w.trace {
                eprintln!("voter {id} stops: {e}");
            }
        }
        e => panic!("voter {id}: {e}"),
    }
}
