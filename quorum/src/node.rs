//! `QuorumNode`: one voter of the metadata quorum, a `raft::RawNode` over the durable
//! `LogStore`, driven by its owner (ticks, messages in, proposals, and `advance` whenever
//! something may be ready).
//!
//! The Ready loop (`advance`) follows raft-rs 0.7's contract:
//! 1. `Ready::messages` go out at once: only a leader has them (appends and heartbeats), and
//!    a leader may replicate before its own fsync (Raft thesis 10.2.1; raft-rs counts the
//!    leader's own entries toward the commit only once `advance_append` says they are
//!    persisted);
//! 2. a snapshot from the leader is made durable, then the state machine restored from it;
//! 3. committed entries are applied in index order (they are already durable here);
//! 4. new entries and the hard state are written with ONE write and one fdatasync;
//! 5. only then `persisted_messages` (votes, append acks) go out: a vote or an ack must never
//!    promise what a power loss could take back;
//! 6. `advance_append`; the light ready's commit index, messages and committed entries are
//!    handled, then `advance_apply`.
//!
//! Then every `snapshot_every` applied entries the state machine is snapshotted and the log
//! compacted (sooner once the file passes `log_store::COMPACT_AT_FILE_BYTES`); a follower
//! that needs compacted entries is sent the snapshot (MsgSnapshot), and the transport
//! reports its outcome with `report_snapshot` (without a report the leader gives up after
//! `SNAPSHOT_REPORT_TIMEOUT_ELECTIONS` election timeouts and sends a fresh one).
//!
//! The state machine is volatile: at open it is restored from the log's snapshot and the
//! committed entries after it are applied again (raft hands them back in the first readies).
//!
//! Any error from the log or the state machine stops the node (`Stopped` afterwards): what is
//! on disk is then unknown to the mirror, and the owner must reopen it from disk, as raft's
//! `Storage` contract asks. So does dropping an `advance` future before it completes.
//!
//! Membership is static: the voters of `QuorumConfig` bootstrap a new log; conf-change
//! entries are neither proposed nor applied.
//!
//! Determinism: raft-rs draws randomized election timeouts from the thread's RNG. The node
//! replaces every fresh draw with one from its own seeded generator (`election_seed`), so a
//! simulation replays exactly from its seed. A fresh draw is recognised by a change of term,
//! role, leader or timeout value; a redraw that changes none of them (same value drawn) is
//! missed, which can only make a replay diverge, never break raft.

use std::collections::HashMap;
use std::path::Path;

use raft::eraftpb::{Entry, EntryType, Message, MessageType};
use raft::{ProgressState, RawNode, SnapshotStatus, StateRole};
use storage::{Clock, Disk};

use crate::log_store::{LogStore, LogStoreError, COMPACT_AT_FILE_BYTES, MAX_ENTRY_BYTES};

/// What the quorum replicates into: applies committed entries in order, and snapshots and
/// restores itself for compaction and for catching up lagging voters.
pub trait StateMachine {
    /// Applies the committed entry at `index`. `data` is empty for the no-op entry each new
    /// leader appends; the index moves all the same.
    fn apply(&mut self, index: u64, term: u64, data: &[u8]);
    /// The state after the last applied entry, as opaque bytes (at most
    /// `log_store::MAX_SNAPSHOT_BYTES`).
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the whole state with a snapshot's.
    fn restore(&mut self, data: &[u8]) -> std::result::Result<(), RestoreError>;
}

/// A snapshot the state machine cannot read.
#[derive(Debug, thiserror::Error)]
#[error("state machine cannot restore the snapshot: {0}")]
pub struct RestoreError(pub String);

/// Where `advance` sends the node's messages (the transport; the simulation's network).
pub trait Outbox {
    fn send(&mut self, msg: Message);
}

impl Outbox for Vec<Message> {
    fn send(&mut self, msg: Message) {
        self.push(msg);
    }
}

/// Default bound on proposals appended by this leader and not yet applied.
pub const DEFAULT_MAX_IN_FLIGHT_PROPOSALS: u64 = 1024;
/// Default bound on one append message's entry bytes (raft's `max_size_per_msg`).
pub const DEFAULT_MAX_BYTES_PER_MSG: u64 = 1 << 20;
/// Default bound on append messages in flight to one follower (raft's `max_inflight_msgs`).
pub const DEFAULT_MAX_INFLIGHT_MSGS: usize = 256;
/// Bound on the bytes of entries a leader holds uncommitted (raft's `max_uncommitted_size`):
/// proposals past it are dropped, so the log cannot outgrow what compaction can reclaim.
pub const MAX_UNCOMMITTED_BYTES: u64 = 64 << 20;
/// A leader waits this many election timeouts for the transport's report on a snapshot it
/// sent before it assumes the snapshot lost and retries (see `tick`).
pub const SNAPSHOT_REPORT_TIMEOUT_ELECTIONS: usize = 5;

#[derive(Clone, Debug)]
pub struct QuorumConfig {
    /// This voter's id (non-zero).
    pub id: u64,
    /// Every voter's id, this one included (bootstraps a new log).
    pub voters: Vec<u64>,
    /// Ticks without a leader before an election (randomized in [n, 2n)).
    pub election_tick: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_tick: usize,
    /// Snapshot the state machine and compact the log every this many applied entries.
    pub snapshot_every: u64,
    /// Bound on this leader's proposals not yet applied (`propose` refuses past it).
    pub max_in_flight_proposals: u64,
    pub max_bytes_per_msg: u64,
    pub max_inflight_msgs: usize,
    /// Seeds the election timeouts' generator (see the module comment).
    pub election_seed: u64,
}

impl QuorumConfig {
    pub fn new(id: u64, voters: Vec<u64>) -> QuorumConfig {
        QuorumConfig {
            id,
            voters,
            election_tick: 10,
            heartbeat_tick: 2,
            snapshot_every: 1000,
            max_in_flight_proposals: DEFAULT_MAX_IN_FLIGHT_PROPOSALS,
            max_bytes_per_msg: DEFAULT_MAX_BYTES_PER_MSG,
            max_inflight_msgs: DEFAULT_MAX_INFLIGHT_MSGS,
            election_seed: id,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error("not the leader (leader: {leader_hint:?})")]
    NotLeader { leader_hint: Option<u64> },
    #[error("{in_flight} proposals in flight, the bound is {max}")]
    TooManyInFlight { in_flight: u64, max: u64 },
    #[error("proposal of {bytes} bytes, over the {max} byte bound")]
    ProposalTooLarge { bytes: usize, max: usize },
    #[error("proposal dropped by raft (leadership transfer or no leader)")]
    ProposalDropped,
    #[error("message not for this voter: {0}")]
    BadMessage(String),
    #[error("invalid quorum configuration: {0}")]
    Config(String),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error(transparent)]
    Log(#[from] LogStoreError),
    #[error(transparent)]
    Restore(#[from] RestoreError),
    #[error("the node stopped after an error; reopen it from disk")]
    Stopped,
}

pub type Result<T> = std::result::Result<T, QuorumError>;

/// Where a proposal went: it is committed once the state machine applies `index` with `term`
/// (another term at that index means it was lost to a leader change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposed {
    pub index: u64,
    pub term: u64,
}

/// One voter as the leader sees it (DescribeQuorum's `ReplicaState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterProgress {
    pub id: u64,
    /// Highest index known replicated on it (the leader's view; `None` on a follower).
    pub match_index: Option<u64>,
    /// Wall-clock ms of the last message received from it (now, for this voter).
    pub last_contact_ms: Option<i64>,
}

/// SplitMix64 (the election timeouts' generator; no dependency needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

pub struct QuorumNode {
    raw: RawNode<LogStore>,
    config: QuorumConfig,
    clock: Clock,
    /// Highest index applied to the state machine (or restored from a snapshot).
    applied: u64,
    /// voter -> wall-clock ms of its last message.
    last_contact: HashMap<u64, i64>,
    rng: Rng,
    min_election: usize,
    max_election: usize,
    /// (term, role, leader, timeout) after our last timeout draw: a change means raft reset
    /// the timeout with its own draw.
    timeout_key: (u64, StateRole, u64, usize),
    /// Leader: ticks each follower has waited in raft's Snapshot state.
    snapshot_wait: HashMap<u64, usize>,
    stopped: bool,
}

impl QuorumNode {
    /// Opens the voter's log in `dir` (creating it with `config.voters` if new), restores
    /// `sm` from the log's snapshot, and starts raft with pre-vote and check-quorum.
    pub async fn open(
        disk: &Disk,
        clock: Clock,
        dir: &Path,
        config: QuorumConfig,
        sm: &mut impl StateMachine,
    ) -> Result<QuorumNode> {
        if config.id == 0 || !config.voters.contains(&config.id) {
            return Err(QuorumError::Config(format!(
                "id {} is not among the voters {:?}",
                config.id, config.voters
            )));
        }
        if config.snapshot_every == 0 || config.max_in_flight_proposals == 0 {
            return Err(QuorumError::Config(
                "snapshot_every and max_in_flight_proposals must be positive".into(),
            ));
        }
        let store = LogStore::open(disk, dir, &config.voters).await?;
        let snap = store.snapshot_ref();
        let applied = snap.get_metadata().index;
        if applied > 0 {
            sm.restore(&snap.data)?;
        }
        let raft_config = raft::Config {
            id: config.id,
            election_tick: config.election_tick,
            heartbeat_tick: config.heartbeat_tick,
            applied,
            max_size_per_msg: config.max_bytes_per_msg,
            max_inflight_msgs: config.max_inflight_msgs,
            check_quorum: true,
            pre_vote: true,
            max_uncommitted_size: MAX_UNCOMMITTED_BYTES,
            ..Default::default()
        };
        raft_config.validate()?;
        let (min_election, max_election) = (
            raft_config.min_election_tick(),
            raft_config.max_election_tick(),
        );
        let raw = RawNode::new(&raft_config, store, &crate::tracing_logger::logger())?;
        let mut node = QuorumNode {
            raw,
            rng: Rng(config.election_seed),
            config,
            clock,
            applied,
            last_contact: HashMap::new(),
            min_election,
            max_election,
            timeout_key: (u64::MAX, StateRole::Follower, 0, 0),
            snapshot_wait: HashMap::new(),
            stopped: false,
        };
        node.redraw_election_timeout();
        Ok(node)
    }

    pub fn id(&self) -> u64 {
        self.config.id
    }

    /// One tick of the logical clock (the owner calls it every tick interval).
    pub fn tick(&mut self) {
        if self.stopped {
            return;
        }
        self.raw.tick();
        self.redraw_election_timeout();
        self.expire_snapshot_waits();
    }

    /// A leader sends a lagging follower nothing but heartbeats until the transport reports
    /// on the snapshot it sent (`report_snapshot`) or the follower acks it. A transport that
    /// loses the report (a connection reset at the wrong moment) would stall that follower
    /// for good, so after `SNAPSHOT_REPORT_TIMEOUT_ELECTIONS` election timeouts the leader
    /// reports the failure itself and raft sends a fresh snapshot.
    fn expire_snapshot_waits(&mut self) {
        if self.raw.raft.state != StateRole::Leader {
            self.snapshot_wait.clear();
            return;
        }
        let waiting: Vec<u64> = self
            .raw
            .raft
            .prs()
            .iter()
            .filter(|(_, p)| p.state == ProgressState::Snapshot)
            .map(|(id, _)| *id)
            .collect();
        self.snapshot_wait.retain(|id, _| waiting.contains(id));
        let limit = self.config.election_tick * SNAPSHOT_REPORT_TIMEOUT_ELECTIONS;
        for id in waiting {
            let ticks = self.snapshot_wait.entry(id).or_insert(0);
            *ticks += 1;
            if *ticks >= limit {
                tracing::warn!(
                    follower = id,
                    "quorum: no report on the snapshot sent to a follower; sending it again"
                );
                self.snapshot_wait.remove(&id);
                self.raw.report_snapshot(id, SnapshotStatus::Failure);
            }
        }
    }

    /// Takes in a message from another voter (decoded by `codec::decode`).
    pub fn step(&mut self, msg: Message) -> Result<()> {
        self.check_live()?;
        if msg.to != self.config.id {
            return Err(QuorumError::BadMessage(format!("addressed to {}", msg.to)));
        }
        if msg.from == self.config.id || !self.config.voters.contains(&msg.from) {
            return Err(QuorumError::BadMessage(format!(
                "from {}, not another voter",
                msg.from
            )));
        }
        if raft::raw_node::is_local_msg(msg.get_msg_type())
            || msg.get_msg_type() == MessageType::MsgPropose
        {
            return Err(QuorumError::BadMessage(format!(
                "{:?} is not a peer message",
                msg.get_msg_type()
            )));
        }
        self.last_contact.insert(msg.from, self.clock.now_ms());
        let r = self.raw.step(msg);
        self.redraw_election_timeout();
        r.map_err(QuorumError::from)
    }

    /// Proposes `data` for replication. Only the leader accepts (`NotLeader` names the
    /// leader it knows of), within the bound on proposals in flight.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<Proposed> {
        self.check_live()?;
        if data.len() > MAX_ENTRY_BYTES {
            return Err(QuorumError::ProposalTooLarge {
                bytes: data.len(),
                max: MAX_ENTRY_BYTES,
            });
        }
        if self.raw.raft.state != StateRole::Leader {
            return Err(QuorumError::NotLeader {
                leader_hint: self.leader_id(),
            });
        }
        let last = self.raw.raft.raft_log.last_index();
        let in_flight = last.saturating_sub(self.applied);
        if in_flight >= self.config.max_in_flight_proposals {
            return Err(QuorumError::TooManyInFlight {
                in_flight,
                max: self.config.max_in_flight_proposals,
            });
        }
        match self.raw.propose(Vec::new(), data) {
            Ok(()) => {}
            Err(raft::Error::ProposalDropped) => return Err(QuorumError::ProposalDropped),
            Err(e) => return Err(e.into()),
        }
        let index = self.raw.raft.raft_log.last_index();
        if index == last {
            return Err(QuorumError::ProposalDropped);
        }
        Ok(Proposed {
            index,
            term: self.raw.raft.term,
        })
    }

    /// The transport's report on a MsgSnapshot it was given for `to`: delivered or not. Until
    /// a report (or the follower's ack), the leader sends that follower nothing more.
    pub fn report_snapshot(&mut self, to: u64, delivered: bool) {
        let status = if delivered {
            SnapshotStatus::Finish
        } else {
            SnapshotStatus::Failure
        };
        self.raw.report_snapshot(to, status);
    }

    /// The transport could not reach `to` (the leader stops pipelining to it).
    pub fn report_unreachable(&mut self, to: u64) {
        self.raw.report_unreachable(to);
    }

    /// Handles everything ready (see the module comment for the order and why): persists,
    /// sends through `out`, applies to `sm`, compacts. Loops until nothing is ready.
    pub async fn advance(
        &mut self,
        sm: &mut impl StateMachine,
        out: &mut impl Outbox,
    ) -> Result<()> {
        self.check_live()?;
        // Cleared only when the loop completes: an error leaves the node stopped.
        self.stopped = true;
        while self.raw.has_ready() {
            let mut rd = self.raw.ready();
            for m in rd.take_messages() {
                out.send(m);
            }
            if !rd.snapshot().is_empty() {
                let snap = rd.snapshot().clone();
                let index = snap.get_metadata().index;
                self.raw.mut_store().apply_snapshot(snap.clone()).await?;
                sm.restore(&snap.data)?;
                self.applied = index;
            }
            self.apply(sm, rd.take_committed_entries());
            let entries = rd.take_entries();
            let hs = rd.hs().cloned();
            if !entries.is_empty() || hs.is_some() {
                self.raw.mut_store().persist(&entries, hs.as_ref()).await?;
            }
            for m in rd.take_persisted_messages() {
                out.send(m);
            }
            let mut light = self.raw.advance_append(rd);
            if let Some(commit) = light.commit_index() {
                self.raw.mut_store().set_commit(commit);
            }
            for m in light.take_messages() {
                out.send(m);
            }
            self.apply(sm, light.take_committed_entries());
            self.raw.advance_apply();
            self.maybe_compact(sm).await?;
            self.redraw_election_timeout();
        }
        self.stopped = false;
        Ok(())
    }

    fn apply(&mut self, sm: &mut impl StateMachine, entries: Vec<Entry>) {
        for e in entries {
            if e.index <= self.applied {
                continue; // covered by a snapshot restored meanwhile
            }
            debug_assert_eq!(e.index, self.applied + 1, "committed entries in order");
            match e.get_entry_type() {
                EntryType::EntryNormal => sm.apply(e.index, e.term, &e.data),
                other => tracing::warn!(
                    index = e.index,
                    "quorum: ignoring a {other:?} entry (membership is static)"
                ),
            }
            self.applied = e.index;
        }
    }

    async fn maybe_compact(&mut self, sm: &mut impl StateMachine) -> Result<()> {
        let store = self.raw.store();
        let snap_index = store.snapshot_ref().get_metadata().index;
        let due = self.applied >= snap_index + self.config.snapshot_every
            || (self.applied > snap_index && store.file_len() > COMPACT_AT_FILE_BYTES);
        if !due {
            return Ok(());
        }
        let Some(term) = store.term_of(self.applied) else {
            return Ok(());
        };
        let data = sm.snapshot();
        let index = self.applied;
        self.raw.mut_store().compact(index, term, data).await?;
        Ok(())
    }

    /// Replaces raft's own draw of the randomized election timeout (see the module comment).
    fn redraw_election_timeout(&mut self) {
        let r = &self.raw.raft;
        let key = (
            r.term,
            r.state,
            r.leader_id,
            r.randomized_election_timeout(),
        );
        if key == self.timeout_key {
            return;
        }
        let span = (self.max_election - self.min_election) as u64;
        let t = self.min_election + (self.rng.next() % span.max(1)) as usize;
        self.raw.raft.set_randomized_election_timeout(t);
        self.timeout_key = (key.0, key.1, key.2, t);
    }

    fn check_live(&self) -> Result<()> {
        if self.stopped {
            return Err(QuorumError::Stopped);
        }
        Ok(())
    }

    /// Whether an earlier error stopped the node (reopen it from disk).
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// The index the next proposal will get (while this node leads and nothing else is
    /// proposed first).
    pub fn next_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index() + 1
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    pub fn role(&self) -> StateRole {
        self.raw.raft.state
    }

    /// The leader this voter knows of.
    pub fn leader_id(&self) -> Option<u64> {
        let id = self.raw.raft.leader_id;
        (id != raft::INVALID_ID).then_some(id)
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// Highest index applied to the state machine.
    pub fn applied_index(&self) -> u64 {
        self.applied
    }

    /// The durable log (first/last index, snapshot), for tests and DescribeQuorum.
    pub fn log(&self) -> &LogStore {
        self.raw.store()
    }

    /// Every voter's progress (DescribeQuorum's voters): match indexes are the leader's view.
    pub fn voter_progress(&self) -> Vec<VoterProgress> {
        let leader = self.is_leader();
        let now = self.clock.now_ms();
        self.config
            .voters
            .iter()
            .map(|&id| VoterProgress {
                id,
                match_index: if leader {
                    self.raw.raft.prs().get(id).map(|p| p.matched)
                } else {
                    None
                },
                last_contact_ms: if id == self.config.id {
                    Some(now)
                } else {
                    self.last_contact.get(&id).copied()
                },
            })
            .collect()
    }
}
