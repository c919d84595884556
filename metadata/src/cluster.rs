//! The seam between a node's controller thread and its broker shards in a multi-node cluster:
//! the committed metadata image and the active controller, as the quorum last told them;
//! proposals of metadata records (the broker's metadata core staged them, see
//! [`crate::Controller::staged`]); and Kafka requests that other brokers forwarded to this
//! node's controller listener, for the metadata core to execute (KIP-590).
//!
//! Everything here crosses threads (the controller runs on an executor of its own), so it is
//! `Send + Sync`: atomics, a mutex held only to swap an `Arc`, bounded channels.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::channel::{mpsc, oneshot};

use crate::image::Image;
use crate::records::MetadataRecord;

/// Proposals waiting for the controller thread at most; past it a proposal is refused
/// (`ProposeError::Busy`), never queued without bound.
pub const MAX_PENDING_PROPOSALS: usize = 1024;
/// Forwarded requests waiting for the metadata core at most; past it the controller listener
/// closes the forwarding connection (the forwarding broker answers the client
/// NOT_CONTROLLER, which retries).
pub const MAX_PENDING_FORWARDS: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error("not the active controller (the leader is {leader:?})")]
    NotLeader { leader: Option<u64> },
    #[error("the proposal was lost to a change of leader")]
    Lost,
    #[error("the controller is busy: {MAX_PENDING_PROPOSALS} proposals are waiting")]
    Busy,
    #[error("the controller has stopped")]
    Stopped,
    #[error("the proposal was refused: {0}")]
    Refused(String),
}

/// Records to commit through the quorum, answered with the entry's index once applied.
pub struct Proposal {
    pub records: Vec<MetadataRecord>,
    pub reply: oneshot::Sender<Result<u64, ProposeError>>,
}

/// A Kafka request frame (no size prefix) another broker forwarded to the controller
/// listener, answered with the whole response frame (size prefix included), or `Err` with the
/// reason the connection must close.
pub struct ForwardedRequest {
    pub frame: Vec<u8>,
    pub reply: oneshot::Sender<Result<Vec<u8>, String>>,
}

/// The cluster id of a cluster whose `cluster.id` is not set (every node must agree: a
/// registration naming another is refused with INCONSISTENT_CLUSTER_ID).
pub const DEFAULT_CLUSTER_ID: &str = "kafka-tpc-cluster";

/// No active controller known.
pub const NO_LEADER: i32 = -1;

pub struct ClusterLink {
    pub node_id: i32,
    /// Every voter's controller listener, by node id.
    pub voters: BTreeMap<i32, SocketAddr>,
    leader: AtomicI32,
    /// Index of the last entry applied to `committed` (0: none yet).
    applied: AtomicU64,
    committed: Mutex<Arc<Image>>,
    /// Notified when the committed image or the active controller changes.
    pub changed: event_listener::Event,
    proposals: mpsc::Sender<Proposal>,
    forwarded: Mutex<Option<mpsc::Receiver<ForwardedRequest>>>,
    forward_sender: mpsc::Sender<ForwardedRequest>,
}

impl ClusterLink {
    /// The link, and the controller thread's end of the proposals.
    pub fn new(
        node_id: i32,
        voters: BTreeMap<i32, SocketAddr>,
    ) -> (Arc<ClusterLink>, mpsc::Receiver<Proposal>) {
        let (proposals, proposals_rx) = mpsc::channel(MAX_PENDING_PROPOSALS);
        let (forward, forwarded) = mpsc::channel(MAX_PENDING_FORWARDS);
        let link = Arc::new(ClusterLink {
            node_id,
            voters,
            leader: AtomicI32::new(NO_LEADER),
            applied: AtomicU64::new(0),
            committed: Mutex::new(Arc::new(Image::default())),
            changed: event_listener::Event::new(),
            proposals,
            forwarded: Mutex::new(Some(forwarded)),
            forward_sender: forward,
        });
        (link, proposals_rx)
    }

    /// The active controller's node id, if one is known.
    pub fn leader(&self) -> Option<i32> {
        Some(self.leader.load(Ordering::Acquire)).filter(|&id| id != NO_LEADER)
    }

    /// Whether this node's controller is the active one.
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.node_id)
    }

    /// The active controller's CONTROLLER listener, this node's own included.
    pub fn leader_addr(&self) -> Option<SocketAddr> {
        self.leader().and_then(|id| self.voters.get(&id).copied())
    }

    /// The active controller's listener, when it is another node.
    pub fn remote_leader(&self) -> Option<SocketAddr> {
        self.leader()
            .filter(|&id| id != self.node_id)
            .and_then(|id| self.voters.get(&id).copied())
    }

    /// The committed image and the index it was applied at.
    pub fn committed(&self) -> (Arc<Image>, u64) {
        let image = self
            .committed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        (image, self.applied.load(Ordering::Acquire))
    }

    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }

    /// Controller thread: the quorum applied entries up to `index` (building `image`), and
    /// `leader` leads.
    pub fn publish(&self, image: Option<(Arc<Image>, u64)>, leader: Option<u64>) {
        let leader = leader
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or(NO_LEADER);
        let mut changed = self.leader.swap(leader, Ordering::AcqRel) != leader;
        if let Some((image, index)) = image {
            *self
                .committed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = image;
            self.applied.store(index, Ordering::Release);
            changed = true;
        }
        if changed {
            self.changed.notify(usize::MAX);
        }
    }

    /// Proposes `records` and waits until they are applied (or refused).
    pub async fn propose(&self, records: Vec<MetadataRecord>) -> Result<u64, ProposeError> {
        let (reply, answer) = oneshot::channel();
        self.proposals
            .clone()
            .try_send(Proposal { records, reply })
            .map_err(|error| {
                if error.is_full() {
                    ProposeError::Busy
                } else {
                    ProposeError::Stopped
                }
            })?;
        answer.await.unwrap_or(Err(ProposeError::Stopped))
    }

    /// The metadata core's end of the forwarded requests (once).
    pub fn take_forwarded(&self) -> Option<mpsc::Receiver<ForwardedRequest>> {
        self.forwarded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// Hands a forwarded request to the metadata core; `false` when its queue is full or gone.
    pub fn forward(&self, request: ForwardedRequest) -> bool {
        self.forward_sender.clone().try_send(request).is_ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use futures::StreamExt;

    fn link() -> (Arc<ClusterLink>, mpsc::Receiver<Proposal>) {
        let voters = (1..=3)
            .map(|id| (id, SocketAddr::from(([127, 0, 0, 1], 9000 + id as u16))))
            .collect();
        ClusterLink::new(1, voters)
    }

    #[test]
    fn publish_names_the_leader_and_the_committed_image() {
        let (link, _proposals) = link();
        assert_eq!((link.leader(), link.remote_leader()), (None, None));
        let listener = link.changed.listen();
        let image = Image {
            offset: Some(5),
            ..Default::default()
        };
        link.publish(Some((Arc::new(image), 5)), Some(2));
        futures::executor::block_on(listener); // notified
        assert_eq!(link.leader(), Some(2));
        assert!(!link.is_leader());
        assert_eq!(link.remote_leader().unwrap().port(), 9002);
        assert_eq!(link.committed().1, 5);
        link.publish(None, Some(1));
        assert!(link.is_leader());
        assert_eq!(
            link.remote_leader(),
            None,
            "this node leads: nothing to forward to"
        );
        assert_eq!(link.applied(), 5, "no new image: the index stays");
    }

    #[test]
    fn proposals_are_answered_and_refused_when_the_controller_is_gone() {
        let (link, mut proposals) = link();
        let controller = std::thread::spawn(move || {
            let proposal = futures::executor::block_on(proposals.next()).unwrap();
            assert_eq!(proposal.records.len(), 1);
            proposal.reply.send(Ok(7)).unwrap();
            // Dropping the receiver: the controller stopped.
        });
        let record = MetadataRecord::RemoveTopic { topic_id: [1; 16] };
        assert_eq!(
            futures::executor::block_on(link.propose(vec![record.clone()])),
            Ok(7)
        );
        controller.join().unwrap();
        assert_eq!(
            futures::executor::block_on(link.propose(vec![record])),
            Err(ProposeError::Stopped)
        );
        // Forwarded requests: taken once by the metadata core; refused once it is gone.
        let mut forwarded = link.take_forwarded().unwrap();
        assert!(link.take_forwarded().is_none());
        let (reply, _answer) = futures::channel::oneshot::channel();
        assert!(link.forward(ForwardedRequest {
            frame: vec![0; 8],
            reply
        }));
        assert!(futures::executor::block_on(forwarded.next()).is_some());
        drop(forwarded);
        let (reply, _answer) = futures::channel::oneshot::channel();
        assert!(!link.forward(ForwardedRequest {
            frame: vec![0; 8],
            reply
        }));
    }
}
