//! One shard's state: its partitions, its view of the metadata image, its mesh endpoint and
//! its counters. Lives on one core's glommio executor; nothing in it is shared with another
//! thread, so nothing in it is locked (`Rc`, `RefCell`, `Cell`).
//!
//! Shard 0 is also the metadata core: it holds the `Controller` that appends to the metadata
//! log, and publishes each new image to every shard (itself included) before answering, so a
//! client that sees a topic created can use it through any connection at once.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::StreamExt;
use shard::mesh::Mesh;
use shard::{GroupCommit, LogHandle, PartitionLog};

use crate::config::{self, BrokerConfig, TopicConfig};
use crate::forward::{Reply, Request, ShardMsg, TopicFailure, TopicOutcome, TopicSpec};
use crate::metadata::image::{Image, TopicImage};
use crate::metadata::records::TopicId;
use crate::metadata::{Controller, MAX_PARTITIONS_PER_REQUEST};
use wire::ErrorCode;

/// Longest stretch of control-plane work (topic creation, opening partition logs) shard 0 or
/// any shard does before letting its other tasks (requests on its connections) run. Well
/// under glommio's 100 ms preemption timer, which alone would let a 5,000-partition
/// CreateTopics starve the shard's connections.
const CONTROL_PLANE_SLICE: std::time::Duration = std::time::Duration::from_millis(5);

/// Partition logs opened at once while applying an image: opening a new partition waits for
/// an fsync of the data directory, and overlapping them is what makes creating thousands of
/// partitions take seconds rather than minutes. Small, because what follows each fsync
/// (creating the partition's files: inode allocation, often a millisecond or more) runs
/// without a yield, and the fsyncs that complete together resume in one go.
const MAX_CONCURRENT_OPENS: usize = 4;
/// Start-up (and large CreateTopics) log a progress line every this many partitions opened.
const OPEN_PROGRESS_EVERY: usize = 1000;

/// Kafka's error for a log that cannot be created or read on disk (KAFKA_STORAGE_ERROR).
const KAFKA_STORAGE_ERROR: i16 = 56;
/// Kafka's POLICY_VIOLATION: KAFKA-17870's answer to a CreateTopics over the partition cap.
const POLICY_VIOLATION: i16 = 44;

/// Yields to the executor's other tasks and its I/O poll once `CONTROL_PLANE_SLICE` of work
/// has passed since the last yield. A plain yield (`yield_task_queue_now`) is not enough:
/// glommio polls for I/O (new requests on sockets) only when no task is runnable or the
/// 100 ms preemption timer fires, so this waits on a timer, which goes through that poll.
struct Slice(std::time::Instant);

impl Slice {
    fn new() -> Slice {
        Slice(std::time::Instant::now())
    }

    async fn tick(&mut self) {
        if self.0.elapsed() >= CONTROL_PLANE_SLICE {
            glommio::timer::sleep(std::time::Duration::from_micros(1)).await;
            self.0 = std::time::Instant::now();
        }
    }
}

/// A partition this shard owns.
pub struct Partition {
    pub log: LogHandle,
    /// The topic's typed config; replaced (never edited) when the topic's overrides change,
    /// so a request holds one consistent version (see [`Partition::config`]).
    config: RefCell<Rc<TopicConfig>>,
    /// Notified after every append, for parked long-poll fetches.
    pub appended: event_listener::Event,
}

/// Per-shard counters, logged at shutdown (and by tests, to see every core work).
#[derive(Default)]
pub struct Stats {
    pub requests: Cell<u64>,
    pub produce_batches: Cell<u64>,
    pub fetches: Cell<u64>,
    pub forwarded_in: Cell<u64>,
    pub forwarded_out: Cell<u64>,
    /// Long polls parked here for another shard, cancelled because their caller went away.
    pub cancelled_waits: Cell<u64>,
    /// How fetched record bytes reached this shard's sockets (see `transport`).
    pub send: crate::transport::SendStats,
    /// Fetched record bytes this shard's connections got as file ranges from partitions
    /// owned by another shard (zero-copy across the mesh).
    pub remote_range_bytes: Cell<u64>,
    /// Socket writes of responses (each of one or more responses of one connection) and the
    /// responses they carried.
    pub response_writes: Cell<u64>,
    pub responses_written: Cell<u64>,
    /// Connections handed to another shard, and taken over from one (see `handoff`).
    pub handoffs_out: Cell<u64>,
    pub handoffs_in: Cell<u64>,
}

impl Partition {
    /// The topic config in force now.
    pub fn config(&self) -> Rc<TopicConfig> {
        self.config.borrow().clone()
    }

    /// Applies a changed topic config to this partition: the broker-side checks read it from
    /// the next request on, the log (retention, rolling, flushing) from its next operation.
    pub fn set_config(&self, config: TopicConfig) {
        self.log.borrow_mut().set_config(config.to_log_config());
        *self.config.borrow_mut() = Rc::new(config);
    }
}

impl Stats {
    pub fn bump(cell: &Cell<u64>) {
        cell.set(cell.get() + 1);
    }
    pub fn add(cell: &Cell<u64>, n: u64) {
        cell.set(cell.get() + n);
    }
}

pub struct Shard {
    pub id: usize,
    pub config: Arc<BrokerConfig>,
    image: RefCell<Arc<Image>>,
    partitions: RefCell<HashMap<(TopicId, i32), Rc<Partition>>>,
    pub group_commit: Rc<GroupCommit>,
    /// What topics inherit: `config` with the image's dynamic broker configs on top.
    topic_defaults: RefCell<Arc<BrokerConfig>>,
    mesh: RefCell<Option<Rc<Mesh<ShardMsg>>>>,
    mesh_ready: event_listener::Event,
    /// Notified each time this shard adopts a new metadata image.
    image_adopted: event_listener::Event,
    pending: RefCell<HashMap<u64, oneshot::Sender<Reply>>>,
    /// Long polls parked here for another shard, by (caller shard, request id), so that a
    /// `Cancel` from the caller ends them at once.
    remote_waits: RefCell<HashMap<(usize, u64), futures::future::AbortHandle>>,
    next_request_id: Cell<u64>,
    controller: Option<RefCell<Controller>>,
    /// Image updates are applied one at a time, in the order the metadata core sent them.
    image_update: glommio::sync::Semaphore,
    /// Directories of new partitions that failed to open and could not be removed then (the
    /// cause is often EMFILE, which also fails the removal); retried after each image update.
    abandoned_dirs: RefCell<Vec<PathBuf>>,
    /// Metadata core: CreateTopics/DeleteTopics run one at a time, so the failures an image
    /// publication reports belong to the request that published it.
    topic_changes: glommio::sync::Semaphore,
    /// This shard's block of producer ids: (next to give, end exclusive).
    producer_ids: Cell<(i64, i64)>,
    pub stats: Stats,
    /// Per-request figures for the metrics endpoint (see `metrics`).
    pub metrics: crate::metrics::ShardRecorder,
    /// The group coordinator of this shard's `__consumer_offsets` partitions.
    pub coordinator: crate::group::Coordinator,
    /// Fetch sessions (KIP-227) of the connections this shard serves.
    pub fetch_sessions: crate::handlers::fetch_session::ShardSessions,
    /// What connections moved in need (see `handoff`).
    pub handoff: crate::handoff::ShardHandoff,
}

impl Shard {
    pub fn new(
        id: usize,
        config: Arc<BrokerConfig>,
        image: Arc<Image>,
        controller: Option<Controller>,
    ) -> Rc<Shard> {
        let group_commit = GroupCommit::new();
        let topic_defaults = RefCell::new(layered_config(&config, &image));
        let metrics = crate::metrics::ShardRecorder::new(config.metrics_listener.is_some());
        Rc::new(Shard {
            id,
            topic_defaults,
            config,
            image: RefCell::new(image),
            partitions: RefCell::new(HashMap::new()),
            group_commit,
            mesh: RefCell::new(None),
            mesh_ready: event_listener::Event::new(),
            image_adopted: event_listener::Event::new(),
            pending: RefCell::new(HashMap::new()),
            remote_waits: RefCell::new(HashMap::new()),
            next_request_id: Cell::new(0),
            controller: controller.map(RefCell::new),
            image_update: glommio::sync::Semaphore::new(1),
            abandoned_dirs: RefCell::new(Vec::new()),
            topic_changes: glommio::sync::Semaphore::new(1),
            producer_ids: Cell::new((0, 0)),
            stats: Stats::default(),
            metrics,
            coordinator: crate::group::Coordinator::default(),
            fetch_sessions: Default::default(),
            handoff: Default::default(),
        })
    }

    pub fn set_mesh(&self, mesh: Rc<Mesh<ShardMsg>>) {
        *self.mesh.borrow_mut() = Some(mesh);
        self.mesh_ready.notify(usize::MAX);
    }

    /// The mesh, once connected. A shard that already serves (each starts accepting as soon
    /// as it is ready) may forward to one still connecting, whose receive loop delivers
    /// before `set_mesh`; its replies wait here instead of panicking.
    async fn connected_mesh(&self) -> Rc<Mesh<ShardMsg>> {
        loop {
            let ready = self.mesh_ready.listen();
            if let Some(mesh) = self.mesh.borrow().clone() {
                return mesh;
            }
            ready.await;
        }
    }

    pub fn shard_count(&self) -> usize {
        self.mesh
            .borrow()
            .as_ref()
            .map_or(1, |mesh| mesh.shard_count())
    }

    /// The broker config topics inherit (static config and dynamic broker configs).
    pub fn topic_defaults(&self) -> Arc<BrokerConfig> {
        self.topic_defaults.borrow().clone()
    }

    /// The metadata image this shard serves from (a cheap `Arc` clone, no lock).
    pub fn image(&self) -> Arc<Image> {
        self.image.borrow().clone()
    }

    /// Waits until this shard's image satisfies `ready`, or `timeout` passes (false then). A
    /// topic created through another shard appears here only once this shard has opened its
    /// partitions and adopted the new image.
    pub async fn wait_for_image(&self, ready: impl Fn(&Image) -> bool, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let adopted = self.image_adopted.listen();
            if ready(&self.image()) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let timer = glommio::timer::sleep(left);
            futures::pin_mut!(timer);
            futures::future::select(adopted, timer).await;
        }
    }

    pub fn partition(&self, topic_id: &TopicId, partition: i32) -> Option<Rc<Partition>> {
        self.partitions
            .borrow()
            .get(&(*topic_id, partition))
            .cloned()
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.borrow().len()
    }

    /// Every partition this shard owns, with its key (metrics snapshots).
    pub fn owned_partitions(&self) -> Vec<((TopicId, i32), Rc<Partition>)> {
        self.partitions
            .borrow()
            .iter()
            .map(|(key, partition)| (*key, partition.clone()))
            .collect()
    }

    /// Runs `request` on shard `target`: locally when that is this shard, else over the mesh.
    ///
    /// Ordering: a remote request is pushed on the ring before this returns its first
    /// `Pending`, and a local one runs its synchronous prefix (for produce: the append) at
    /// the first poll; so two calls made in order by one connection reach the log in order.
    pub async fn call(self: &Rc<Self>, target: usize, request: Request) -> Reply {
        if target == self.id {
            return self.execute(request).await;
        }
        let id = self.next_request_id.get();
        self.next_request_id.set(id + 1);
        let (sender, receiver) = oneshot::channel();
        self.pending.borrow_mut().insert(id, sender);
        Stats::bump(&self.stats.forwarded_out);
        let mesh = self
            .mesh
            .borrow()
            .clone()
            .expect("mesh connected before serving");
        // Only a long poll is worth cancelling: everything else ends within a disk operation,
        // and a produce must not be cut between its shards' appends.
        let cancel_on_drop = matches!(request, Request::WaitForData { .. });
        mesh.send(target, ShardMsg::Request { id, body: request });
        let mut guard = CancelOnDrop {
            shard: self,
            target,
            id,
            cancel_remote: cancel_on_drop,
            answered: false,
        };
        let reply = receiver
            .await
            .expect("a shard never drops a forwarded request");
        guard.answered = true;
        reply
    }

    /// Hands connection `moved` to shard `target`, which serves it from then on.
    pub fn hand_off(&self, target: usize, moved: crate::handoff::Moved) {
        Stats::bump(&self.stats.handoffs_out);
        let mesh = self
            .mesh
            .borrow()
            .clone()
            .expect("mesh connected before serving");
        mesh.send(target, ShardMsg::Adopt(Box::new(moved)));
    }

    /// Delivers a message from shard `source` (called by the mesh's receiver tasks).
    pub fn deliver(self: &Rc<Self>, source: usize, message: ShardMsg) {
        match message {
            ShardMsg::Request {
                id,
                body: body @ Request::WaitForData { .. },
            } => {
                Stats::bump(&self.stats.forwarded_in);
                let shard = self.clone();
                let (abort, registration) = futures::future::AbortHandle::new_pair();
                self.remote_waits.borrow_mut().insert((source, id), abort);
                glommio::spawn_local(async move {
                    let wait = futures::future::Abortable::new(shard.execute(body), registration);
                    if let Ok(reply) = wait.await {
                        shard.remote_waits.borrow_mut().remove(&(source, id));
                        let mesh = shard.connected_mesh().await;
                        mesh.send(source, ShardMsg::Reply { id, body: reply });
                    }
                })
                .detach();
            }
            ShardMsg::Cancel { id } => {
                if let Some(abort) = self.remote_waits.borrow_mut().remove(&(source, id)) {
                    abort.abort();
                    Stats::bump(&self.stats.cancelled_waits);
                }
            }
            ShardMsg::Request { id, body } => {
                Stats::bump(&self.stats.forwarded_in);
                let shard = self.clone();
                // Spawned in arrival order; each runs its synchronous prefix in that order.
                glommio::spawn_local(async move {
                    let reply = shard.execute(body).await;
                    let mesh = shard.connected_mesh().await;
                    mesh.send(source, ShardMsg::Reply { id, body: reply });
                })
                .detach();
            }
            ShardMsg::Adopt(moved) => {
                Stats::bump(&self.stats.handoffs_in);
                glommio::spawn_local(crate::connection::adopt(self.clone(), *moved)).detach();
            }
            ShardMsg::Reply { id, body } => {
                if let Some(sender) = self.pending.borrow_mut().remove(&id) {
                    // The caller may have given up (a long poll that was answered elsewhere).
                    let _ = sender.send(body);
                }
            }
        }
    }

    async fn execute(self: &Rc<Self>, request: Request) -> Reply {
        match request {
            Request::Produce { acks, parts } => {
                Reply::Produce(crate::partition_ops::produce_many(self, acks, parts).await)
            }
            Request::Fetch {
                topic_id,
                partition,
                offset,
                max_bytes,
                min_one,
            } => Reply::Fetch(
                crate::partition_ops::fetch(self, &topic_id, partition, offset, max_bytes, min_one)
                    .await,
            ),
            Request::WaitForData {
                topic_id,
                partition,
                offset,
                wait_ms,
            } => {
                crate::partition_ops::wait_for_data(self, &topic_id, partition, offset, wait_ms)
                    .await;
                Reply::Waited
            }
            Request::ListOffsets {
                topic_id,
                partition,
                timestamp,
            } => Reply::ListOffsets(
                crate::partition_ops::list_offsets(self, &topic_id, partition, timestamp).await,
            ),
            Request::DescribeProducers {
                topic_id,
                partition,
            } => {
                let (code, producers) =
                    crate::partition_ops::describe_producers(self, &topic_id, partition);
                Reply::Producers(code, producers)
            }
            Request::DeleteRecords {
                topic_id,
                partition,
                offset,
            } => {
                let (code, low_watermark) =
                    crate::partition_ops::delete_records(self, &topic_id, partition, offset);
                Reply::DeleteRecords(code, low_watermark)
            }
            Request::OffsetForLeaderEpoch {
                topic_id,
                partition,
                current_leader_epoch,
                leader_epoch,
            } => {
                let (code, epoch, end_offset) = crate::partition_ops::offset_for_leader_epoch(
                    self,
                    &topic_id,
                    partition,
                    current_leader_epoch,
                    leader_epoch,
                );
                Reply::EpochEndOffset(code, epoch, end_offset)
            }
            Request::CreatePartitions {
                topics,
                validate_only,
            } => Reply::PartitionsCreated(self.create_partitions(topics, validate_only).await),
            Request::AllocateProducerIds => Reply::ProducerIdBlock(self.allocate_producer_ids()),
            Request::CreateTopics {
                topics,
                validate_only,
            } => Reply::Topics(self.create_topics(topics, validate_only).await),
            Request::DeleteTopics { names } => Reply::Topics(self.delete_topics(names).await),
            Request::AlterTopicConfigs {
                changes,
                validate_only,
            } => Reply::Topics(self.alter_topic_configs(changes, validate_only).await),
            Request::ImageUpdate(image) => Reply::ImageApplied(self.apply_image(image).await),
            Request::Group { partition, op } => {
                Reply::Group(crate::group::Coordinator::execute(self, partition, op).await)
            }
            Request::CloseFetchSession { session_id } => {
                self.fetch_sessions.close(self, session_id);
                Reply::FetchSessionClosed
            }
        }
    }

    /// Metadata core only: a new block of producer ids, durable before it is returned.
    fn allocate_producer_ids(&self) -> Result<i64, i16> {
        let controller = self
            .controller
            .as_ref()
            .expect("producer id blocks are allocated on the metadata core");
        let allocated = controller.borrow_mut().allocate_producer_ids();
        allocated.map_err(|error| {
            tracing::error!(%error, "producer id block not allocated");
            match error {
                crate::metadata::LogError::ProducerIdsExhausted => {
                    ErrorCode::UnknownServerError.code()
                }
                // Kafka's brokers answer this while they cannot get a block from the
                // controller (retriable: the client retries InitProducerId).
                _ => ErrorCode::CoordinatorLoadInProgress.code(),
            }
        })
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
        let first = match self.call(0, Request::AllocateProducerIds).await {
            Reply::ProducerIdBlock(block) => block?,
            _ => return Err(ErrorCode::UnknownServerError.code()),
        };
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
    async fn create_partitions(
        self: &Rc<Self>,
        topics: Vec<crate::forward::PartitionsSpec>,
        validate_only: bool,
    ) -> Vec<(i16, Option<String>)> {
        let controller = self
            .controller
            .as_ref()
            .expect("CreatePartitions runs on the metadata core");
        let _serial = self.topic_changes.acquire_permit(1).await;
        let shards = self.shard_count() as u16;
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
            for failure in self.publish_image().await {
                tracing::error!(error = %failure.error, "new partitions could not be opened; they stay offline");
            }
        }
        outcomes
    }

    async fn create_topics(
        self: &Rc<Self>,
        topics: Vec<TopicSpec>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        let controller = self
            .controller
            .as_ref()
            .expect("CreateTopics runs on the metadata core");
        let _serial = self.topic_changes.acquire_permit(1).await;
        let shards = self.shard_count() as u16;
        let mut outcomes = Vec::with_capacity(topics.len());
        // KAFKA-17870: the whole request fails when its topics add up to more partitions
        // than one metadata batch may hold (-1 counts as the broker default, as in Kafka).
        let total: u64 = topics
            .iter()
            .map(|spec| match spec.num_partitions {
                -1 => u64::try_from(self.config.num_partitions).unwrap_or(0),
                n => u64::try_from(n).unwrap_or(0),
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
            let result = controller.borrow_mut().create_topic(
                &spec.name,
                spec.num_partitions,
                spec.replication_factor,
                spec.configs.clone(),
                shards,
                validate_only,
            );
            tracing::debug!(topic = %spec.name, ok = result.is_ok(), "create_topic done");
            let num_partitions = if spec.num_partitions == -1 {
                self.config.num_partitions
            } else {
                spec.num_partitions
            };
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
        let failures = self.publish_image().await;
        if failures.is_empty() {
            return outcomes;
        }
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
            self.publish_image().await;
        }
        outcomes
    }

    /// Metadata core only: deletes topics by name, then publishes the new image.
    async fn delete_topics(self: &Rc<Self>, names: Vec<String>) -> Vec<TopicOutcome> {
        let controller = self
            .controller
            .as_ref()
            .expect("DeleteTopics runs on the metadata core");
        let _serial = self.topic_changes.acquire_permit(1).await;
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
        self.publish_image().await;
        outcomes
    }

    /// Metadata core only: changes topic configs, then publishes the new image, whose topics
    /// every shard re-reads (see `apply_config_changes`) before this answers.
    async fn alter_topic_configs(
        self: &Rc<Self>,
        changes: Vec<(i8, String, crate::metadata::ConfigChange)>,
        validate_only: bool,
    ) -> Vec<TopicOutcome> {
        let controller = self
            .controller
            .as_ref()
            .expect("AlterConfigs runs on the metadata core");
        let _serial = self.topic_changes.acquire_permit(1).await;
        let mut changed = false;
        let outcomes = changes
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
            self.publish_image().await;
        }
        outcomes
    }

    /// Pushes changed configs to this shard's partitions: of topics whose overrides differ
    /// between `previous` and `image`, or of every topic when the dynamic broker configs
    /// changed (they supply the defaults). Parsed once per topic, then set on each partition
    /// and its log.
    async fn apply_config_changes(&self, previous: &Image, image: &Image) {
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
                if let Some(local) = self.partition(&topic.topic_id, partition.partition_id) {
                    local.set_config(topic_config.clone());
                }
            }
            if !broker_changed {
                tracing::info!(shard = self.id, topic = %topic.name, "topic configuration changed");
            }
            slice.tick().await;
        }
    }

    /// Sends the controller's current image to every shard and waits until each applied it.
    /// Returns the topics whose partitions some shard could not open.
    async fn publish_image(self: &Rc<Self>) -> Vec<TopicFailure> {
        let image = self
            .controller
            .as_ref()
            .expect("metadata core")
            .borrow()
            .image();
        tracing::debug!(shards = self.shard_count(), "publishing image");
        let calls = (0..self.shard_count())
            .map(|target| self.call(target, Request::ImageUpdate(image.clone())));
        let mut failures = Vec::new();
        for reply in futures::future::join_all(calls).await {
            if let Reply::ImageApplied(failed) = reply {
                failures.extend(failed);
            }
        }
        failures
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
                if usize::from(partition.shard) % self.shard_count() == self.id
                    && self
                        .partition(&topic.topic_id, partition.partition_id)
                        .is_none()
                {
                    if topic.name == crate::group::OFFSETS_TOPIC {
                        self.coordinator.opening(partition.partition_id);
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
        self.apply_config_changes(&previous, &image).await;
        *self.image.borrow_mut() = image;
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
    async fn open_partition(
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
            topic_config.to_log_config(),
            topic.topic_id,
        )
        .await
        {
            Ok(mut log) => {
                // This node leads every partition: its epoch starts at the log end unless it
                // is already the latest (OffsetForLeaderEpoch answers from it).
                let epoch = topic.partition(partition_id).map_or(0, |p| p.leader_epoch);
                if let Err(error) = log.assign_leader_epoch(epoch) {
                    tracing::warn!(dir = %dir.display(), %error, "leader epoch checkpoint not written");
                }
                let log: LogHandle = Rc::new(RefCell::new(log));
                self.group_commit.register(&log);
                let partition = Rc::new(Partition {
                    log,
                    config: RefCell::new(Rc::new(topic_config)),
                    appended: event_listener::Event::new(),
                });
                self.partitions
                    .borrow_mut()
                    .insert((topic.topic_id, partition_id), partition);
                if topic.name == crate::group::OFFSETS_TOPIC {
                    glommio::spawn_local(crate::group::Coordinator::load(
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

    /// Deletes old segments by `retention.ms` / `retention.bytes` on every partition of this
    /// shard (Kafka checks every `log.retention.check.interval.ms`, 5 minutes by default).
    pub fn apply_retention(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as i64);
        let partitions: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
        for partition in partitions {
            // Producer expiry rides on the retention timer (Kafka checks every 10 minutes,
            // `producer.id.expiration.check.interval.ms`; retention's default is 5).
            let expired = partition.log.borrow_mut().remove_expired_producers(now);
            if expired > 0 {
                tracing::debug!(shard = self.id, expired, "idle producers expired");
            }
            if shard::log::cleaner::is_cleaning(partition.log.borrow().dir()) {
                continue; // never delete a segment a cleaner pass is rewriting
            }
            let result = partition.log.borrow_mut().apply_retention(now);
            match result {
                Ok(0) => {}
                Ok(deleted) => {
                    tracing::info!(shard = self.id, deleted, "retention deleted old segments")
                }
                Err(error) => tracing::warn!(shard = self.id, %error, "retention failed"),
            }
        }
    }

    /// One round of this shard's log cleaner (Kafka's `cleanFilthiestLog`): of the compacted
    /// partitions due for a pass, the one with the highest dirty ratio is cleaned (overdue by
    /// `max.compaction.lag.ms` first). True if a log was cleaned (the caller then loops
    /// without sleeping).
    pub async fn clean_filthiest_log(&self, cleaner: &mut shard::log::cleaner::Cleaner) -> bool {
        use shard::log::cleaner::Cleaner;
        let now = shard_now_ms();
        let compacted: Vec<Rc<Partition>> = self
            .partitions
            .borrow()
            .values()
            .filter(|p| p.log.borrow().config().cleanup_compact)
            .cloned()
            .collect();
        let mut best: Option<(Rc<Partition>, shard::log::cleaner::Cleanability)> = None;
        for partition in &compacted {
            match Cleaner::cleanability(&partition.log, now).await {
                Ok(Some(c)) if c.due() => {
                    let better = best
                        .as_ref()
                        .is_none_or(|(_, b)| (c.overdue, c.ratio()) > (b.overdue, b.ratio()));
                    if better {
                        best = Some((partition.clone(), c));
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(shard = self.id, %error, "log cleaner check failed"),
            }
        }
        let cleaned = best.is_some();
        if let Some((partition, c)) = best {
            if let Err(error) = cleaner.clean(&partition.log, now, &c).await {
                tracing::warn!(shard = self.id, dir = %partition.log.borrow().dir().display(), %error, "log cleaner pass failed");
            }
        }
        cleaned
    }

    fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.config.data_dir().join(format!("{topic}-{partition}"))
    }

    /// Clean shutdown: syncs every log; closes (trimmed indexes, clean-shutdown marker) those
    /// no request still holds, so the next start skips their recovery.
    pub async fn close(self: &Rc<Self>) {
        let partitions: Vec<_> = self
            .partitions
            .borrow_mut()
            .drain()
            .map(|(_, p)| p)
            .collect();
        for partition in &partitions {
            if let Err(error) = self.group_commit.wait_durable(&partition.log).await {
                tracing::warn!(%error, "syncing a log at shutdown failed");
            }
        }
        self.group_commit.shutdown();
        for partition in partitions {
            let Ok(partition) = Rc::try_unwrap(partition) else {
                continue;
            };
            let Ok(log) = Rc::try_unwrap(partition.log) else {
                continue;
            };
            let log = log.into_inner();
            let dir = log.dir().to_path_buf();
            if let Err(error) = log.close().await {
                tracing::warn!(dir = %dir.display(), %error, "closing a log failed");
            }
        }
    }
}

/// `config` with the dynamic broker configs of `image` (cluster-wide "" and this node's) on
/// top. They were validated when written; one that no longer parses is logged and ignored.
fn layered_config(config: &Arc<BrokerConfig>, image: &Image) -> Arc<BrokerConfig> {
    let node = config.node_id.to_string();
    match config.with_dynamic(
        image.broker_configs.get(""),
        image.broker_configs.get(&node),
    ) {
        Ok(layered) => Arc::new(layered),
        Err(error) => {
            tracing::error!(%error, "dynamic broker configuration unusable; using the static one");
            config.clone()
        }
    }
}

fn shard_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// Cancels a forwarded long poll whose caller was dropped before its reply came (the
/// connection closed): forgets the reply slot and tells the owner to stop waiting.
struct CancelOnDrop<'a> {
    shard: &'a Rc<Shard>,
    target: usize,
    id: u64,
    cancel_remote: bool,
    answered: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.shard.pending.borrow_mut().remove(&self.id);
        if self.cancel_remote {
            if let Some(mesh) = self.shard.mesh.borrow().clone() {
                mesh.send(self.target, ShardMsg::Cancel { id: self.id });
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
