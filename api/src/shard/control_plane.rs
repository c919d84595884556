//! The metadata core's control plane on this shard (producer id blocks, CreateTopics,
//! CreatePartitions, DeleteTopics, AlterConfigs, publishing images) and every shard's
//! application of a new image (opening and dropping partition logs, config changes).

use super::*;
use crate::metadata::TopicLayout;

/// What a change that the quorum did not commit answers beside NOT_CONTROLLER.
pub(super) const NOT_COMMITTED: &str =
    "The change was not committed by the metadata quorum; retry.";
/// How long a committed change may take to reach this shard's image before the answer goes
/// out anyway.
const COMMIT_ADOPT_WAIT: Duration = Duration::from_secs(10);

impl Shard {
    /// Metadata core only: a new block of producer ids, durable before it is returned (in a
    /// cluster: committed by the quorum, through the active controller).
    pub(super) async fn allocate_producer_ids(self: &Rc<Self>) -> Result<i64, i16> {
        let controller = self
            .controller
            .as_ref()
            .expect("producer id blocks are allocated on the metadata core");
        if let Some(to) = self.forward_target() {
            return super::to_controller::allocate_producer_ids(to, self.config.node_id).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let allocated = controller.borrow_mut().allocate_producer_ids();
        match allocated {
            // A block the quorum did not commit is not handed out: retriable, as below.
            Ok(first) => self
                .commit_staged()
                .await
                .map(|()| first)
                .map_err(|_| ErrorCode::CoordinatorLoadInProgress.code()),
            Err(error) => {
                tracing::error!(%error, "producer id block not allocated");
                Err(match error {
                    crate::metadata::LogError::ProducerIdsExhausted => {
                        ErrorCode::UnknownServerError.code()
                    }
                    // Kafka's brokers answer this while they cannot get a block from the
                    // controller (retriable: the client retries InitProducerId).
                    _ => ErrorCode::CoordinatorLoadInProgress.code(),
                })
            }
        }
    }

    /// A producer id for InitProducerId (no transactional id). Each shard takes ids from a
    /// block of `PRODUCER_ID_BLOCK_SIZE` it got from the metadata core (Kafka's
    /// ProducerIdManager on each broker), so the mesh is crossed once per 1000 producers.
    pub async fn next_producer_id(self: &Rc<Self>) -> Result<i64, i16> {
        let (next, end) = self.producer_ids.get();
        if next < end {
            self.producer_ids.set((next + 1, end));
            return Ok(next);
        }
        let first = self.call(0, forward::AllocateProducerIds).await?;
        // Another InitProducerId may have refilled the block meanwhile: then the rest of
        // this one is left unused (ids are never reused, so gaps are harmless).
        let (next, end) = self.producer_ids.get();
        if next >= end {
            self.producer_ids
                .set((first + 1, first + crate::metadata::PRODUCER_ID_BLOCK_SIZE));
        }
        Ok(first)
    }

    /// Metadata core only: creates topics, then publishes the new image to every shard.
    /// Metadata core: CreatePartitions. Every topic is checked and its PartitionRecords
    /// committed, then the image is published once (each shard opens the partitions it now
    /// owns) before the answer. More than `MAX_PARTITIONS_PER_REQUEST` new partitions in one
    /// request fail every topic with POLICY_VIOLATION, as CreateTopics (KAFKA-17870).
    pub(super) async fn create_partitions(
        self: &Rc<Self>,
        topics: Vec<forward::PartitionsSpec>,
        validate_only: bool,
    ) -> Vec<(i16, Option<String>)> {
        let controller = self
            .controller
            .as_ref()
            .expect("CreatePartitions runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return super::to_controller::create_partitions(to, &topics, validate_only).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let shards = self.placement_shards();
        let image = self.image();
        let total: u64 = topics
            .iter()
            .map(|spec| {
                let current = image
                    .topic(&spec.name)
                    .map_or(0, |t| t.partitions.len() as i64);
                u64::try_from(i64::from(spec.count) - current).unwrap_or(0)
            })
            .sum();
        if total > MAX_PARTITIONS_PER_REQUEST {
            return topics
                .iter()
                .map(|_| {
                    (
                        POLICY_VIOLATION,
                        Some("Excessively large number of partitions per request.".into()),
                    )
                })
                .collect();
        }
        let mut outcomes = Vec::with_capacity(topics.len());
        let mut changed = false;
        let mut slice = Slice::new();
        for spec in &topics {
            slice.tick().await;
            let result = controller.borrow_mut().create_partitions(
                &spec.name,
                spec.count,
                spec.assignments.as_deref(),
                shards,
                validate_only,
            );
            outcomes.push(match result {
                Ok(()) => {
                    changed = true;
                    (0, None)
                }
                Err(error) => (error.error_code(), Some(error.to_string())),
            });
        }
        if changed && !validate_only {
            match self.publish_image().await {
                Ok(failures) => {
                    for failure in failures {
                        tracing::error!(error = %failure.error, "new partitions could not be opened; they stay offline");
                    }
                }
                Err(code) => {
                    for outcome in outcomes.iter_mut().filter(|o| o.0 == 0) {
                        *outcome = (code, Some(NOT_COMMITTED.into()));
                    }
                }
            }
        }
        outcomes
    }

    pub(super) async fn create_topics(
        self: &Rc<Self>,
        topics: Vec<TopicSpec>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        let controller = self
            .controller
            .as_ref()
            .expect("CreateTopics runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return super::to_controller::create_topics(to, topics, validate_only).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let shards = self.placement_shards();
        let mut outcomes = Vec::with_capacity(topics.len());
        // KAFKA-17870: the whole request fails when its topics add up to more partitions
        // than one metadata batch may hold (-1 counts as the broker default, as in Kafka).
        let total: u64 = topics
            .iter()
            .map(|spec| {
                u64::try_from(spec.partition_count(self.config.num_partitions)).unwrap_or(0)
            })
            .sum();
        if total > MAX_PARTITIONS_PER_REQUEST {
            return topics
                .into_iter()
                .map(|spec| TopicOutcome {
                    name: spec.name,
                    topic_id: [0; 16],
                    error_code: POLICY_VIOLATION,
                    error_message: Some(
                        "Excessively large number of partitions per request.".into(),
                    ),
                    num_partitions: spec.num_partitions,
                })
                .collect();
        }
        let mut slice = Slice::new();
        for spec in topics {
            slice.tick().await;
            let layout = if spec.assignments.is_empty() {
                TopicLayout::Counts {
                    num_partitions: spec.num_partitions,
                    replication_factor: spec.replication_factor,
                }
            } else {
                TopicLayout::Manual {
                    num_partitions: spec.num_partitions,
                    replication_factor: spec.replication_factor,
                    assignments: &spec.assignments,
                }
            };
            let result = controller.borrow_mut().create_topic_laid_out(
                &spec.name,
                layout,
                spec.configs.clone(),
                shards,
                validate_only,
            );
            tracing::debug!(topic = %spec.name, ok = result.is_ok(), "create_topic done");
            let num_partitions = spec.partition_count(self.config.num_partitions);
            outcomes.push(match result {
                Ok(topic_id) => TopicOutcome {
                    name: spec.name,
                    topic_id,
                    error_code: 0,
                    error_message: None,
                    num_partitions,
                },
                Err(error) => TopicOutcome {
                    name: spec.name,
                    topic_id: [0; 16],
                    error_code: error.error_code(),
                    error_message: Some(error.to_string()),
                    num_partitions,
                },
            });
        }
        if validate_only {
            return outcomes;
        }
        let failures = match self.publish_image().await {
            Ok(failures) if failures.is_empty() => return outcomes,
            Ok(failures) => failures,
            Err(code) => {
                for outcome in outcomes.iter_mut().filter(|o| o.error_code == 0) {
                    outcome.error_code = code;
                    outcome.error_message = Some(NOT_COMMITTED.into());
                }
                return outcomes;
            }
        };
        // A topic some of whose partitions cannot be opened (typically: out of file
        // descriptors) is not created: it is removed again, so its opened partitions free their
        // files and the client may retry once the cause is fixed.
        let mut rolled_back = false;
        for outcome in outcomes
            .iter_mut()
            .filter(|outcome| outcome.error_code == 0)
        {
            let Some(failure) = failures
                .iter()
                .find(|failure| failure.topic_id == outcome.topic_id)
            else {
                continue;
            };
            tracing::error!(topic = %outcome.name, error = %failure.error, "partitions cannot be opened; topic not created");
            if let Err(error) = controller.borrow_mut().remove_topic(&outcome.topic_id) {
                tracing::error!(topic = %outcome.name, %error, "removing a topic that failed to open failed");
            }
            rolled_back = true;
            outcome.error_code = KAFKA_STORAGE_ERROR;
            outcome.error_message = Some(format!(
                "Partitions of topic '{}' cannot be opened: {}",
                outcome.name, failure.error
            ));
        }
        if rolled_back {
            let _ = self.publish_image().await;
        }
        outcomes
    }

    /// Metadata core only: deletes topics by name, then publishes the new image.
    pub(super) async fn delete_topics(self: &Rc<Self>, names: Vec<String>) -> Vec<TopicOutcome> {
        let controller = self
            .controller
            .as_ref()
            .expect("DeleteTopics runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return super::to_controller::delete_topics(to, names).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let mut outcomes = Vec::with_capacity(names.len());
        for name in names {
            let result = controller.borrow_mut().delete_topic(&name);
            outcomes.push(match result {
                Ok(topic_id) => TopicOutcome {
                    name,
                    topic_id,
                    error_code: 0,
                    error_message: None,
                    num_partitions: 0,
                },
                Err(error) => TopicOutcome {
                    name,
                    topic_id: [0; 16],
                    error_code: error.error_code(),
                    error_message: Some(error.to_string()),
                    num_partitions: 0,
                },
            });
        }
        if let Err(code) = self.publish_image().await {
            for outcome in outcomes.iter_mut().filter(|o| o.error_code == 0) {
                outcome.error_code = code;
                outcome.error_message = Some(NOT_COMMITTED.into());
            }
        }
        outcomes
    }

    /// Metadata core only: changes topic configs, then publishes the new image, whose topics
    /// every shard re-reads (see `apply_config_changes`) before this answers.
    pub(super) async fn alter_topic_configs(
        self: &Rc<Self>,
        changes: Vec<(i8, String, crate::metadata::ConfigChange)>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        let controller = self
            .controller
            .as_ref()
            .expect("AlterConfigs runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return super::to_controller::alter_configs(to, changes, validate_only).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let mut changed = false;
        let mut outcomes: Vec<TopicOutcome> = changes
            .into_iter()
            .map(|(resource_type, name, change)| {
                let mut controller = controller.borrow_mut();
                let result = match resource_type {
                    crate::metadata::RESOURCE_TOPIC => {
                        controller.alter_topic_configs(&name, &change, validate_only)
                    }
                    crate::metadata::RESOURCE_BROKER => {
                        controller.alter_broker_configs(&name, &change, validate_only)
                    }
                    other => Err(crate::metadata::AlterConfigsError::UnsupportedResource(
                        other,
                    )),
                };
                let (error_code, error_message) = match result {
                    Ok(altered) => {
                        changed |= altered;
                        (0, None)
                    }
                    Err(error) => (error.error_code(), Some(error.to_string())),
                };
                TopicOutcome {
                    name,
                    topic_id: [0; 16],
                    error_code,
                    error_message,
                    num_partitions: 0,
                }
            })
            .collect();
        if changed {
            if let Err(code) = self.publish_image().await {
                for outcome in outcomes.iter_mut().filter(|o| o.error_code == 0) {
                    outcome.error_code = code;
                    outcome.error_message = Some(NOT_COMMITTED.into());
                }
            }
        }
        outcomes
    }

    /// Pushes changed configs to this shard's partitions: of topics whose overrides differ
    /// between `previous` and `image`, or of every topic when the dynamic broker configs
    /// changed (they supply the defaults). Parsed once per topic, then set on each partition
    /// and its log.
    pub(super) async fn apply_config_changes(&self, previous: &Image, image: &Image) {
        let broker_changed = previous.broker_configs != image.broker_configs;
        let defaults = self.topic_defaults();
        let mut slice = Slice::new();
        for topic in image.topics_by_id.values() {
            let Some(old) = previous.topic_by_id(&topic.topic_id) else {
                continue;
            };
            if !broker_changed && (Arc::ptr_eq(old, topic) || old.configs == topic.configs) {
                continue;
            }
            let topic_config = match config::resolve(&defaults, &topic.configs) {
                Ok(topic_config) => topic_config,
                Err(error) => {
                    tracing::error!(topic = %topic.name, %error, "changed topic configuration unusable; keeping the previous one");
                    continue;
                }
            };
            for partition in &topic.partitions {
                if let Some(local) = self.local_replica(&topic.topic_id, partition.partition_id) {
                    local.set_config(topic_config.clone());
                }
            }
            if !broker_changed {
                tracing::info!(shard = self.id, topic = %topic.name, "topic configuration changed");
            }
            slice.tick().await;
        }
    }

    /// In a cluster: `Some(the active controller's listener, if known)` when this node's
    /// controller is not the active one, so changes go there.
    pub(super) fn forward_target(&self) -> Option<Option<std::net::SocketAddr>> {
        let link = self.cluster.as_ref()?;
        (!link.is_leader()).then(|| link.remote_leader())
    }

    /// In a cluster, the active controller's metadata core starts each change from the
    /// committed image (a change of its own that failed left nothing behind).
    pub(super) fn adopt_committed(&self) {
        if let (Some(link), Some(controller)) = (&self.cluster, &self.controller) {
            controller.borrow_mut().adopt(link.committed().0);
        }
    }

    /// The shard slots partitions are spread over: this node's shards, or in a cluster
    /// `CLUSTER_SHARD_SLOTS`, which every broker maps onto its own shards.
    fn placement_shards(&self) -> u16 {
        match self.cluster {
            Some(_) => crate::metadata::CLUSTER_SHARD_SLOTS,
            None => self.shard_count() as u16,
        }
    }

    /// In a cluster: proposes what the controller staged and waits until the quorum committed
    /// it and this shard adopted the image that has it. `Err` (NOT_CONTROLLER, which clients
    /// retry) when it did not commit.
    async fn commit_staged(&self) -> Result<(), i16> {
        let (Some(link), Some(controller)) = (&self.cluster, &self.controller) else {
            return Ok(());
        };
        let records = controller.borrow_mut().take_staged();
        if records.is_empty() {
            return Ok(());
        }
        match link.propose(records).await {
            Ok(index) => {
                let applied = |image: &Image| image.offset.is_some_and(|at| at >= index);
                if !self.wait_for_image(applied, COMMIT_ADOPT_WAIT).await {
                    tracing::warn!(index, "a committed metadata change is not applied here yet");
                }
                Ok(())
            }
            Err(error) => {
                tracing::info!(%error, "a metadata change was not committed");
                controller.borrow_mut().adopt(link.committed().0);
                Err(ErrorCode::NotController.code())
            }
        }
    }

    /// Sends the controller's current image to every shard and waits until each applied it.
    /// Returns the topics whose partitions some shard could not open. In a cluster the
    /// staged change is committed through the quorum instead, and comes back as a committed
    /// image (`Err`: it did not commit).
    pub(super) async fn publish_image(self: &Rc<Self>) -> Result<Vec<TopicFailure>, i16> {
        if self.cluster.is_some() {
            return self.commit_staged().await.map(|()| Vec::new());
        }
        let image = self
            .controller
            .as_ref()
            .expect("metadata core")
            .borrow()
            .image();
        Ok(self.publish(image).await)
    }

    /// Sends `image` to every shard and waits until each applied it; the topics whose
    /// partitions some shard could not open.
    pub(crate) async fn publish(self: &Rc<Self>, image: Arc<Image>) -> Vec<TopicFailure> {
        tracing::debug!(shards = self.shard_count(), "publishing image");
        let calls = (0..self.shard_count())
            .map(|target| self.call(target, forward::ImageUpdate(image.clone())));
        futures::future::join_all(calls)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Opens the logs of partitions this shard now owns, deletes those of removed topics, then
    /// adopts the image. Also used at start-up with the replayed image. Returns the topics with
    /// partitions that could not be opened (they stay offline).
    ///
    /// Cost is O(topics) pointer comparisons plus O(partitions of changed topics): a topic
    /// whose `Arc` is the one of the previous image is unchanged (the controller shares
    /// untouched topics between versions), so its partitions are not looked at.
    pub async fn apply_image(self: &Rc<Self>, image: Arc<Image>) -> Vec<TopicFailure> {
        let _serial = self.image_update.acquire_permit(1).await;
        tracing::debug!(
            shard = self.id,
            topics = image.topics_by_id.len(),
            "applying metadata image"
        );
        let previous = self.image();
        // Partitions opened below resolve their topic's config against these.
        if previous.broker_configs != image.broker_configs {
            *self.topic_defaults.borrow_mut() = layered_config(&self.config, &image);
            tracing::info!(shard = self.id, "dynamic broker configuration changed");
        }
        let mut wanted: Vec<(Arc<TopicImage>, i32)> = Vec::new();
        let mut slice = Slice::new();
        for topic in image.topics_by_id.values() {
            if previous
                .topic_by_id(&topic.topic_id)
                .is_some_and(|old| Arc::ptr_eq(old, topic))
            {
                continue;
            }
            for partition in &topic.partitions {
                if self.owner(partition) == self.id
                    && self.replicates(partition)
                    && self
                        .local_replica(&topic.topic_id, partition.partition_id)
                        .is_none()
                {
                    // A cluster node's coordinator loads a partition when it becomes its
                    // leader (`replication::roles`).
                    if topic.name == crate::group::OFFSETS_TOPIC && self.cluster.is_none() {
                        self.coordinator.opening(partition.partition_id);
                    }
                    if topic.name == crate::txn::TXN_TOPIC && self.cluster.is_none() {
                        self.txn.opening(partition.partition_id);
                    }
                    wanted.push((topic.clone(), partition.partition_id));
                }
            }
            slice.tick().await;
        }
        let mut failures: Vec<TopicFailure> = Vec::new();
        let (to_open, mut opened) = (wanted.len(), 0usize);
        let mut opens = futures::stream::iter(
            wanted
                .into_iter()
                .map(|(topic, partition_id)| self.open_partition(topic, partition_id)),
        )
        .buffer_unordered(MAX_CONCURRENT_OPENS);
        while let Some(result) = opens.next().await {
            opened += 1;
            if opened % OPEN_PROGRESS_EVERY == 0 {
                tracing::info!(
                    shard = self.id,
                    opened,
                    of = to_open,
                    "opening partition logs"
                );
            }
            if let Err(failure) = result {
                if !failures
                    .iter()
                    .any(|known| known.topic_id == failure.topic_id)
                {
                    tracing::error!(shard = self.id, error = %failure.error, "cannot open partition log(s) of a topic; partitions offline");
                    failures.push(failure);
                }
            }
            slice.tick().await;
        }
        drop(opens);
        let removed: Vec<(TopicId, i32)> = previous
            .topics_by_id
            .values()
            .filter(|topic| !image.topics_by_id.contains_key(&topic.topic_id))
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(|partition| (topic.topic_id, partition.partition_id))
            })
            .filter(|key| self.partitions.borrow().contains_key(key))
            .collect();
        // A cluster node that no longer holds a replica of a partition stops serving it (its
        // files stay: it may hold one again).
        let demoted: Vec<(TopicId, i32)> = if self.cluster.is_some() {
            self.partitions
                .borrow()
                .keys()
                .filter(|(topic_id, partition_id)| {
                    image.topic_by_id(topic_id).is_some_and(|t| {
                        t.partition(*partition_id)
                            .is_some_and(|p| !self.replicates(p))
                    })
                })
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        for key in demoted {
            tracing::info!(
                shard = self.id,
                partition = key.1,
                "no longer the leader of a partition; not serving it"
            );
            if let Some(partition) = self.partitions.borrow_mut().remove(&key) {
                partition.appended.notify(usize::MAX);
            }
            if image
                .topic_by_id(&key.0)
                .is_some_and(|t| t.name == crate::group::OFFSETS_TOPIC)
            {
                self.coordinator.unload(key.1);
            }
            if image
                .topic_by_id(&key.0)
                .is_some_and(|t| t.name == crate::txn::TXN_TOPIC)
            {
                self.txn.unload(key.1);
            }
        }
        self.apply_config_changes(&previous, &image).await;
        *self.image.borrow_mut() = image.clone();
        crate::replication::roles::update(self, &previous, &image);
        self.image_adopted.notify(usize::MAX);
        for key in removed {
            let Some(partition) = self.partitions.borrow_mut().remove(&key) else {
                continue;
            };
            partition.appended.notify(usize::MAX);
            let still_held = match Rc::try_unwrap(partition) {
                Ok(partition) => match Rc::try_unwrap(partition.log) {
                    Ok(log) => {
                        if let Err(error) = log.into_inner().delete().await {
                            tracing::warn!(%error, "deleting a removed partition's files failed");
                        }
                        None
                    }
                    Err(log) => Some(log.borrow().dir().to_path_buf()),
                },
                Err(partition) => Some(partition.log.borrow().dir().to_path_buf()),
            };
            if let Some(dir) = still_held {
                remove_dir_later(dir).await;
            }
        }
        self.abandoned_dirs
            .borrow_mut()
            .retain(|dir| std::fs::remove_dir_all(dir).is_err() && dir.exists());
        failures
    }

    /// Opens one partition's log and registers it. A partition that cannot be opened stays
    /// offline; if its directory did not exist before, what the attempt created is removed
    /// (a later topic of that name must not find a half-made log).
    pub(super) async fn open_partition(
        self: &Rc<Self>,
        topic: Arc<TopicImage>,
        partition_id: i32,
    ) -> Result<(), TopicFailure> {
        let defaults = self.topic_defaults();
        let topic_config = match config::resolve(&defaults, &topic.configs) {
            Ok(topic_config) => topic_config,
            Err(error) => {
                tracing::error!(topic = %topic.name, %error, "topic configuration unusable; using broker defaults");
                config::resolve(&defaults, &Default::default()).expect("broker defaults resolve")
            }
        };
        let dir = self.partition_dir(&topic.name, partition_id);
        let existed = dir.exists();
        tracing::debug!(shard = self.id, dir = %dir.display(), "opening partition log");
        match PartitionLog::open_for_topic(
            dir.clone(),
            crate::log_config::log_config(&topic_config),
            topic.topic_id,
        )
        .await
        {
            Ok(mut log) => {
                // A single node leads every partition: its epoch starts at the log end unless
                // it is already the latest (OffsetForLeaderEpoch answers from it). A cluster
                // node takes its role once the image is adopted (`replication::roles`).
                if self.cluster.is_none() {
                    let epoch = topic.partition(partition_id).map_or(0, |p| p.leader_epoch);
                    if let Err(error) = log.assign_leader_epoch(epoch) {
                        tracing::warn!(dir = %dir.display(), %error, "leader epoch checkpoint not written");
                    }
                }
                let log: LogHandle = Rc::new(RefCell::new(log));
                self.group_commit.register(&log);
                let partition = Rc::new(Partition {
                    log,
                    config: RefCell::new(Rc::new(topic_config)),
                    appended: event_listener::Event::new(),
                    replica: if self.cluster.is_some() {
                        crate::replication::state::Replica::unassigned()
                    } else {
                        crate::replication::state::Replica::unreplicated()
                    },
                });
                self.partitions
                    .borrow_mut()
                    .insert((topic.topic_id, partition_id), partition);
                if topic.name == crate::group::OFFSETS_TOPIC && self.cluster.is_none() {
                    glommio::spawn_local(crate::group::Coordinator::load(
                        self.clone(),
                        topic.topic_id,
                        partition_id,
                    ))
                    .detach();
                }
                if topic.name == crate::txn::TXN_TOPIC && self.cluster.is_none() {
                    glommio::spawn_local(crate::txn::TxnCoordinators::load(
                        self.clone(),
                        topic.topic_id,
                        partition_id,
                    ))
                    .detach();
                }
                Ok(())
            }
            Err(error) => {
                tracing::debug!(dir = %dir.display(), %error, "cannot open partition log; partition offline");
                if topic.name == crate::group::OFFSETS_TOPIC {
                    self.coordinator.open_failed(partition_id);
                }
                if topic.name == crate::txn::TXN_TOPIC {
                    self.txn.open_failed(partition_id);
                }
                if !existed && std::fs::remove_dir_all(&dir).is_err() && dir.exists() {
                    self.abandoned_dirs.borrow_mut().push(dir);
                }
                Err(TopicFailure {
                    topic_id: topic.topic_id,
                    error: error.to_string(),
                })
            }
        }
    }
}

/// A deleted partition still referenced by an in-flight request: removing its directory now
/// is safe on Linux (open fds keep the inodes). Same crash-safe rename-then-remove as
/// `PartitionLog::delete`.
async fn remove_dir_later(dir: PathBuf) {
    if let Err(error) = shard::log::dir::delete_partition_dir(&dir).await {
        tracing::warn!(dir = %dir.display(), %error, "removing a deleted partition's directory failed");
    }
}
