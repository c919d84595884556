//! What the voters share in a simulated run: the network (loss, duplication, delay and so
//! reordering, partitions), the client's proposal queues, and the checker's record of the
//! committed sequence and of each term's leader.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use std::task::Waker;

use quorum::codec;
use quorum::Message;
use raft::eraftpb::MessageType;
use storage::sim::SimRng;
use storage::SimClock;

/// One committed entry as first applied anywhere: every later application of that index, on
/// any voter, must match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    pub(crate) term: u64,
    pub(crate) data: Vec<u8>,
    /// The state machine's hash chain after applying it.
    pub(crate) hash: u64,
}

#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stats {
    pub(crate) runs: u64,
    pub(crate) messages: u64,
    pub(crate) dropped: u64,
    pub(crate) duplicated: u64,
    pub(crate) proposals: u64,
    pub(crate) committed: u64,
    pub(crate) leaders: u64,
    pub(crate) crashes: u64,
    pub(crate) power_losses: u64,
    pub(crate) cluster_power_losses: u64,
    pub(crate) partitions: u64,
    pub(crate) snapshots_sent: u64,
    pub(crate) snapshots_restored: u64,
    pub(crate) compactions: u64,
    /// Voters stopped by an injected disk error (and restarted).
    pub(crate) io_failures: u64,
}

impl Stats {
    pub(crate) fn add(&mut self, o: &Stats) {
        self.runs += o.runs;
        self.messages += o.messages;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.proposals += o.proposals;
        self.committed += o.committed;
        self.leaders += o.leaders;
        self.crashes += o.crashes;
        self.power_losses += o.power_losses;
        self.cluster_power_losses += o.cluster_power_losses;
        self.partitions += o.partitions;
        self.snapshots_sent += o.snapshots_sent;
        self.snapshots_restored += o.snapshots_restored;
        self.compactions += o.compactions;
        self.io_failures += o.io_failures;
    }
}

/// What a voter reports after each step (for the client and the final checks).
#[derive(Default, Clone, Debug)]
pub(crate) struct VoterView {
    pub(crate) up: bool,
    pub(crate) leader: bool,
    pub(crate) term: u64,
    pub(crate) leader_hint: Option<u64>,
    pub(crate) applied: u64,
    pub(crate) hash: u64,
    pub(crate) snapshot_index: u64,
    /// The voters' progress as this voter sees it (match indexes only when leading).
    pub(crate) progress: Vec<quorum::VoterProgress>,
}

/// (due µs, sequence) -> (from, encoded message).
type Inbox = BTreeMap<(u64, u64), (u64, Vec<u8>)>;

pub(crate) struct World {
    pub(crate) rng: SimRng,
    pub(crate) clock: Rc<SimClock>,
    pub(crate) voters: Vec<u64>,
    /// Per destination voter: (due µs, sequence) -> (from, encoded message).
    inboxes: BTreeMap<u64, Inbox>,
    seq: u64,
    pub(crate) loss_ppm: u64,
    pub(crate) dup_ppm: u64,
    pub(crate) min_delay_us: u64,
    pub(crate) max_delay_us: u64,
    /// Directed links that drop everything: (from, to).
    pub(crate) cut: BTreeSet<(u64, u64)>,
    /// Per sender: (follower, delivered) reports on MsgSnapshots.
    pub(crate) snapshot_reports: BTreeMap<u64, Vec<(u64, bool)>>,
    /// A sloppy transport: no report for snapshots lost with a voter that went down (the
    /// leader's own timeout must recover the follower).
    pub(crate) lose_down_reports: bool,
    /// Per voter: client proposals to hand to it.
    pub(crate) proposals: BTreeMap<u64, VecDeque<Vec<u8>>>,
    /// The wakers of voters waiting for input.
    pub(crate) wakers: BTreeMap<u64, Waker>,
    /// The committed sequence, by index, contiguous from 1.
    pub(crate) committed: BTreeMap<u64, Committed>,
    /// Term -> the one voter that led it.
    pub(crate) leaders: BTreeMap<u64, u64>,
    pub(crate) views: BTreeMap<u64, VoterView>,
    /// Voters whose task ended on an injected disk error (the driver restarts them).
    pub(crate) failed: Vec<u64>,
    pub(crate) stats: Stats,
    pub(crate) trace: bool,
}

pub(crate) type Shared = Rc<RefCell<World>>;

impl World {
    pub(crate) fn new(rng: SimRng, clock: Rc<SimClock>, voters: Vec<u64>, trace: bool) -> World {
        World {
            rng,
            clock,
            inboxes: voters.iter().map(|&v| (v, BTreeMap::new())).collect(),
            views: voters.iter().map(|&v| (v, VoterView::default())).collect(),
            proposals: voters.iter().map(|&v| (v, VecDeque::new())).collect(),
            voters,
            seq: 0,
            loss_ppm: 0,
            dup_ppm: 0,
            min_delay_us: 500,
            max_delay_us: 5_000,
            cut: BTreeSet::new(),
            snapshot_reports: BTreeMap::new(),
            lose_down_reports: false,
            wakers: BTreeMap::new(),
            committed: BTreeMap::new(),
            leaders: BTreeMap::new(),
            failed: Vec::new(),
            stats: Stats::default(),
            trace,
        }
    }

    fn wake(&mut self, id: u64) {
        if let Some(w) = self.wakers.remove(&id) {
            w.wake();
        }
    }

    /// A voter sends `msg` (encoded here, as the transport would).
    pub(crate) fn send(&mut self, msg: Message) {
        self.stats.messages += 1;
        let (from, to) = (msg.from, msg.to);
        let is_snapshot = msg.get_msg_type() == MessageType::MsgSnapshot;
        if is_snapshot {
            self.stats.snapshots_sent += 1;
        }
        let bytes = codec::encode(&msg).expect("a voter's message encodes");
        let up = self.views.get(&to).is_some_and(|v| v.up);
        if !up || self.cut.contains(&(from, to)) || self.rng.below(1_000_000) < self.loss_ppm {
            self.stats.dropped += 1;
            if is_snapshot {
                self.snapshot_reports
                    .entry(from)
                    .or_default()
                    .push((to, false));
                self.wake(from);
            }
            return;
        }
        let copies = if self.rng.below(1_000_000) < self.dup_ppm {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay =
                self.min_delay_us + self.rng.below(self.max_delay_us - self.min_delay_us + 1);
            self.seq += 1;
            let key = (self.clock.now_us() + delay, self.seq);
            self.inboxes
                .get_mut(&to)
                .expect("a voter")
                .insert(key, (from, bytes.clone()));
        }
        self.wake(to);
    }

    /// The messages due for `id` now (a partition cut meanwhile drops them on arrival).
    pub(crate) fn take_due(&mut self, id: u64) -> Vec<Message> {
        let now = self.clock.now_us();
        let inbox = self.inboxes.get_mut(&id).expect("a voter");
        let mut due = Vec::new();
        while let Some(entry) = inbox.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        let mut out = Vec::new();
        for (from, bytes) in due {
            let msg = codec::decode(&bytes).expect("a sent message decodes");
            let is_snapshot = msg.get_msg_type() == MessageType::MsgSnapshot;
            let delivered = !self.cut.contains(&(from, id));
            if is_snapshot {
                self.snapshot_reports
                    .entry(from)
                    .or_default()
                    .push((id, delivered));
                self.wake(from);
            }
            if delivered {
                out.push(msg);
            } else {
                self.stats.dropped += 1;
            }
        }
        out
    }

    /// When `id` next has a message due.
    pub(crate) fn next_due(&self, id: u64) -> Option<u64> {
        self.inboxes[&id].first_key_value().map(|(k, _)| k.0)
    }

    pub(crate) fn has_input(&self, id: u64) -> bool {
        self.next_due(id).is_some_and(|t| t <= self.clock.now_us())
            || !self.proposals[&id].is_empty()
            || self
                .snapshot_reports
                .get(&id)
                .is_some_and(|r| !r.is_empty())
    }

    /// A voter went down: what was in flight to it is lost.
    pub(crate) fn voter_down(&mut self, id: u64) {
        // The connections to it break: a transport reports each snapshot it was sending there
        // as failed (without a report the leader would wait for that follower forever).
        let lost = std::mem::take(self.inboxes.get_mut(&id).expect("a voter"));
        for (from, bytes) in lost.into_values() {
            let msg = codec::decode(&bytes).expect("a sent message decodes");
            if msg.get_msg_type() == MessageType::MsgSnapshot && !self.lose_down_reports {
                self.snapshot_reports
                    .entry(from)
                    .or_default()
                    .push((id, false));
                self.wake(from);
            }
        }
        self.proposals.get_mut(&id).expect("a voter").clear();
        self.snapshot_reports.remove(&id);
        self.wakers.remove(&id);
        let v = self.views.get_mut(&id).expect("a voter");
        v.up = false;
        v.leader = false;
    }

    /// Records that `id` leads `term`: never two leaders in one term.
    pub(crate) fn saw_leader(&mut self, term: u64, id: u64) {
        match self.leaders.get(&term) {
            Some(&other) if other != id => {
                panic!("two leaders in term {term}: voters {other} and {id}")
            }
            Some(_) => {}
            None => {
                self.leaders.insert(term, id);
                self.stats.leaders += 1;
                if self.trace {
                    eprintln!(
                        "{:>9} µs: voter {id} leads term {term}",
                        self.clock.now_us()
                    );
                }
            }
        }
    }

    /// A voter applied `index`: it must match what was first applied there, and the
    /// committed sequence has no gaps.
    pub(crate) fn applied(&mut self, voter: u64, index: u64, entry: Committed) {
        match self.committed.get(&index) {
            Some(c) => assert!(
                *c == entry,
                "voter {voter} applied index {index} as {entry:?}, but it was committed as {c:?}"
            ),
            None => {
                let last = self.committed.last_key_value().map_or(0, |(k, _)| *k);
                assert_eq!(
                    index,
                    last + 1,
                    "voter {voter} applied index {index} past the committed sequence's end {last}"
                );
                self.committed.insert(index, entry);
                self.stats.committed += 1;
            }
        }
    }
}
