//! `QuorumNode`'s API on a clean network (messages delivered at once, in order): election,
//! proposals and their typed refusals, message validation, the leader's progress view, and
//! a restart from disk that restores and re-applies the state machine.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use quorum::{Message, QuorumConfig, QuorumError, QuorumNode, RestoreError, StateMachine};
use storage::{Clock, Disk, SimClock, SimDisk};

/// Records every applied (index, term, data); the snapshot is the whole record.
#[derive(Default, Clone, Debug, PartialEq)]
struct Recorder {
    applied: Vec<(u64, u64, Vec<u8>)>,
}

impl StateMachine for Recorder {
    fn apply(&mut self, index: u64, term: u64, data: &[u8]) {
        self.applied.push((index, term, data.to_vec()));
    }
    fn snapshot(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for (i, t, d) in &self.applied {
            b.extend_from_slice(&i.to_le_bytes());
            b.extend_from_slice(&t.to_le_bytes());
            b.extend_from_slice(&(d.len() as u32).to_le_bytes());
            b.extend_from_slice(d);
        }
        b
    }
    fn restore(&mut self, mut data: &[u8]) -> Result<(), RestoreError> {
        self.applied.clear();
        while !data.is_empty() {
            if data.len() < 20 {
                return Err(RestoreError("truncated".into()));
            }
            let i = u64::from_le_bytes(data[0..8].try_into().unwrap());
            let t = u64::from_le_bytes(data[8..16].try_into().unwrap());
            let n = u32::from_le_bytes(data[16..20].try_into().unwrap()) as usize;
            self.applied.push((i, t, data[20..20 + n].to_vec()));
            data = &data[20 + n..];
        }
        Ok(())
    }
}

struct Cluster {
    clock: Rc<SimClock>,
    disks: BTreeMap<u64, Disk>,
    nodes: BTreeMap<u64, QuorumNode>,
    sms: BTreeMap<u64, Recorder>,
    in_flight: Vec<Message>,
}

fn config(id: u64) -> QuorumConfig {
    QuorumConfig {
        snapshot_every: 5,
        max_in_flight_proposals: 4,
        ..QuorumConfig::new(id, vec![1, 2, 3])
    }
}

impl Cluster {
    fn new() -> Cluster {
        let clock = SimClock::new(1_000_000);
        let mut c = Cluster {
            clock,
            disks: BTreeMap::new(),
            nodes: BTreeMap::new(),
            sms: BTreeMap::new(),
            in_flight: Vec::new(),
        };
        for id in 1..=3 {
            let sim = SimDisk::new(id);
            sim.set_sync_latency(
                &c.clock,
                Duration::from_micros(50),
                Duration::from_micros(500),
            );
            c.disks.insert(id, Disk::Sim(sim));
            c.open(id);
        }
        c
    }

    fn open(&mut self, id: u64) {
        let mut sm = Recorder::default();
        let node = self
            .clock
            .block_on(QuorumNode::open(
                &self.disks[&id],
                Clock::Sim(self.clock.clone()),
                format!("/data/quorum-{id}").as_ref(),
                config(id),
                &mut sm,
            ))
            .unwrap();
        self.nodes.insert(id, node);
        self.sms.insert(id, sm);
    }

    /// Advances every node and delivers what they sent, until quiet.
    fn settle(&mut self) {
        for _ in 0..100 {
            for (id, node) in self.nodes.iter_mut() {
                let sm = self.sms.get_mut(id).unwrap();
                self.clock
                    .block_on(node.advance(sm, &mut self.in_flight))
                    .unwrap();
            }
            if self.in_flight.is_empty() {
                return;
            }
            for m in std::mem::take(&mut self.in_flight) {
                if let Some(n) = self.nodes.get_mut(&m.to) {
                    let _ = n.step(m);
                }
            }
        }
        panic!("the cluster does not settle");
    }

    fn tick_until_leader(&mut self) -> u64 {
        for _ in 0..200 {
            for n in self.nodes.values_mut() {
                n.tick();
            }
            self.clock.run_for(Duration::from_millis(10));
            self.settle();
            if let Some((id, _)) = self.nodes.iter().find(|(_, n)| n.is_leader()) {
                return *id;
            }
        }
        panic!("no leader");
    }
}

#[test]
fn elect_propose_refuse_and_restart() {
    let mut c = Cluster::new();
    let leader = c.tick_until_leader();
    let follower = (1..=3).find(|&i| i != leader).unwrap();

    // Followers refuse, naming the leader.
    match c.nodes.get_mut(&follower).unwrap().propose(b"x".to_vec()) {
        Err(QuorumError::NotLeader { leader_hint }) => assert_eq!(leader_hint, Some(leader)),
        other => panic!("{other:?}"),
    }
    // Too large.
    let big = vec![0u8; quorum::log_store::MAX_ENTRY_BYTES + 1];
    assert!(matches!(
        c.nodes.get_mut(&leader).unwrap().propose(big),
        Err(QuorumError::ProposalTooLarge { .. })
    ));
    // The bound on proposals in flight (4 in this config).
    let mut proposed = Vec::new();
    let refused = loop {
        match c
            .nodes
            .get_mut(&leader)
            .unwrap()
            .propose(vec![proposed.len() as u8; 3])
        {
            Ok(p) => proposed.push(p),
            Err(e) => break e,
        }
        assert!(proposed.len() <= 4);
    };
    assert!(
        matches!(refused, QuorumError::TooManyInFlight { max: 4, .. }),
        "{refused}"
    );
    assert_eq!(proposed.len(), 4);
    c.settle();
    // Every voter applied every proposal at the index and term `propose` returned.
    for sm in c.sms.values() {
        for (k, p) in proposed.iter().enumerate() {
            assert!(
                sm.applied.contains(&(p.index, p.term, vec![k as u8; 3])),
                "{p:?} missing from {:?}",
                sm.applied
            );
        }
    }
    let commit = c.nodes[&leader].commit_index();
    assert_eq!(commit, proposed.last().unwrap().index);
    // The leader's view for DescribeQuorum.
    let progress = c.nodes[&leader].voter_progress();
    assert_eq!(progress.len(), 3);
    for p in &progress {
        assert_eq!(p.match_index, Some(commit), "{progress:?}");
        assert!(p.last_contact_ms.is_some());
    }
    assert!(c.nodes[&follower]
        .voter_progress()
        .iter()
        .all(|p| p.match_index.is_none()));

    // Messages not meant for this voter are refused, typed.
    let mut m = Message {
        to: 9,
        from: leader,
        ..Default::default()
    };
    assert!(matches!(
        c.nodes.get_mut(&follower).unwrap().step(m.clone()),
        Err(QuorumError::BadMessage(_))
    ));
    m.to = follower;
    m.from = 7;
    assert!(matches!(
        c.nodes.get_mut(&follower).unwrap().step(m),
        Err(QuorumError::BadMessage(_))
    ));

    // More than `snapshot_every` entries were applied: the log was compacted.
    assert!(c.nodes[&follower].log().first_index() > 1);

    // A follower restarts from disk (kill -9): its state machine comes back from the
    // snapshot plus the committed entries after it.
    let before = c.sms[&follower].clone();
    c.nodes.remove(&follower);
    if let Disk::Sim(d) = &c.disks[&follower] {
        d.crash();
    }
    c.open(follower);
    c.settle();
    for n in c.nodes.values_mut() {
        n.tick();
    }
    c.settle();
    assert_eq!(c.sms[&follower], before);
}
