//! The quorum on the real disk (glommio's io_uring fdatasyncs, real directory syncs): the log
//! store survives reopening and compaction, and a single-voter quorum elects itself,
//! commits, compacts and comes back from disk with its state machine restored.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

use quorum::log_store::LogStore;
use quorum::{Message, QuorumConfig, QuorumNode, RestoreError, StateMachine};
use raft::eraftpb::Entry;
use storage::{Clock, Disk};

fn run<F: std::future::Future>(f: F) -> F::Output {
    glommio::LocalExecutorBuilder::default()
        .make()
        .expect("glommio executor")
        .run(f)
}

#[derive(Default)]
struct Sum {
    total: u64,
    applied: Vec<u64>,
}

impl StateMachine for Sum {
    fn apply(&mut self, index: u64, _term: u64, data: &[u8]) {
        if data.len() == 8 {
            self.total += u64::from_le_bytes(data.try_into().unwrap());
        }
        self.applied.push(index);
    }
    fn snapshot(&self) -> Vec<u8> {
        self.total.to_le_bytes().to_vec()
    }
    fn restore(&mut self, data: &[u8]) -> Result<(), RestoreError> {
        let bytes: [u8; 8] = data
            .try_into()
            .map_err(|_| RestoreError(format!("{} bytes", data.len())))?;
        self.total = u64::from_le_bytes(bytes);
        Ok(())
    }
}

#[test]
fn log_store_on_the_real_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("quorum/voter-1");
    run(async move {
        let disk = Disk::Real;
        let mut s = LogStore::open(&disk, &dir, &[1]).await.unwrap();
        let ents: Vec<Entry> = (1..=20)
            .map(|i| Entry {
                index: i,
                term: 1,
                data: vec![i as u8; 100].into(),
                ..Default::default()
            })
            .collect();
        s.persist(
            &ents,
            Some(&raft::eraftpb::HardState {
                term: 1,
                vote: 1,
                commit: 20,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
        s.compact(15, 1, b"sm".to_vec()).await.unwrap();
        drop(s);
        let s = LogStore::open(&disk, &dir, &[1]).await.unwrap();
        assert_eq!((s.first_index(), s.last_index()), (16, 20));
        assert_eq!(&s.snapshot_ref().data[..], b"sm");
        assert_eq!(s.hard_state().commit, 20);
    });
}

#[test]
fn single_voter_quorum_on_the_real_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("quorum");
    run(async move {
        let config = QuorumConfig {
            snapshot_every: 4,
            ..QuorumConfig::new(1, vec![1])
        };
        let mut sm = Sum::default();
        let mut node = QuorumNode::open(&Disk::Real, Clock::Real, &dir, config.clone(), &mut sm)
            .await
            .unwrap();
        let mut out: Vec<Message> = Vec::new();
        for _ in 0..100 {
            node.tick();
            node.advance(&mut sm, &mut out).await.unwrap();
            if node.is_leader() {
                break;
            }
        }
        assert!(node.is_leader(), "a lone voter elects itself");
        for v in 1..=10u64 {
            node.propose(v.to_le_bytes().to_vec()).unwrap();
            node.advance(&mut sm, &mut out).await.unwrap();
        }
        assert_eq!(sm.total, 55);
        assert!(out.is_empty(), "nobody to send to");
        let applied = node.applied_index();
        assert_eq!(node.commit_index(), applied);
        assert!(node.log().first_index() > 1, "compacted");
        drop(node);

        let mut sm = Sum::default();
        let mut node = QuorumNode::open(&Disk::Real, Clock::Real, &dir, config, &mut sm)
            .await
            .unwrap();
        // The durable commit may trail the last one (it reaches the disk with the next
        // write), so the restored state machine may lag until a leader commits again.
        node.advance(&mut sm, &mut out).await.unwrap();
        assert!(sm.total >= 45, "{}", sm.total);
        for _ in 0..100 {
            node.tick();
            node.advance(&mut sm, &mut out).await.unwrap();
            if node.applied_index() >= applied {
                break;
            }
        }
        assert_eq!(sm.total, 55, "snapshot plus re-applied entries");
        assert!(node.applied_index() >= applied);
    });
}
