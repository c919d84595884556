//! One controller voter at run time: the quorum node, its links to the other voters, the
//! metadata state machine, and the loop that drives them on a glommio executor of its own.
//!
//! The loop waits for whichever comes first: a message from a voter, a command (a proposal
//! of metadata records, a status query), or the next tick of the quorum's logical clock
//! (`tick`: an election takes `election_tick` of them). After each it runs the node's Ready
//! loop (persist, send, apply), hands the outgoing messages to the links, and answers the
//! proposals whose entries were applied: with their index when the entry applied at that
//! index has the proposal's term, else `Lost` (a leader change dropped it).

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use glommio::channels::local_channel::{self, LocalReceiver};
use glommio::net::TcpListener;
use metadata::image::Image;
use metadata::records::MetadataRecord;
use net::peer::{self, PeerLink};
use quorum::{Message, Proposed, QuorumConfig, QuorumError, QuorumNode, VoterProgress};
use storage::{Clock, Disk};

use crate::state_machine::{encode_batch, MetadataStateMachine};

/// Messages from other voters waiting for the loop at most (more are dropped: Raft re-sends).
pub const MAX_INBOX: usize = 4096;

/// A voter of the quorum and where its CONTROLLER listener is.
#[derive(Clone, Debug)]
pub struct Voter {
    pub id: u64,
    pub addr: SocketAddr,
}

#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    pub id: u64,
    pub voters: Vec<Voter>,
    /// The quorum's log directory.
    pub dir: PathBuf,
    /// One tick of the quorum's clock.
    pub tick: Duration,
    /// Ticks without a leader before an election (`controller.quorum.election.timeout.ms`
    /// divided by `tick`).
    pub election_ticks: usize,
}

/// What a caller asks of the controller.
pub enum Command {
    /// Commit `records` through the quorum; answered with the entry's index once applied.
    Propose {
        records: Vec<MetadataRecord>,
        reply: oneshot::Sender<Result<u64, ProposeError>>,
    },
    Status {
        reply: oneshot::Sender<Status>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error("not the active controller (the leader is {leader:?})")]
    NotLeader { leader: Option<u64> },
    #[error("the proposal was lost to a change of leader")]
    Lost,
    #[error("the proposal was refused: {0}")]
    Refused(String),
}

/// The controller as DescribeQuorum and tests see it.
#[derive(Clone, Debug)]
pub struct Status {
    pub id: u64,
    pub leader: Option<u64>,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub image: Arc<Image>,
    pub voters: Vec<VoterProgress>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    #[error("controller listener: {0}")]
    Listener(std::io::Error),
}

enum Event {
    Tick,
    Peer(Option<(i32, Vec<u8>)>),
    Command(Option<Command>),
}

/// Runs voter `config.id` until `stop` is set (checked at least every tick) or its command
/// channel closes.
pub async fn run(
    config: RuntimeConfig,
    disk: Disk,
    listener: TcpListener,
    commands: LocalReceiver<Command>,
    stop: Rc<Cell<bool>>,
) -> Result<(), RuntimeError> {
    let ids: Vec<u64> = config.voters.iter().map(|v| v.id).collect();
    let mut quorum_config = QuorumConfig::new(config.id, ids);
    quorum_config.election_tick = config.election_ticks.max(2);
    quorum_config.heartbeat_tick = (config.election_ticks / 5).max(1);
    let mut sm = MetadataStateMachine::default();
    let mut node =
        QuorumNode::open(&disk, Clock::Real, &config.dir, quorum_config, &mut sm).await?;
    let me = i32::try_from(config.id).unwrap_or(i32::MAX);
    let links: HashMap<u64, PeerLink> = config
        .voters
        .iter()
        .filter(|v| v.id != config.id)
        .map(|v| (v.id, PeerLink::spawn(me, v.addr)))
        .collect();
    let (inbox_tx, inbox) = local_channel::new_bounded(MAX_INBOX);
    let dropped = Rc::new(Cell::new(0));
    let _server = glommio::spawn_local(peer::serve(listener, Rc::new(inbox_tx), dropped));
    tracing::info!(
        id = config.id,
        voters = config.voters.len(),
        "controller started"
    );

    let mut pending: Vec<(Proposed, oneshot::Sender<Result<u64, ProposeError>>)> = Vec::new();
    let mut outbox: Vec<Message> = Vec::new();
    let mut next_tick = Instant::now() + config.tick;
    while !stop.get() {
        let wait = next_tick.saturating_duration_since(Instant::now());
        let waits: Vec<Pin<Box<dyn Future<Output = Event> + '_>>> = vec![
            Box::pin(async { Event::Peer(inbox.recv().await) }),
            Box::pin(async { Event::Command(commands.recv().await) }),
            Box::pin(async move {
                glommio::timer::sleep(wait).await;
                Event::Tick
            }),
        ];
        let (event, _, _) = futures::future::select_all(waits).await;
        match event {
            Event::Tick => {
                node.tick();
                next_tick += config.tick;
                let now = Instant::now();
                if next_tick < now {
                    next_tick = now + config.tick; // behind: do not tick in a burst
                }
            }
            Event::Peer(Some((from, bytes))) => match quorum::codec::decode(&bytes) {
                Ok(msg) => {
                    if let Err(error) = node.step(msg) {
                        tracing::debug!(from, %error, "controller: message not taken");
                    }
                }
                Err(error) => tracing::warn!(from, %error, "controller: undecodable message"),
            },
            Event::Command(Some(Command::Propose { records, reply })) => {
                match node.propose(encode_batch(&records)) {
                    Ok(proposed) => pending.push((proposed, reply)),
                    Err(QuorumError::NotLeader { leader_hint }) => {
                        let _ = reply.send(Err(ProposeError::NotLeader {
                            leader: leader_hint,
                        }));
                    }
                    Err(error) => {
                        let _ = reply.send(Err(ProposeError::Refused(error.to_string())));
                    }
                }
            }
            Event::Command(Some(Command::Status { reply })) => {
                let _ = reply.send(Status {
                    id: config.id,
                    leader: node.leader_id(),
                    term: node.term(),
                    commit: node.commit_index(),
                    applied: node.applied_index(),
                    image: sm.image(),
                    voters: node.voter_progress(),
                });
            }
            Event::Peer(None) | Event::Command(None) => break,
        }
        node.advance(&mut sm, &mut outbox).await?;
        for msg in outbox.drain(..) {
            send(&mut node, &links, msg);
        }
        answer_applied(&mut pending, &sm);
    }
    for (_, reply) in pending {
        let _ = reply.send(Err(ProposeError::Lost));
    }
    tracing::info!(id = config.id, "controller stopped");
    Ok(())
}

/// Hands `msg` to the link to its voter, telling raft when it could not go.
fn send(node: &mut QuorumNode, links: &HashMap<u64, PeerLink>, msg: Message) {
    let to = msg.to;
    let is_snapshot = msg.get_msg_type() == raft::eraftpb::MessageType::MsgSnapshot;
    let queued = match (links.get(&to), quorum::codec::encode(&msg)) {
        (Some(link), Ok(bytes)) => link.send(bytes),
        (None, _) => false,
        (_, Err(error)) => {
            tracing::warn!(to, %error, "controller: message not encodable");
            false
        }
    };
    if is_snapshot {
        // Queued counts as delivered: a snapshot lost on the way leaves the follower behind,
        // its next append response says so, and the leader sends it again.
        node.report_snapshot(to, queued);
    }
    if !queued {
        node.report_unreachable(to);
    }
}

/// Answers the proposals whose index has been applied: by the entry's term at that index.
fn answer_applied(
    pending: &mut Vec<(Proposed, oneshot::Sender<Result<u64, ProposeError>>)>,
    sm: &MetadataStateMachine,
) {
    let (applied, _) = sm.last_applied();
    let mut i = 0;
    while i < pending.len() {
        if pending[i].0.index > applied {
            i += 1;
            continue;
        }
        let (proposed, reply) = pending.swap_remove(i);
        let outcome = match sm.term_at(proposed.index) {
            Some(term) if term == proposed.term => Ok(proposed.index),
            _ => Err(ProposeError::Lost),
        };
        let _ = reply.send(outcome);
    }
}
