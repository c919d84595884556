//! How each transaction call runs on the shard that owns its transactional id: ask the state
//! machine, persist the transition it returns, then act on it (markers, the answer).

use std::rc::Rc;
use std::time::{Duration, Instant};

use transactions::{EndStep, InitStep, MarkerPlan, Transition};
use wire::record_batch::{BatchBuilder, Compression};
use wire::ErrorCode;

use super::calls::*;
use super::state::TxnPartition;
use super::{wall_ms, IMAGE_LAG_WAIT};
use crate::forward::Serve;
use crate::shard::Shard;

/// How long EndTxn waits for its markers before answering anyway: the outcome is durable
/// once the prepare record is, and markers not written by then keep being retried in the
/// background (the client's next transaction gets CONCURRENT_TRANSACTIONS until they are).
const MARKER_INLINE_WAIT: Duration = Duration::from_secs(5);

/// Pause between two attempts at the markers a transaction still lacks.
const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Routed here by a shard that already knows `partition` is this one's: waits (at most
/// `IMAGE_LAG_WAIT`) until this shard knows too.
async fn wait_known(shard: &Shard, partition: i32) {
    let deadline = Instant::now() + IMAGE_LAG_WAIT;
    loop {
        let learned = shard.txn.learned.listen();
        let in_image = shard
            .image()
            .topic(super::TXN_TOPIC)
            .is_some_and(|topic| topic.partition(partition).is_some());
        if in_image || shard.txn.partitions.borrow().contains_key(&partition) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let timer = glommio::timer::sleep(left);
        futures::pin_mut!(timer);
        futures::future::select(learned, timer).await;
    }
}

/// Appends `transition`'s record to `partition` (acks=all) and applies it once the append
/// succeeded; abandons it otherwise. A failed append is answered with Kafka's mapping
/// (`transactions::append_error`: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...).
pub(super) async fn persist(
    shard: &Rc<Shard>,
    partition: i32,
    transition: Transition,
) -> Result<(), ErrorCode> {
    let topic_id = shard.txn.with(partition, |_, topic_id| topic_id)?;
    let (key, value) = transition.record();
    let batch = BatchBuilder::new(Compression::None)
        .push(Some(&key), value.as_deref(), &[], wall_ms())
        .build();
    let result = crate::partition_ops::produce(shard, &topic_id, partition, -1, batch).await;
    let code = ErrorCode::from_code_or_unknown(result.error_code);
    let applied = shard.txn.with(partition, |coordinator, _| {
        if code == ErrorCode::None {
            coordinator.complete(transition);
        } else {
            coordinator.abandon(&transition);
        }
    });
    match (code, applied) {
        (ErrorCode::None, Ok(())) => Ok(()),
        (_, Err(code)) => Err(code),
        (code, _) => {
            tracing::warn!(
                partition,
                ?code,
                "writing a transaction state record failed"
            );
            Err(transactions::append_error(code))
        }
    }
}

/// Writes a prepared transaction's markers, retrying those that fail while this shard still
/// coordinates it, then persists its completion. Returns once complete (or given up).
pub(super) async fn finish(shard: Rc<Shard>, partition: i32, mut plan: MarkerPlan) {
    let mut attempts = 0u64;
    loop {
        plan.partitions = super::markers::write(&shard, &plan).await;
        if plan.partitions.is_empty() {
            break;
        }
        attempts += 1;
        if attempts % 50 == 1 {
            tracing::warn!(
                transactional_id = %plan.transactional_id,
                partitions = ?plan.partitions,
                attempts,
                "transaction markers not written yet; retrying"
            );
        }
        glommio::timer::sleep(MARKER_RETRY_BACKOFF).await;
        // Stop when this shard no longer coordinates the partition (the new coordinator
        // finishes the transaction when it loads it).
        if shard.txn.with(partition, |_, _| ()).is_err() {
            return;
        }
    }
    let now = wall_ms();
    let completion = shard.txn.with(partition, |coordinator, _| {
        coordinator.markers_written(&plan.transactional_id, now)
    });
    if let Ok(Some(transition)) = completion {
        if let Err(code) = persist(&shard, partition, transition).await {
            tracing::warn!(transactional_id = %plan.transactional_id, ?code, "completing a transaction failed; it is finished again at the next load");
        }
    }
}

/// `finish` in a task of its own, waited for at most `MARKER_INLINE_WAIT`.
async fn finish_waiting(shard: &Rc<Shard>, partition: i32, plan: MarkerPlan) {
    let handle = glommio::spawn_local(finish(shard.clone(), partition, plan)).detach();
    let timer = glommio::timer::sleep(MARKER_INLINE_WAIT);
    futures::pin_mut!(timer);
    futures::future::select(handle, timer).await;
}

impl Serve<Shard> for InitTxnProducer {
    async fn serve(self, shard: &Rc<Shard>) -> InitTxnReply {
        wait_known(shard, self.partition).await;
        // The state machine does not wait, so a new producer id (a new transactional id, an
        // epoch run out) is fetched only when a first try asks for one, and the call made
        // again with it: the machine changes nothing before it has the id.
        let mut fresh: Option<Result<i64, i16>> = None;
        let mut tries = 0;
        let step = loop {
            tries += 1;
            let mut needed = false;
            let mut new_id = || match fresh.take() {
                Some(Ok(id)) => Ok(id),
                Some(Err(code)) => Err(ErrorCode::from_code_or_unknown(code)),
                None => {
                    needed = true;
                    Err(ErrorCode::CoordinatorLoadInProgress)
                }
            };
            let now = wall_ms();
            let step = shard.txn.with(self.partition, |coordinator, _| {
                coordinator.init_producer_id(
                    &self.transactional_id,
                    self.txn_timeout_ms,
                    self.expected,
                    now,
                    &mut new_id,
                )
            })?;
            // One id is all a call needs; a second request for one ends the tries.
            if !needed || tries > 2 {
                break step;
            }
            fresh = Some(shard.next_producer_id().await);
        };
        match step {
            InitStep::Err(code) => Err(code),
            InitStep::Persist(transition) => {
                let answer = transition.producer_id_and_epoch();
                persist(shard, self.partition, transition).await?;
                Ok(answer)
            }
            InitStep::AbortFirst(transition, plan) => {
                // Kafka: the open transaction is aborted with the epoch bumped (fencing its
                // producer); this client is told to retry meanwhile.
                persist(shard, self.partition, transition).await?;
                finish_waiting(shard, self.partition, plan).await;
                Err(ErrorCode::ConcurrentTransactions)
            }
        }
    }
}

impl Serve<Shard> for AddToTxn {
    async fn serve(self, shard: &Rc<Shard>) -> AddToTxnReply {
        wait_known(shard, self.partition).await;
        let now = wall_ms();
        if self.verify_only {
            let verified = shard.txn.with(self.partition, |coordinator, _| {
                coordinator.verify_partitions(
                    &self.transactional_id,
                    self.producer_id,
                    self.producer_epoch,
                    &self.partitions,
                )
            })??;
            return Ok(verified.into_iter().map(|(_, code)| code).collect());
        }
        let transition = shard.txn.with(self.partition, |coordinator, _| {
            coordinator.add_partitions(
                &self.transactional_id,
                self.producer_id,
                self.producer_epoch,
                &self.partitions,
                now,
            )
        })??;
        if let Some(transition) = transition {
            persist(shard, self.partition, transition).await?;
        }
        Ok(vec![ErrorCode::None; self.partitions.len()])
    }
}

impl Serve<Shard> for EndTxn {
    async fn serve(self, shard: &Rc<Shard>) -> EndTxnReply {
        wait_known(shard, self.partition).await;
        let now = wall_ms();
        let step = shard.txn.with(self.partition, |coordinator, _| {
            coordinator.end_txn(
                &self.transactional_id,
                self.producer_id,
                self.producer_epoch,
                self.commit,
                now,
            )
        })?;
        match step {
            EndStep::Err(code) => Err(code),
            EndStep::AlreadyDone => Ok((self.producer_id, self.producer_epoch)),
            EndStep::Prepare(transition, plan) => {
                let answer = transition.producer_id_and_epoch();
                persist(shard, self.partition, transition).await?;
                finish_waiting(shard, self.partition, plan).await;
                Ok(answer)
            }
        }
    }
}

fn view(txn: &transactions::TxnMetadata) -> TxnView {
    TxnView {
        transactional_id: txn.transactional_id.clone(),
        state: txn.state.name(),
        timeout_ms: txn.txn_timeout_ms,
        start_ms: txn.txn_start_timestamp,
        producer_id: txn.producer_id,
        producer_epoch: txn.producer_epoch,
        partitions: txn.partitions.iter().cloned().collect(),
    }
}

impl Serve<Shard> for DescribeTxn {
    async fn serve(self, shard: &Rc<Shard>) -> DescribeTxnReply {
        wait_known(shard, self.partition).await;
        shard
            .txn
            .with(self.partition, |coordinator, _| {
                coordinator.describe(&self.transactional_id).map(view)
            })?
            .ok_or(ErrorCode::TransactionalIdNotFound)
    }
}

impl Serve<Shard> for ListTxns {
    async fn serve(self, shard: &Rc<Shard>) -> ListTxnsReply {
        let now = wall_ms();
        let partitions = shard.txn.partitions.borrow();
        let mut found = Vec::new();
        for state in partitions.values() {
            let TxnPartition::Loaded { coordinator, .. } = state else {
                continue;
            };
            for txn in coordinator.list() {
                let state_ok =
                    self.states.is_empty() || self.states.iter().any(|s| s == txn.state.name());
                let id_ok =
                    self.producer_ids.is_empty() || self.producer_ids.contains(&txn.producer_id);
                // KIP-994: only transactions open longer than the filter.
                let duration_ok = self.min_duration_ms < 0
                    || (txn.state == transactions::TxnState::Ongoing
                        && now - txn.txn_start_timestamp > self.min_duration_ms);
                if state_ok && id_ok && duration_ok {
                    found.push(view(txn));
                }
            }
        }
        found
    }
}

impl Serve<Shard> for WriteMarkers {
    async fn serve(self, shard: &Rc<Shard>) -> WriteMarkersReply {
        super::markers::write_markers_here(shard, &self.parts).await
    }
}
