//! The leader's side on the shard that owns a partition: follower fetches feed
//! `shard::replication::LeaderState`, appends and fetches move the high watermark (waking
//! consumers' long polls and parked acks=all produces), and ISR changes go to the active
//! controller as AlterPartition (KIP-497), one in flight per partition.

use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use shard::replication::{diverging_epoch, CommittedState, EpochEnd, LeaderState};
use wire::generated::alter_partition_request::{self, BrokerState};
use wire::generated::api::ApiKey;
use wire::generated::{AlterPartitionRequest, AlterPartitionResponse};
use wire::primitives::Uuid;
use wire::ErrorCode;

use super::state::Role;
use crate::metadata::image::Image;
use crate::metadata::records::TopicId;
use crate::shard::{Partition, Shard};

/// AlterPartition v3: topics by id, new ISR members with their broker epochs (KIP-903).
const ALTER_PARTITION_VERSION: i16 = 3;

/// Longest pause of the ISR check between two runs (it runs every half
/// `replica.lag.time.max.ms`, as Kafka's `isr-expiration` task, but at least this often so
/// that a caught-up follower joins promptly).
const ISR_CHECK_MAX_INTERVAL: Duration = Duration::from_millis(250);

/// Pause before sending an unanswered AlterPartition again.
const ALTER_PARTITION_RETRY: Duration = Duration::from_millis(100);

/// Milliseconds on a monotonic clock (lag is measured on it, never on the wall clock).
pub fn now_ms() -> i64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_millis() as i64
}

/// The followers that may join the ISR now: registered, unfenced, not shutting down
/// (KIP-841), fetching under their broker's registered epoch (KIP-903).
fn eligible(image: &Image, state: &LeaderState) -> Vec<i32> {
    state
        .followers()
        .iter()
        .filter(|f| {
            image.brokers.get(&f.broker).is_some_and(|b| {
                !b.fenced
                    && !b.in_controlled_shutdown
                    && f.broker_epoch_eligible(Some(b.broker_epoch))
            })
        })
        .map(|f| f.broker)
        .collect()
}

/// Moves the high watermark of a partition this node leads as far as the rules allow;
/// wakes whoever waits on it when it moved.
pub fn advance_high_watermark(shard: &Shard, partition: &Partition) -> bool {
    let image = shard.image();
    let min_insync = partition.config().min_insync_replicas.max(1) as usize;
    let lag = shard.config.replication.lag_time_max_ms;
    let end = partition.log.borrow().log_end_offset();
    let moved = match &mut *partition.replica.role.borrow_mut() {
        Role::Leader(state) => {
            let eligible = eligible(&image, state);
            state.maybe_advance_high_watermark(end, min_insync, now_ms(), lag, |b| {
                eligible.contains(&b)
            })
        }
        _ => None,
    };
    if let Some(hw) = moved {
        partition.replica.set_high_watermark(hw);
        partition.appended.notify(usize::MAX);
    }
    moved.is_some()
}

/// A follower's fetch of a partition this node leads: its progress recorded, the high
/// watermark moved, and `Some` DivergingEpoch when it must truncate first. Refused with
/// NOT_LEADER_OR_FOLLOWER when this node does not lead it or `broker` is no replica.
pub fn on_replica_fetch(
    shard: &Shard,
    key: (TopicId, i32),
    partition: &Rc<Partition>,
    broker: i32,
    broker_epoch: i64,
    fetch_offset: i64,
    last_fetched_epoch: i32,
) -> Result<Option<EpochEnd>, ErrorCode> {
    let (end, diverging) = {
        let log = partition.log.borrow();
        let end = log.log_end_offset();
        let diverging = diverging_epoch(
            |epoch| {
                log.end_offset_for_epoch(epoch)
                    .map(|(epoch, end_offset)| EpochEnd { epoch, end_offset })
            },
            fetch_offset,
            last_fetched_epoch,
        );
        (end, diverging)
    };
    {
        let mut role = partition.replica.role.borrow_mut();
        let Role::Leader(state) = &mut *role else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        if !state.note_follower_epoch(broker, broker_epoch) {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        // A diverging follower's offset says nothing of what it holds in common.
        if diverging.is_none()
            && !state.on_follower_fetch(broker, fetch_offset.min(end), end, now_ms())
        {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
    }
    if diverging.is_none() {
        advance_high_watermark(shard, partition);
        maybe_change_isr(shard, key, partition);
    }
    Ok(diverging)
}

/// Proposes the ISR change the rules call for now, if any and none is in flight.
pub fn maybe_change_isr(shard: &Shard, key: (TopicId, i32), partition: &Rc<Partition>) {
    let Some(link) = shard.cluster.clone() else {
        return;
    };
    let image = shard.image();
    let lag = shard.config.replication.lag_time_max_ms;
    let end = partition.log.borrow().log_end_offset();
    let request = {
        let mut role = partition.replica.role.borrow_mut();
        let Role::Leader(state) = &mut *role else {
            return;
        };
        let eligible = eligible(&image, state);
        let Some(isr) = state.next_isr_change(end, now_ms(), lag, |b| eligible.contains(&b)) else {
            return;
        };
        let me = shard.config.node_id;
        let Some(my_epoch) = image.brokers.get(&me).map(|b| b.broker_epoch) else {
            return;
        };
        tracing::info!(
            topic_id = ?Uuid(key.0), partition = key.1, from = ?state.isr(), to = ?isr,
            "proposing an ISR change"
        );
        let request = AlterPartitionRequest {
            broker_id: me,
            broker_epoch: my_epoch,
            topics: vec![alter_partition_request::TopicData {
                topic_id: Uuid(key.0),
                partitions: vec![alter_partition_request::PartitionData {
                    partition_index: key.1,
                    leader_epoch: state.leader_epoch(),
                    new_isr_with_epochs: isr
                        .iter()
                        .map(|&b| BrokerState {
                            broker_id: b,
                            // Kafka's: the epoch each follower's fetches named (KIP-903), so
                            // the controller refuses a member that has since restarted.
                            broker_epoch: if b == me {
                                my_epoch
                            } else {
                                state
                                    .followers()
                                    .iter()
                                    .find(|f| f.broker == b)
                                    .and_then(|f| f.broker_epoch)
                                    .unwrap_or(-1)
                            },
                            ..Default::default()
                        })
                        .collect(),
                    leader_recovery_state: 0,
                    partition_epoch: state.partition_epoch(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        state.begin_isr_change(isr);
        request
    };
    let partition = partition.clone();
    glommio::spawn_local(send_alter_partition(link, partition, request)).detach();
}

/// What the controller said to an ISR change.
enum Answer {
    Committed(CommittedState),
    /// OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA: not applied; the committed ISR stands.
    NotApplied,
    /// INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, ...: this leader is behind; the change
    /// stays in flight until the image brings the newer state.
    Stale,
    /// Not delivered, or NOT_CONTROLLER: it may or may not have been committed; sent again.
    Retry,
}

/// Sends `request` (one partition's ISR change) to the active controller until it is
/// answered, as Kafka's `AlterPartitionManager` does, and ends the change in flight as the
/// answer says (see `LeaderState::isr_change_done`).
async fn send_alter_partition(
    link: std::sync::Arc<crate::metadata::cluster::ClusterLink>,
    partition: Rc<Partition>,
    request: AlterPartitionRequest,
) {
    let leader_epoch = request.topics[0].partitions[0].leader_epoch;
    let still_pending = || match &*partition.replica.role.borrow() {
        Role::Leader(state) => state.leader_epoch() == leader_epoch && state.change_in_flight(),
        _ => false,
    };
    loop {
        let to = link.leader().and_then(|id| link.voters.get(&id).copied());
        let answer: Result<AlterPartitionResponse, _> = crate::shard::to_controller::call(
            to,
            ApiKey::AlterPartition,
            ALTER_PARTITION_VERSION,
            &request,
        )
        .await;
        let answer = match answer {
            Err(error) => {
                tracing::info!(%error, "AlterPartition not answered; sending it again");
                Answer::Retry
            }
            Ok(response) => classify(&response, leader_epoch),
        };
        match answer {
            Answer::Retry => {
                glommio::timer::sleep(ALTER_PARTITION_RETRY).await;
                if !still_pending() {
                    return;
                }
            }
            Answer::Stale => return,
            Answer::NotApplied => {
                if let Role::Leader(state) = &mut *partition.replica.role.borrow_mut() {
                    if state.leader_epoch() == leader_epoch {
                        state.isr_change_done(None);
                    }
                }
                return;
            }
            Answer::Committed(committed) => {
                if let Role::Leader(state) = &mut *partition.replica.role.borrow_mut() {
                    if state.leader_epoch() == leader_epoch {
                        state.isr_change_done(Some(&committed));
                    }
                }
                // A shrink may free the high watermark.
                partition.appended.notify(usize::MAX);
                return;
            }
        }
    }
}

fn classify(response: &AlterPartitionResponse, leader_epoch: i32) -> Answer {
    let code = if response.error_code != 0 {
        response.error_code
    } else {
        match response.topics.first().and_then(|t| t.partitions.first()) {
            None => return Answer::Retry,
            Some(p) if p.error_code == 0 => {
                return if p.leader_epoch == leader_epoch {
                    Answer::Committed(CommittedState {
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                        isr: p.isr.clone(),
                        replicas: Vec::new(),
                    })
                } else {
                    Answer::Stale
                };
            }
            Some(p) => p.error_code,
        }
    };
    tracing::info!(error = code, "AlterPartition refused");
    match ErrorCode::from_code(code) {
        Some(ErrorCode::NotController) => Answer::Retry,
        Some(ErrorCode::OperationNotAttempted) | Some(ErrorCode::IneligibleReplica) => {
            Answer::NotApplied
        }
        _ => Answer::Stale,
    }
}

/// The ISR check of one shard (Kafka's `isr-expiration` task): every partition it leads,
/// every half `replica.lag.time.max.ms` (at most `ISR_CHECK_MAX_INTERVAL`); also moves the
/// high watermark, which a shrink may free. Runs while the shard runs.
pub async fn isr_task(shard: Rc<Shard>) {
    let lag = shard.config.replication.lag_time_max_ms.max(2) as u64;
    let interval = Duration::from_millis(lag / 2).min(ISR_CHECK_MAX_INTERVAL);
    while !shard.replication.stopped.get() {
        glommio::timer::sleep(interval).await;
        for (key, partition) in shard.owned_partitions() {
            if partition.replica.is_leader() {
                maybe_change_isr(&shard, key, &partition);
                advance_high_watermark(&shard, &partition);
            }
        }
    }
}
