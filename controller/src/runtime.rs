//! One controller voter at run time: the quorum node, its links to the other voters, the
//! metadata state machine, and the loop that drives them on a glommio executor of its own.
//!
//! The loop waits for whichever comes first: a message from a voter, a command (a proposal
//! of metadata records, a status query), or the next tick of the quorum's logical clock
//! (`tick`: an election takes `election_tick` of them). After each it runs the node's Ready
//! loop (persist, send, apply), hands the outgoing messages to the links, and answers the
//! proposals whose entries were applied: with their index when the entry applied at that
//! index has the proposal's term, else `Lost` (a leader change dropped it).
//!
//! Brokers' registrations and heartbeats, session expiry and AlterPartition compute their
//! records from the applied image, so on the active controller they wait (in their channel)
//! while a record of an earlier one, or an entry of an earlier leader, is in the log and not
//! applied yet (`settled_at`): an ISR change and a fencing validated against the same image
//! would otherwise undo each other (Kafka validates against its uncommitted state instead).

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::{mpsc, oneshot};
use futures::StreamExt;
use glommio::channels::local_channel::{self, LocalReceiver};
use glommio::net::TcpListener;
use metadata::alter_partition::{alter_partition, refuse_all};
use metadata::broker_lifecycle::BrokerLifecycle;
pub use metadata::cluster::ProposeError;
use metadata::cluster::{ClusterLink, Proposal};
use metadata::elections::{elect_leaders, elect_unclean_where_allowed, rebalance};
use metadata::image::Image;
use metadata::records::MetadataRecord;
use net::peer::{self, PeerLink};
use quorum::{Message, Proposed, QuorumConfig, QuorumError, QuorumNode, VoterProgress};
use storage::{Clock, Disk};
use wire::ErrorCode;

use crate::listener::LifecycleCall;
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

/// A voter that is part of a cluster of brokers: it publishes the committed image to this
/// node's broker shards, takes their proposals, serves brokers' registrations and heartbeats
/// (KIP-631) and hands forwarded admin requests to the metadata core.
pub struct ClusterRole {
    pub link: Arc<ClusterLink>,
    pub proposals: mpsc::Receiver<Proposal>,
    pub cluster_id: String,
    /// `broker.session.timeout.ms`.
    pub session_timeout_ms: i64,
    pub elections: ElectionConfig,
}

/// The active controller's own elections (see `metadata::elections`).
#[derive(Clone, Copy, Debug)]
pub struct ElectionConfig {
    /// `auto.leader.rebalance.enable`.
    pub auto_rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`.
    pub rebalance_interval: Duration,
    /// `unclean.leader.election.enable`: the static default for topics without an override.
    pub unclean_default: bool,
}

impl Default for ElectionConfig {
    fn default() -> ElectionConfig {
        ElectionConfig {
            auto_rebalance: true,
            rebalance_interval: Duration::from_secs(300),
            unclean_default: false,
        }
    }
}

/// Lifecycle calls waiting for the loop at most (a broker sends one at a time).
pub const MAX_LIFECYCLE_CALLS: usize = 1024;

/// What to do with the outcome of a proposal once its entry is applied (or lost).
type Answer = Box<dyn FnOnce(Result<u64, ProposeError>)>;

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
    Proposal(Option<Proposal>),
    Lifecycle(Option<LifecycleCall>),
}

/// Runs voter `config.id` until `stop` is set (checked at least every tick) or its command
/// channel closes.
pub async fn run(
    config: RuntimeConfig,
    disk: Disk,
    listener: TcpListener,
    commands: LocalReceiver<Command>,
    cluster: Option<ClusterRole>,
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
    let (lifecycle_tx, lifecycle_calls) = local_channel::new_bounded(MAX_LIFECYCLE_CALLS);
    let handler = crate::listener::handler(
        Rc::new(lifecycle_tx),
        cluster.as_ref().map(|c| c.link.clone()),
    );
    let _server = glommio::spawn_local(peer::serve(
        listener,
        Rc::new(inbox_tx),
        dropped,
        Some(handler),
    ));
    let (link, mut proposals, cluster_id, session_timeout_ms, elections) = match cluster {
        Some(c) => (
            Some(c.link),
            Some(c.proposals),
            c.cluster_id,
            c.session_timeout_ms,
            c.elections,
        ),
        None => (None, None, String::new(), 0, ElectionConfig::default()),
    };
    // When the active controller last looked for partitions to rebalance, and at which
    // applied index it last looked for unclean elections (only a new image can need one).
    let mut last_rebalance = Instant::now();
    let mut unclean_checked_at: u64 = 0;
    let started = Instant::now();
    let now_ms = || i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    // The active controller's view of brokers' sessions (rebuilt on each new leadership).
    let mut lifecycle: Option<BrokerLifecycle> = None;
    // The last log index this controller's lifecycle and ISR decisions must see applied
    // before the next one is made (see the module docs).
    let mut settled_at: u64 = 0;
    let mut published: u64 = u64::MAX;
    tracing::info!(
        id = config.id,
        voters = config.voters.len(),
        "controller started"
    );

    let mut pending: Vec<(Proposed, Answer)> = Vec::new();
    let mut outbox: Vec<Message> = Vec::new();
    let mut next_tick = Instant::now() + config.tick;
    while !stop.get() {
        let wait = next_tick.saturating_duration_since(Instant::now());
        let settled = lifecycle.is_none() || sm.last_applied().0 >= settled_at;
        let mut waits: Vec<Pin<Box<dyn Future<Output = Event> + '_>>> = vec![
            Box::pin(async { Event::Peer(inbox.recv().await) }),
            Box::pin(async { Event::Command(commands.recv().await) }),
            Box::pin(async move {
                glommio::timer::sleep(wait).await;
                Event::Tick
            }),
        ];
        if settled {
            waits.push(Box::pin(async {
                Event::Lifecycle(lifecycle_calls.recv().await)
            }));
        }
        if let Some(proposals) = proposals.as_mut() {
            waits.push(Box::pin(async { Event::Proposal(proposals.next().await) }));
        }
        let (event, _, _) = futures::future::select_all(waits).await;
        match event {
            Event::Tick => {
                node.tick();
                if let Some(lifecycle) = lifecycle.as_mut() {
                    if settled {
                        let image = sm.image();
                        let mut records = lifecycle.expire(&image, now_ms());
                        if records.is_empty() {
                            records = timed_elections(
                                &image,
                                &elections,
                                &mut last_rebalance,
                                &mut unclean_checked_at,
                                sm.last_applied().0,
                            );
                        }
                        if !records.is_empty() {
                            if let Ok(proposed) = node.propose(encode_batch(&records)) {
                                settled_at = proposed.index;
                                pending.push((proposed, Box::new(|_| {})));
                            }
                        }
                    }
                }
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
            Event::Command(Some(Command::Propose { records, reply }))
            | Event::Proposal(Some(Proposal { records, reply })) => {
                propose(
                    &mut node,
                    &mut pending,
                    &records,
                    Box::new(move |outcome| {
                        let _ = reply.send(outcome);
                    }),
                );
            }
            Event::Command(Some(Command::Status { reply }))
            | Event::Lifecycle(Some(LifecycleCall::Describe { reply })) => {
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
            Event::Lifecycle(Some(call)) => {
                let image = sm.image();
                let now = now_ms();
                match (lifecycle.as_mut(), call) {
                    (None, call) => call.refuse(ErrorCode::NotController.code()),
                    (Some(lifecycle), LifecycleCall::Register { request, reply }) => {
                        let next = node.next_index();
                        match lifecycle.register(&image, &cluster_id, request, next, now) {
                            Err(error) => {
                                let _ = reply.send(Err(error.error_code()));
                            }
                            Ok(outcome) => {
                                let epoch = outcome.reply;
                                settled_at = propose(
                                    &mut node,
                                    &mut pending,
                                    &outcome.records,
                                    Box::new(move |applied| {
                                        let answer = match applied {
                                            Ok(index) if index == next => Ok(epoch),
                                            _ => Err(ErrorCode::NotController.code()),
                                        };
                                        let _ = reply.send(answer);
                                    }),
                                )
                                .unwrap_or(settled_at);
                            }
                        }
                    }
                    (Some(_), LifecycleCall::Describe { .. }) => {} // matched before this arm
                    (
                        Some(_),
                        LifecycleCall::AlterPartition {
                            version,
                            request,
                            reply,
                        },
                    ) => {
                        let altered = alter_partition(&image, version, &request);
                        if altered.records.is_empty() {
                            let _ = reply.send(altered.response);
                        } else {
                            let response = altered.response;
                            settled_at = propose(
                                &mut node,
                                &mut pending,
                                &altered.records,
                                Box::new(move |applied| {
                                    let _ = reply.send(match applied {
                                        Ok(_) => response,
                                        Err(_) => refuse_all(ErrorCode::NotController.code()),
                                    });
                                }),
                            )
                            .unwrap_or(settled_at);
                        }
                    }
                    (Some(_), LifecycleCall::ElectLeaders { request, reply }) => {
                        let (records, response) = elect_leaders(&image, &request);
                        if records.is_empty() {
                            let _ = reply.send(response);
                        } else {
                            tracing::info!(
                                elections = records.len(),
                                kind = request.election_type,
                                "ElectLeaders"
                            );
                            settled_at = propose(
                                &mut node,
                                &mut pending,
                                &records,
                                Box::new(move |applied| {
                                    let _ = reply.send(match applied {
                                        Ok(_) => response,
                                        Err(_) => crate::listener::refuse_elections(
                                            ErrorCode::NotController.code(),
                                        ),
                                    });
                                }),
                            )
                            .unwrap_or(settled_at);
                        }
                    }
                    (Some(lifecycle), LifecycleCall::Heartbeat { request, reply }) => {
                        match lifecycle.heartbeat(&image, request, now) {
                            Err(error) => {
                                let _ = reply.send(Err(error.error_code()));
                            }
                            Ok(outcome) if outcome.records.is_empty() => {
                                let _ = reply.send(Ok(outcome.reply));
                            }
                            Ok(outcome) => {
                                let answer = outcome.reply;
                                settled_at = propose(
                                    &mut node,
                                    &mut pending,
                                    &outcome.records,
                                    Box::new(move |applied| {
                                        let _ = reply.send(
                                            applied
                                                .map(|_| answer)
                                                .map_err(|_| ErrorCode::NotController.code()),
                                        );
                                    }),
                                )
                                .unwrap_or(settled_at);
                            }
                        }
                    }
                }
            }
            Event::Peer(None) | Event::Command(None) | Event::Proposal(None) => break,
            Event::Lifecycle(None) => {}
        }
        node.advance(&mut sm, &mut outbox).await?;
        for msg in outbox.drain(..) {
            send(&mut node, &links, msg);
        }
        answer_applied(&mut pending, &sm);
        match (node.is_leader(), lifecycle.is_some()) {
            (true, false) => {
                tracing::info!(
                    id = config.id,
                    term = node.term(),
                    "this node is the active controller"
                );
                lifecycle = Some(BrokerLifecycle::new(session_timeout_ms));
                // Entries of earlier leaders (and this term's first) apply before any decision.
                settled_at = node.next_index().saturating_sub(1);
            }
            (false, true) => lifecycle = None,
            _ => {}
        }
        if let Some(link) = &link {
            let (applied, _) = sm.last_applied();
            let image = (applied != published).then(|| (sm.image(), applied));
            published = applied;
            link.publish(image, node.leader_id());
        }
    }
    for (_, answer) in pending {
        answer(Err(ProposeError::Lost));
    }
    tracing::info!(id = config.id, "controller stopped");
    Ok(())
}

/// The active controller's elections on its timers, once its decisions have settled: unclean
/// elections where topics allow them (looked for after each new image), and every
/// `rebalance_interval` a pass moving leadership back to preferred replicas.
fn timed_elections(
    image: &Image,
    config: &ElectionConfig,
    last_rebalance: &mut Instant,
    unclean_checked_at: &mut u64,
    applied: u64,
) -> Vec<MetadataRecord> {
    if *unclean_checked_at != applied {
        *unclean_checked_at = applied;
        let records = elect_unclean_where_allowed(image, config.unclean_default);
        if !records.is_empty() {
            tracing::warn!(
                partitions = records.len(),
                "unclean leader election: records the old in-sync replicas held beyond the new leaders' logs are lost"
            );
            return records;
        }
    }
    if config.auto_rebalance && last_rebalance.elapsed() >= config.rebalance_interval {
        *last_rebalance = Instant::now();
        let records = rebalance(image);
        if !records.is_empty() {
            tracing::info!(
                partitions = records.len(),
                "leadership moved back to preferred replicas"
            );
        }
        return records;
    }
    Vec::new()
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

/// Proposes `records` as one entry; `answer` hears the outcome (at once when refused).
/// Returns the entry's index when proposed.
fn propose(
    node: &mut QuorumNode,
    pending: &mut Vec<(Proposed, Answer)>,
    records: &[MetadataRecord],
    answer: Answer,
) -> Option<u64> {
    match node.propose(encode_batch(records)) {
        Ok(proposed) => {
            let index = proposed.index;
            pending.push((proposed, answer));
            Some(index)
        }
        Err(QuorumError::NotLeader { leader_hint }) => {
            answer(Err(ProposeError::NotLeader {
                leader: leader_hint,
            }));
            None
        }
        Err(error) => {
            answer(Err(ProposeError::Refused(error.to_string())));
            None
        }
    }
}

/// Answers the proposals whose index has been applied: by the entry's term at that index.
fn answer_applied(pending: &mut Vec<(Proposed, Answer)>, sm: &MetadataStateMachine) {
    let (applied, _) = sm.last_applied();
    let mut i = 0;
    while i < pending.len() {
        if pending[i].0.index > applied {
            i += 1;
            continue;
        }
        let (proposed, answer) = pending.swap_remove(i);
        let outcome = match sm.term_at(proposed.index) {
            Some(term) if term == proposed.term => Ok(proposed.index),
            _ => Err(ProposeError::Lost),
        };
        answer(outcome);
    }
}
