//! The leader's side of Kafka's replication protocol for one partition, as a state machine
//! with time passed in (Kafka's `Partition.scala` is the reference; each rule names it):
//!
//! - Follower progress (`updateFollowerFetchState`): a follower's fetch offset is its log end.
//!   It has caught up at a fetch's time when it fetched from the leader's log end, or at the
//!   previous fetch's time when it fetched from at least the log end the leader had then
//!   (`lastCaughtUpTimeMs`). A new leader counts its ISR followers as caught up now and their
//!   log ends as unknown (`resetReplicaState`).
//! - High watermark (`maybeIncrementLeaderHW`): the minimum log end over the leader and the
//!   maximal ISR (the committed ISR plus any member an AlterPartition in flight adds, KIP-497),
//!   and over followers caught up and eligible but not yet added (so the watermark does not
//!   run past a replica about to join); it never decreases, and it does not advance while the
//!   maximal ISR is smaller than `min.insync.replicas` (KIP-966's strict rule, Kafka 4.x with
//!   ELR): an acknowledged acks=all batch is then always on `min.insync.replicas` replicas.
//! - ISR shrink (`getOutOfSyncReplicas`, KIP-537's `replica.lag.time.max.ms`): an ISR follower
//!   is out of sync when it is not at the leader's log end and has not caught up for longer
//!   than the lag bound. All out-of-sync followers leave in one change; the leader never does.
//! - ISR expansion (`isFollowerInSync` + `isReplicaIsrEligible`, KAFKA-7128, KIP-841): a
//!   follower joins once its log end reached the high watermark and the start offset of the
//!   leader's epoch, and the caller says it is eligible (registered, unfenced, not in
//!   controlled shutdown, with the broker epoch the leader knows).
//! - One ISR change in flight per partition (`alterIsr` pending state): no other is proposed
//!   until it is committed or has failed; a newer partition state from the metadata image
//!   replaces both.
//!
//! Pure: the shard that owns the partition feeds it follower fetches, its
//! own appends, AlterPartition answers and image updates; `tests/sim_replication.rs` runs it
//! with simulated followers, controller and faults.

/// A log end not known yet (Kafka's `UnifiedLog.UnknownOffset`).
pub const UNKNOWN_OFFSET: i64 = -1;

/// What the leader knows of one follower.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerProgress {
    pub broker: i32,
    /// Its log end: the offset of its last fetch (`UNKNOWN_OFFSET` before its first).
    pub log_end: i64,
    /// When it was last caught up with the leader's log end (ms).
    pub last_caught_up_ms: i64,
    /// The time of its previous fetch, and the leader's log end then.
    last_fetch_ms: i64,
    last_fetch_leader_end: i64,
    /// The broker epoch its last fetch named (KIP-903's ReplicaState; -1: its Fetch version
    /// carries none); `None` before its first fetch to this leader.
    pub broker_epoch: Option<i64>,
}

impl FollowerProgress {
    fn new(broker: i32, in_sync: bool, now_ms: i64) -> FollowerProgress {
        FollowerProgress {
            broker,
            log_end: UNKNOWN_OFFSET,
            // Kafka's `resetReplicaState`: an ISR member gets a full lag period from now.
            last_caught_up_ms: if in_sync { now_ms } else { 0 },
            last_fetch_ms: 0,
            last_fetch_leader_end: UNKNOWN_OFFSET,
            broker_epoch: None,
        }
    }

    /// Kafka's `isBrokerEpochIsrEligible` (KIP-903): the follower fetched naming no epoch
    /// (-1) or `registered`, its broker's epoch in the leader's metadata. A follower whose
    /// fetches come from an earlier incarnation of its broker (a stale epoch) may not join.
    pub fn broker_epoch_eligible(&self, registered: Option<i64>) -> bool {
        match (self.broker_epoch, registered) {
            (Some(fetched), Some(registered)) => fetched == -1 || fetched == registered,
            _ => false,
        }
    }

    /// Kafka's `isCaughtUp`: at the leader's log end, or caught up within the lag bound.
    fn caught_up(&self, leader_end: i64, now_ms: i64, lag_max_ms: i64) -> bool {
        self.log_end == leader_end || now_ms - self.last_caught_up_ms <= lag_max_ms
    }
}

/// The leader's replication state of one partition (see the module docs).
#[derive(Clone, Debug)]
pub struct LeaderState {
    me: i32,
    leader_epoch: i32,
    /// The first offset of `leader_epoch` in the leader's log.
    epoch_start_offset: i64,
    partition_epoch: i32,
    /// The committed ISR (the leader among them).
    isr: Vec<i32>,
    /// The ISR an AlterPartition in flight asks for.
    pending: Option<Vec<i32>>,
    /// Every replica but the leader.
    followers: Vec<FollowerProgress>,
    high_watermark: i64,
}

/// The partition state the controller committed (from an AlterPartition answer or the image).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedState {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
}

impl LeaderState {
    /// Becoming leader (Kafka's `makeLeader`): `epoch_start_offset` is where the new epoch
    /// starts in the log (its end when it became leader); `high_watermark` the one the log
    /// had (a follower's, or the checkpointed one), never above the log end.
    pub fn new(
        me: i32,
        state: &CommittedState,
        epoch_start_offset: i64,
        high_watermark: i64,
        now_ms: i64,
    ) -> LeaderState {
        let followers = state
            .replicas
            .iter()
            .filter(|&&r| r != me)
            .map(|&r| FollowerProgress::new(r, state.isr.contains(&r), now_ms))
            .collect();
        LeaderState {
            me,
            leader_epoch: state.leader_epoch,
            epoch_start_offset,
            partition_epoch: state.partition_epoch,
            isr: state.isr.clone(),
            pending: None,
            followers,
            high_watermark: high_watermark.min(epoch_start_offset).max(0),
        }
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    /// The committed ISR.
    pub fn isr(&self) -> &[i32] {
        &self.isr
    }
    /// Whether an ISR change is in flight.
    pub fn change_in_flight(&self) -> bool {
        self.pending.is_some()
    }
    pub fn followers(&self) -> &[FollowerProgress] {
        &self.followers
    }

    /// The committed ISR with whatever an AlterPartition in flight adds (Kafka's
    /// `maximalIsr`): the set the high watermark waits for.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        for &r in self.pending.iter().flatten() {
            if !isr.contains(&r) {
                isr.push(r);
            }
        }
        isr
    }

    /// The broker epoch follower `broker`'s fetch named (see `FollowerProgress`): kept even
    /// when the fetch is answered with a divergence. False when `broker` is not a replica.
    pub fn note_follower_epoch(&mut self, broker: i32, broker_epoch: i64) -> bool {
        let Some(f) = self.followers.iter_mut().find(|f| f.broker == broker) else {
            return false;
        };
        f.broker_epoch = Some(broker_epoch);
        true
    }

    /// A fetch from follower `broker` at `fetch_offset` while the leader's log ended at
    /// `leader_end`. False when `broker` is not a replica (the fetch is refused).
    pub fn on_follower_fetch(
        &mut self,
        broker: i32,
        fetch_offset: i64,
        leader_end: i64,
        now_ms: i64,
    ) -> bool {
        let Some(f) = self.followers.iter_mut().find(|f| f.broker == broker) else {
            return false;
        };
        if fetch_offset >= leader_end {
            f.last_caught_up_ms = f.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= f.last_fetch_leader_end {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.last_fetch_leader_end = leader_end;
        f.last_fetch_ms = now_ms;
        f.log_end = fetch_offset;
        true
    }

    /// Moves the high watermark as far as the rules allow (see the module docs): the new
    /// value when it moved. `eligible` says whether a follower outside the ISR may join it
    /// (registered, unfenced, not shutting down).
    pub fn maybe_advance_high_watermark(
        &mut self,
        leader_end: i64,
        min_insync: usize,
        now_ms: i64,
        lag_max_ms: i64,
        eligible: impl Fn(i32) -> bool,
    ) -> Option<i64> {
        let maximal = self.maximal_isr();
        if maximal.len() < min_insync.max(1) {
            return None;
        }
        let mut candidate = leader_end;
        for f in &self.followers {
            let waits = maximal.contains(&f.broker)
                || (f.caught_up(leader_end, now_ms, lag_max_ms) && eligible(f.broker));
            if waits && f.log_end < candidate {
                candidate = f.log_end;
            }
        }
        (candidate > self.high_watermark).then(|| {
            self.high_watermark = candidate;
            candidate
        })
    }

    /// The ISR change to propose now, if any (none while one is in flight): every
    /// out-of-sync follower removed, else the first follower that may join added.
    pub fn next_isr_change(
        &self,
        leader_end: i64,
        now_ms: i64,
        lag_max_ms: i64,
        eligible: impl Fn(i32) -> bool,
    ) -> Option<Vec<i32>> {
        if self.pending.is_some() {
            return None;
        }
        let out_of_sync: Vec<i32> = self
            .followers
            .iter()
            .filter(|f| self.isr.contains(&f.broker))
            .filter(|f| !f.caught_up(leader_end, now_ms, lag_max_ms))
            .map(|f| f.broker)
            .collect();
        if !out_of_sync.is_empty() {
            let isr = self
                .isr
                .iter()
                .copied()
                .filter(|r| *r == self.me || !out_of_sync.contains(r))
                .collect();
            return Some(isr);
        }
        let joining = self.followers.iter().find(|f| {
            !self.isr.contains(&f.broker)
                && f.log_end >= self.high_watermark
                && f.log_end >= self.epoch_start_offset
                && eligible(f.broker)
        })?;
        let mut isr = self.isr.clone();
        isr.push(joining.broker);
        Some(isr)
    }

    /// An AlterPartition asking for `isr` was sent.
    pub fn begin_isr_change(&mut self, isr: Vec<i32>) {
        self.pending = Some(isr);
    }

    /// The controller answered the change in flight: committed (`Some`), or refused as not
    /// applicable (`None`: Kafka's OPERATION_NOT_ATTEMPTED / INELIGIBLE_REPLICA, after which
    /// the committed ISR stands). Any other refusal (INVALID_UPDATE_VERSION,
    /// FENCED_LEADER_EPOCH: this leader is behind) or a lost answer must NOT end the change:
    /// it may have been committed, and counting only the old ISR would let the high
    /// watermark pass a replica the controller may elect (the simulation's seed
    /// 7597498457392828109); the change stays in flight until the image brings a newer
    /// partition state (`adopt`) or a resend is answered.
    pub fn isr_change_done(&mut self, committed: Option<&CommittedState>) {
        self.pending = None;
        if let Some(state) = committed {
            self.adopt(state);
        }
    }

    /// A partition state from the metadata image (same leader, same leader epoch): taken
    /// when newer than the one held; it also ends a change in flight that it answers.
    pub fn adopt(&mut self, state: &CommittedState) {
        if state.partition_epoch > self.partition_epoch {
            self.partition_epoch = state.partition_epoch;
            self.isr = state.isr.clone();
            // A newer state answers (or supersedes) whatever change was in flight.
            self.pending = None;
        }
        if state.replicas.is_empty() {
            return;
        }
        // Replicas added by a reassignment start unknown; removed ones are forgotten.
        self.followers
            .retain(|f| state.replicas.contains(&f.broker));
        for &r in &state.replicas {
            if r != self.me && !self.followers.iter().any(|f| f.broker == r) {
                self.followers.push(FollowerProgress::new(r, false, 0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: i64 = 10_000;

    fn state(isr: &[i32]) -> CommittedState {
        CommittedState {
            leader_epoch: 1,
            partition_epoch: 1,
            isr: isr.to_vec(),
            replicas: vec![1, 2, 3],
        }
    }

    fn leader(isr: &[i32]) -> LeaderState {
        LeaderState::new(1, &state(isr), 0, 0, 0)
    }

    fn all(_: i32) -> bool {
        true
    }

    #[test]
    fn the_high_watermark_waits_for_every_isr_member() {
        let mut l = leader(&[1, 2, 3]);
        assert_eq!(l.maybe_advance_high_watermark(10, 1, 1, LAG, all), None);
        l.on_follower_fetch(2, 10, 10, 1);
        assert_eq!(l.maybe_advance_high_watermark(10, 1, 1, LAG, all), None);
        l.on_follower_fetch(3, 4, 10, 1);
        assert_eq!(l.maybe_advance_high_watermark(10, 1, 1, LAG, all), Some(4));
        // Never backwards, whatever a follower reports.
        l.on_follower_fetch(3, 2, 10, 2);
        assert_eq!(l.maybe_advance_high_watermark(10, 1, 2, LAG, all), None);
        assert_eq!(l.high_watermark(), 4);
    }

    #[test]
    fn the_high_watermark_stays_while_the_isr_is_below_min_insync() {
        let mut l = leader(&[1]);
        assert_eq!(
            l.maybe_advance_high_watermark(10, 2, 1, LAG, |_| false),
            None
        );
        // With one follower in flight to join, the maximal ISR is large enough.
        l.begin_isr_change(vec![1, 2]);
        l.on_follower_fetch(2, 7, 10, 1);
        assert_eq!(
            l.maybe_advance_high_watermark(10, 2, 1, LAG, |_| false),
            Some(7)
        );
    }

    #[test]
    fn a_lagging_follower_leaves_and_a_caught_up_one_joins() {
        let mut l = leader(&[1, 2, 3]);
        l.on_follower_fetch(2, 10, 10, 100);
        l.on_follower_fetch(3, 5, 10, 100);
        // Within the lag bound nobody is out of sync.
        assert_eq!(l.next_isr_change(10, LAG, LAG, all), None);
        // Follower 3 has not caught up since it became follower (time 0).
        assert_eq!(l.next_isr_change(10, LAG + 1, LAG, all), Some(vec![1, 2]));
        l.begin_isr_change(vec![1, 2]);
        assert_eq!(l.next_isr_change(10, LAG + 1, LAG, all), None);
        l.isr_change_done(Some(&CommittedState {
            partition_epoch: 2,
            ..state(&[1, 2])
        }));
        assert_eq!(l.isr(), &[1, 2]);
        l.maybe_advance_high_watermark(10, 1, LAG + 1, LAG, |_| false);
        l.on_follower_fetch(2, 12, 12, LAG + 2);
        l.maybe_advance_high_watermark(12, 1, LAG + 2, LAG, |_| false);
        assert_eq!(l.high_watermark(), 12);
        // 3 below the high watermark cannot join; at it (and eligible) it can.
        l.on_follower_fetch(3, 11, 12, LAG + 2);
        assert_eq!(l.next_isr_change(12, LAG + 2, LAG, all), None);
        l.on_follower_fetch(3, 12, 12, LAG + 3);
        assert_eq!(l.next_isr_change(12, LAG + 3, LAG, |_| false), None);
        assert_eq!(
            l.next_isr_change(12, LAG + 3, LAG, all),
            Some(vec![1, 2, 3])
        );
    }

    #[test]
    fn a_follower_must_reach_the_epoch_start_to_join() {
        // KAFKA-7128: the new leader's epoch starts at 20; a follower at the high watermark
        // (10) but below 20 may still hold records of an older epoch the leader does not.
        let mut l = LeaderState::new(1, &state(&[1]), 20, 10, 0);
        l.on_follower_fetch(2, 10, 20, 1);
        assert_eq!(l.high_watermark(), 10);
        assert_eq!(l.next_isr_change(20, 1, LAG, all), None);
        l.on_follower_fetch(2, 20, 20, 2);
        assert_eq!(l.next_isr_change(20, 2, LAG, all), Some(vec![1, 2]));
    }

    #[test]
    fn caught_up_time_follows_kafkas_rule() {
        let mut l = leader(&[1, 2]);
        l.on_follower_fetch(2, 0, 10, 1_000); // behind: not caught up at 1000
        assert_eq!(l.followers()[0].last_caught_up_ms, 0);
        // Fetching from the leader's end at the previous fetch: caught up as of then.
        l.on_follower_fetch(2, 10, 15, 2_000);
        assert_eq!(l.followers()[0].last_caught_up_ms, 1_000);
        l.on_follower_fetch(2, 15, 15, 3_000);
        assert_eq!(l.followers()[0].last_caught_up_ms, 3_000);
        assert!(!l.on_follower_fetch(9, 15, 15, 3_000));
    }

    #[test]
    fn only_a_follower_fetching_under_its_registered_epoch_is_eligible() {
        // KIP-903: broker 2 registered with epoch 40.
        let mut l = LeaderState::new(1, &state(&[1]), 0, 0, 0);
        let f = |l: &LeaderState| l.followers()[0].clone();
        assert!(!f(&l).broker_epoch_eligible(Some(40)), "no fetch yet");
        assert!(l.note_follower_epoch(2, 39));
        assert!(
            !f(&l).broker_epoch_eligible(Some(40)),
            "an earlier incarnation"
        );
        assert!(l.note_follower_epoch(2, 40));
        assert!(f(&l).broker_epoch_eligible(Some(40)));
        assert!(!f(&l).broker_epoch_eligible(None), "unregistered");
        assert!(l.note_follower_epoch(2, -1));
        assert!(
            f(&l).broker_epoch_eligible(Some(40)),
            "a Fetch before v15 names none"
        );
        assert!(!l.note_follower_epoch(9, 40), "not a replica");
    }
}
