//! A coordinator partition's life: marked loading when this shard learns it owns it,
//! replayed from `__consumer_offsets` before its groups are served, and the appends that
//! persist group state through the produce path.

use super::*;

impl Coordinator {
    pub(super) fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Marks `partition` as this shard's from the moment it learns it owns it, before its log
    /// is opened: like Kafka's loading partitions (entered on election), its groups' requests
    /// get COORDINATOR_LOAD_IN_PROGRESS (retriable, same coordinator) until the load ends,
    /// not NOT_COORDINATOR (which sends clients to find another coordinator and fails
    /// librdkafka's `committed()`). Kept as it is if already there.
    pub fn opening(&self, partition: i32) {
        self.partitions
            .borrow_mut()
            .entry(partition)
            .or_insert(PartitionState::Loading);
        OFFSETS_TOPIC_KNOWN.store(true, Ordering::Relaxed);
        self.learned.notify(usize::MAX);
    }

    /// Routed here by a shard that already knows `partition` is this one's (it adopted the
    /// image that created it first): waits until this shard knows too, i.e. has marked it
    /// `opening` or adopted an image with it, at most `IMAGE_LAG_WAIT`.
    pub(super) async fn wait_known(shard: &Shard, partition: i32) {
        if shard
            .coordinator
            .partitions
            .borrow()
            .contains_key(&partition)
        {
            return;
        }
        let deadline = Instant::now() + IMAGE_LAG_WAIT;
        loop {
            let learned = shard.coordinator.learned.listen();
            let in_image = shard
                .image()
                .topic(OFFSETS_TOPIC)
                .is_some_and(|topic| topic.partition(partition).is_some());
            if in_image
                || shard
                    .coordinator
                    .partitions
                    .borrow()
                    .contains_key(&partition)
            {
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

    /// This node no longer leads `partition` (a cluster's leader moved): its groups are not
    /// served here any more (NOT_COORDINATOR sends clients to the new leader, which loads
    /// them from its replica of the log).
    pub fn unload(&self, partition: i32) {
        if self.partitions.borrow_mut().remove(&partition).is_some() {
            tracing::info!(
                partition,
                "group coordinator partition unloaded (leadership moved)"
            );
        }
    }

    /// The partition's log could not be opened: it is offline, not served here.
    pub fn open_failed(&self, partition: i32) {
        let mut partitions = self.partitions.borrow_mut();
        if matches!(partitions.get(&partition), Some(PartitionState::Loading)) {
            partitions.remove(&partition);
        }
    }

    /// Loads (replays) one of this shard's `__consumer_offsets` partitions. Called when the
    /// shard opens the partition's log.
    pub async fn load(shard: Rc<Shard>, topic_id: TopicId, partition: i32) {
        let coordinator = &shard.coordinator;
        coordinator
            .partitions
            .borrow_mut()
            .insert(partition, PartitionState::Loading);
        let started = Instant::now();
        let mut groups: HashMap<String, Group> = HashMap::new();
        let mut records = 0u64;
        if let Some(target) = shard.partition(&topic_id, partition) {
            let (mut offset, end) = {
                let log = target.log.borrow();
                (log.log_start_offset(), log.log_end_offset())
            };
            while offset < end {
                let read = target
                    .log
                    .borrow()
                    .read_bounded(offset, LOAD_READ_BYTES, end, true);
                let bytes = match read.await {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        tracing::error!(partition, %error, "reading __consumer_offsets at load failed");
                        break;
                    }
                };
                if bytes.is_empty() {
                    break;
                }
                for batch in record_batch::stored_batches(&bytes) {
                    let Ok((header, raw)) = batch else { break };
                    offset = header.next_offset();
                    let Ok(parsed) = record_batch::records(raw) else {
                        continue;
                    };
                    if header.is_control() {
                        // A transaction's marker: its offsets are kept or dropped.
                        let commit = parsed.iter().next().and_then(Result::ok).and_then(|r| {
                            r.key.filter(|k| k.len() >= 4).map(|k| k[2..4] == [0, 1])
                        });
                        if let Some(commit) = commit {
                            for group in groups.values_mut() {
                                group.end_txn(header.producer_id, commit);
                            }
                        }
                        continue;
                    }
                    let txn = header.is_transactional().then_some(header.producer_id);
                    for record in parsed.iter() {
                        let Ok(record) = record else { break };
                        let Some(key) = record.key else { continue };
                        match GroupRecord::decode(key, record.value) {
                            Ok(Some(GroupRecord::OffsetCommit(key, Some(value))))
                                if txn.is_some() =>
                            {
                                records += 1;
                                let producer_id = txn.expect("checked");
                                let group = groups
                                    .entry(key.group.clone())
                                    .or_insert_with(|| Group::new(value.commit_timestamp));
                                group.pending_txn.entry(producer_id).or_default().insert(
                                    (key.topic, key.partition),
                                    Committed {
                                        offset: value.offset,
                                        leader_epoch: value.leader_epoch,
                                        metadata: value.metadata,
                                        commit_timestamp: value.commit_timestamp,
                                    },
                                );
                            }
                            Ok(Some(decoded)) => {
                                records += 1;
                                coordinator.replay(&mut groups, decoded);
                            }
                            Ok(None) => {}
                            Err(error) => {
                                tracing::warn!(partition, %error, "skipping an unreadable group record")
                            }
                        }
                    }
                }
            }
        }
        let group_count = groups.len();
        let now = coordinator.now() as i64;
        for group in groups.values_mut() {
            if let Some(consumer) = group.consumer.as_mut() {
                consumer.schedule_after_load(now, &shard.config.groups.consumer);
            }
        }
        let live = groups
            .values()
            .any(|g| g.classic.is_live() || g.has_consumer_members());
        coordinator
            .partitions
            .borrow_mut()
            .insert(partition, PartitionState::Loaded { topic_id, groups });
        if live {
            coordinator.live.notify(usize::MAX);
        }
        tracing::info!(
            shard = shard.id,
            partition,
            groups = group_count,
            records,
            ms = started.elapsed().as_millis() as u64,
            "loaded __consumer_offsets partition"
        );
    }

    pub(super) fn replay(&self, groups: &mut HashMap<String, Group>, record: GroupRecord) {
        let now = self.now();
        match record {
            GroupRecord::OffsetCommit(key, value) => match value {
                Some(value) => {
                    let group = groups
                        .entry(key.group.clone())
                        .or_insert_with(|| Group::new(value.commit_timestamp));
                    group.offsets.insert(
                        (key.topic, key.partition),
                        Committed {
                            offset: value.offset,
                            leader_epoch: value.leader_epoch,
                            metadata: value.metadata,
                            commit_timestamp: value.commit_timestamp,
                        },
                    );
                }
                None => {
                    if let Some(group) = groups.get_mut(&key.group) {
                        group.offsets.remove(&(key.topic, key.partition));
                    }
                }
            },
            GroupRecord::GroupMetadata(key, value) => match value {
                Some(value) => {
                    let group = groups
                        .entry(key.group.clone())
                        .or_insert_with(|| Group::new(value.current_state_timestamp));
                    group.classic.replay(Some(&value), now);
                    if group.classic.member_count() == 0 {
                        group.empty_since = value.current_state_timestamp;
                    }
                }
                None => {
                    groups.remove(&key.group);
                }
            },
            record => {
                let Some(group_id) = consumer_record_group(&record) else {
                    return;
                };
                let group = groups
                    .entry(group_id.to_string())
                    .or_insert_with(|| Group::new(wall_ms()));
                let consumer = group
                    .consumer
                    .get_or_insert_with(|| ConsumerGroup::new(group_id));
                consumer.replay(&record);
                if consumer.is_deleted() {
                    group.consumer = None;
                    let unused = group.offsets.is_empty()
                        && group.classic.member_count() == 0
                        && group.classic.protocol_type.is_none();
                    if unused {
                        groups.remove(group_id);
                    }
                }
            }
        }
    }

    /// Runs `f` on the loaded group map of `partition`, or answers the partition's state.
    pub(super) fn with_groups<R>(
        &self,
        partition: i32,
        f: impl FnOnce(&mut HashMap<String, Group>, TopicId) -> R,
    ) -> Result<R, ErrorCode> {
        let mut partitions = self.partitions.borrow_mut();
        match partitions.get_mut(&partition) {
            None => Err(ErrorCode::NotCoordinator),
            Some(PartitionState::Loading) => Err(ErrorCode::CoordinatorLoadInProgress),
            Some(PartitionState::Loaded { topic_id, groups }) => Ok(f(groups, *topic_id)),
        }
    }

    /// Appends group records to `partition` and waits for them as acks=all does.
    pub(super) async fn append(
        shard: &Rc<Shard>,
        topic_id: TopicId,
        partition: i32,
        records: &[GroupRecord],
    ) -> Result<(), ErrorCode> {
        if records.is_empty() {
            return Ok(());
        }
        let now = wall_ms();
        let mut builder = BatchBuilder::new(Compression::None);
        for record in records {
            let (key, value) = record.encode().map_err(|error| {
                tracing::error!(%error, "cannot encode a group record");
                ErrorCode::UnknownServerError
            })?;
            builder = builder.push(Some(&key), value.as_deref(), &[], now);
        }
        let batch = builder.build();
        let result = crate::partition_ops::produce(shard, &topic_id, partition, -1, batch).await;
        match ErrorCode::from_code_or_unknown(result.error_code) {
            ErrorCode::None => Ok(()),
            ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => {
                Err(ErrorCode::InvalidCommitOffsetSize)
            }
            code => {
                tracing::warn!(?code, partition, "writing group records failed");
                Err(ErrorCode::CoordinatorNotAvailable)
            }
        }
    }

    pub(super) fn group_record(group_id: &str, group: &Group) -> GroupRecord {
        GroupRecord::GroupMetadata(
            GroupMetadataKey {
                group: group_id.to_string(),
                ..Default::default()
            },
            Some(group.classic.to_record(wall_ms())),
        )
    }

    /// Persists a group whose membership changed in a way a restart must see.
    pub(super) async fn persist_group(shard: &Rc<Shard>, partition: i32, group_id: &str) {
        let record = shard
            .coordinator
            .with_groups(partition, |groups, topic_id| {
                let group = groups.get_mut(group_id)?;
                group
                    .classic
                    .take_dirty()
                    .then(|| (topic_id, Self::group_record(group_id, group)))
            });
        if let Ok(Some((topic_id, record))) = record {
            if let Err(code) = Self::append(shard, topic_id, partition, &[record]).await {
                tracing::warn!(group = group_id, ?code, "persisting group state failed");
            }
        }
    }
}
