//! Time on the coordinator: session and rebalance deadlines of live groups, and offsets
//! retention (`offsets.retention.minutes`).

use super::*;

impl Coordinator {
    /// The coordinator's timer task: session expiry, join and sync deadlines, and offsets
    /// retention. Sleeps on an event while no group of this shard has members.
    pub async fn run_timer(shard: std::rc::Weak<Shard>) {
        let mut last_retention = Instant::now();
        loop {
            let (idle_wait, retention_every) = {
                let Some(shard) = shard.upgrade() else { return };
                let coordinator = &shard.coordinator;
                let every =
                    Duration::from_millis(shard.config.groups.offsets_retention_check_interval_ms);
                let wait = (!coordinator.has_live_groups()).then(|| coordinator.live.listen());
                (wait, every)
            };
            match idle_wait {
                None => glommio::timer::sleep(TICK).await,
                Some(listener) => {
                    futures::future::select(
                        listener,
                        Box::pin(glommio::timer::sleep(retention_every)),
                    )
                    .await;
                }
            }
            let Some(shard) = shard.upgrade() else { return };
            let coordinator = &shard.coordinator;
            let now = coordinator.now();
            let mut to_persist: Vec<(i32, String)> = Vec::new();
            let mut fenced: Vec<(i32, TopicId, Vec<GroupRecord>)> = Vec::new();
            let image = shard.image();
            let lookup = topic_lookup(&image);
            for (partition, state) in coordinator.partitions.borrow_mut().iter_mut() {
                if let PartitionState::Loaded { groups, topic_id } = state {
                    for group in groups.values_mut() {
                        let Some(consumer) = group.consumer.as_mut() else {
                            continue;
                        };
                        if consumer.next_deadline().is_some_and(|d| d <= now as i64) {
                            let records = consumer.expire(now as i64, &lookup);
                            if consumer.members().is_empty() {
                                group.empty_since = wall_ms();
                            }
                            if !records.is_empty() {
                                fenced.push((*partition, *topic_id, records));
                            }
                        }
                    }
                    for (id, group) in groups.iter_mut() {
                        if !group.classic.is_live() {
                            continue;
                        }
                        group.classic.tick(now);
                        if group.classic.state() == State::Empty {
                            group.empty_since = wall_ms();
                            to_persist.push((*partition, id.clone()));
                        }
                    }
                }
            }
            for (partition, id) in to_persist {
                Self::persist_if_empty(&shard, partition, &id).await;
            }
            for (partition, topic_id, records) in fenced {
                // The state already moved on (as Kafka's does before its write commits); a
                // failed write leaves the log behind it until the group's next change.
                if let Err(code) = Self::append(&shard, topic_id, partition, &records).await {
                    tracing::warn!(?code, partition, "writing consumer group expiry failed");
                }
            }
            if last_retention.elapsed() >= retention_every {
                last_retention = Instant::now();
                Self::expire_offsets(&shard).await;
            }
        }
    }

    pub(super) fn has_live_groups(&self) -> bool {
        self.partitions.borrow().values().any(|state| match state {
            PartitionState::Loaded { groups, .. } => groups
                .values()
                .any(|g| g.classic.is_live() || g.has_consumer_members()),
            PartitionState::Loading => false,
        })
    }

    /// `offsets.retention.minutes`: the offsets of a group that has been empty that long
    /// (and were committed before then) are deleted, tombstones first.
    pub(super) async fn expire_offsets(shard: &Rc<Shard>) {
        let retention = shard.config.groups.offsets_retention_ms;
        let now = wall_ms();
        let mut plans: Vec<ExpiryPlan> = Vec::new();
        for (partition, state) in shard.coordinator.partitions.borrow().iter() {
            if let PartitionState::Loaded { groups, topic_id } = state {
                for (id, group) in groups {
                    let busy =
                        group.classic.state() != State::Empty || group.has_consumer_members();
                    if busy || now - group.empty_since < retention {
                        continue;
                    }
                    let expired: Vec<(String, i32)> = group
                        .offsets
                        .iter()
                        .filter(|(_, c)| now - c.commit_timestamp >= retention)
                        .map(|(k, _)| k.clone())
                        .collect();
                    if !expired.is_empty() {
                        plans.push((*partition, *topic_id, id.clone(), expired));
                    }
                }
            }
        }
        for (partition, topic_id, group_id, expired) in plans {
            let records: Vec<GroupRecord> = expired
                .iter()
                .map(|(topic, p)| {
                    GroupRecord::OffsetCommit(
                        OffsetCommitKey {
                            group: group_id.clone(),
                            topic: topic.clone(),
                            partition: *p,
                            ..Default::default()
                        },
                        None,
                    )
                })
                .collect();
            if Self::append(shard, topic_id, partition, &records)
                .await
                .is_ok()
            {
                let _ = shard.coordinator.with_groups(partition, |groups, _| {
                    if let Some(group) = groups.get_mut(&group_id) {
                        for key in &expired {
                            group.offsets.remove(key);
                        }
                    }
                });
                tracing::info!(group = %group_id, offsets = expired.len(), "expired committed offsets");
            }
        }
    }
}
