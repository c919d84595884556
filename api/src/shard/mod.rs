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
use futures::future::LocalBoxFuture;
use futures::StreamExt;
use shard::mesh::{Mesh, Work};
use shard::{GroupCommit, LogHandle, PartitionLog};

use crate::config::{self, BrokerConfig, TopicConfig};
use crate::forward::{
    self, Reply, Request, Serve, ShardMsg, ShardReply, TopicFailure, TopicOutcome, TopicSpec,
};
use crate::metadata::image::{Image, PartitionImage, TopicImage};
use crate::metadata::records::TopicId;
use crate::metadata::{Controller, MAX_PARTITIONS_PER_REQUEST};
use wire::ErrorCode;

pub(crate) mod acls;
pub mod authorization;
mod calls;
mod client_quotas;
mod control_plane;
mod credentials;
mod retention;
pub(crate) mod to_controller;

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

/// Long polls this shard keeps parked for other shards at once: half of the mesh's parked
/// slots, so that group calls (the other parked kind) always find room. One more is answered
/// at once as `Waited::Refused`, and its fetch answers its client with what it has (Kafka
/// allows answering before `min_bytes`).
const MAX_PARKED_WAITS: usize = shard::mesh::MAX_CALLS_PARKED / 2;

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
    /// Notified after every append and every move of the high watermark or the role, for
    /// parked long-poll fetches and acks=all produces.
    pub appended: event_listener::Event,
    /// Leader, follower or only copy; the high watermark (see `replication`).
    pub replica: crate::replication::state::Replica,
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
        self.log
            .borrow_mut()
            .set_config(crate::log_config::log_config(&config));
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
    mesh: RefCell<Option<Rc<Mesh<ShardMsg, ShardReply>>>>,
    mesh_ready: event_listener::Event,
    /// Notified each time this shard adopts a new metadata image.
    image_adopted: event_listener::Event,
    pending: RefCell<HashMap<u64, oneshot::Sender<Reply>>>,
    /// Long polls parked here for another shard, by (caller shard, request id), so that a
    /// `Cancel` from the caller ends them at once.
    remote_waits: RefCell<HashMap<(usize, u64), futures::future::AbortHandle>>,
    next_request_id: Cell<u64>,
    controller: Option<RefCell<Controller>>,
    /// In a multi-node cluster: the committed image and the active controller, from this
    /// node's controller thread (None: a single node, its own quorum).
    pub cluster: Option<Arc<crate::metadata::cluster::ClusterLink>>,
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
    pub coordinator: crate::group::state::Coordinator,
    /// The transaction coordinator of this shard's `__transaction_state` partitions.
    pub txn: crate::txn::TxnCoordinators,
    /// `super.users` and `allow.everyone.if.no.acl.found` when `authorizer.class.name` is set
    /// (None: no authorization); the ACLs are the image's (see `handlers::authorize`).
    pub authorizer: Option<acl::AuthorizerConfig>,
    /// Fetch sessions (KIP-227) of the connections this shard serves.
    pub fetch_sessions: crate::handlers::fetch_session::cache::ShardSessions,
    /// What connections moved in need (see `handoff`).
    pub handoff: crate::handoff::ShardHandoff,
    /// Follower fetchers and the ISR check (see `replication`).
    pub replication: crate::replication::state::ShardReplication,
}

impl Shard {
    pub fn new(
        id: usize,
        config: Arc<BrokerConfig>,
        image: Arc<Image>,
        controller: Option<Controller>,
        cluster: Option<Arc<crate::metadata::cluster::ClusterLink>>,
    ) -> Rc<Shard> {
        let group_commit = GroupCommit::new();
        let topic_defaults = RefCell::new(layered_config(&config, &image));
        let metrics = crate::metrics::ShardRecorder::new(config.metrics_listener.is_some());
        let authorizer = authorization::authorizer_config(&config)
            .expect("start-up checked super.users before the shards started");
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
            cluster,
            image_update: glommio::sync::Semaphore::new(1),
            abandoned_dirs: RefCell::new(Vec::new()),
            topic_changes: glommio::sync::Semaphore::new(1),
            producer_ids: Cell::new((0, 0)),
            stats: Stats::default(),
            metrics,
            coordinator: crate::group::state::Coordinator::default(),
            txn: crate::txn::TxnCoordinators::default(),
            authorizer,
            fetch_sessions: Default::default(),
            handoff: Default::default(),
            replication: Default::default(),
        })
    }

    pub fn set_mesh(&self, mesh: Rc<Mesh<ShardMsg, ShardReply>>) {
        *self.mesh.borrow_mut() = Some(mesh);
        self.mesh_ready.notify(usize::MAX);
    }

    /// The mesh, once connected. A shard that already serves (each starts accepting as soon
    /// as it is ready) may forward to one still connecting, whose receive loop delivers
    /// before `set_mesh`; its replies wait here instead of panicking.
    async fn connected_mesh(&self) -> Rc<Mesh<ShardMsg, ShardReply>> {
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

    /// The shard that owns `partition` in this run (see [`owner`]).
    pub fn owner(&self, partition: &PartitionImage) -> usize {
        owner(partition.shard, self.shard_count())
    }

    /// The broker config topics inherit (static config and dynamic broker configs).
    pub fn topic_defaults(&self) -> Arc<BrokerConfig> {
        self.topic_defaults.borrow().clone()
    }

    /// The metadata image this shard serves from (a cheap `Arc` clone, no lock).
    pub fn image(&self) -> Arc<Image> {
        self.image.borrow().clone()
    }

    /// Reads the current image without taking a reference to it (no atomic count on a
    /// request's hot path). `read` must not wait, nor publish an image.
    pub fn with_image<R>(&self, read: impl FnOnce(&Image) -> R) -> R {
        read(&self.image.borrow())
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

    /// A partition this shard serves clients for (it leads it, or it is not replicated).
    pub fn partition(&self, topic_id: &TopicId, partition: i32) -> Option<Rc<Partition>> {
        self.local_replica(topic_id, partition)
            .filter(|p| p.replica.serves_clients())
    }

    /// A partition this shard holds a replica of, leader or follower.
    pub fn local_replica(&self, topic_id: &TopicId, partition: i32) -> Option<Rc<Partition>> {
        self.partitions
            .borrow()
            .get(&(*topic_id, partition))
            .cloned()
    }

    /// Whether this node holds a replica of `partition`: a single node all; a cluster node
    /// those it is a replica of (and one it leads, whatever the replica list says).
    pub fn replicates(&self, partition: &PartitionImage) -> bool {
        self.cluster.is_none()
            || partition.leader == self.config.node_id
            || partition.replicas.contains(&self.config.node_id)
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

    fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.config.data_dir().join(format!("{topic}-{partition}"))
    }

    /// Clean shutdown: syncs every log; closes (trimmed indexes, clean-shutdown marker) those
    /// no request still holds, so the next start skips their recovery.
    /// Logs that cannot be closed (still held) are left synced, for recovery at the next start.
    pub async fn close(self: &Rc<Self>) {
        self.replication.stopped.set(true);
        let partitions: Vec<_> = self
            .partitions
            .borrow_mut()
            .drain()
            .map(|(_, p)| p)
            .collect();
        // Logs no request holds are made durable by `close_all`'s file-system syncs. The
        // others are synced through the group commit, waited side by side so that one round
        // takes many logs (one after another, each dirty log had a round of its own), and
        // closed with the rest if their requests let go meanwhile.
        let (owned, held): (Vec<_>, Vec<_>) = partitions
            .into_iter()
            .partition(|p| Rc::strong_count(p) == 1 && Rc::strong_count(&p.log) == 1);
        futures::stream::iter(&held)
            .for_each_concurrent(SHUTDOWN_SYNC_WAITS_IN_FLIGHT, |partition| async move {
                if let Err(error) = self.group_commit.wait_durable(&partition.log).await {
                    tracing::warn!(%error, "syncing a log at shutdown failed");
                }
            })
            .await;
        self.group_commit.shutdown();
        let logs = owned
            .into_iter()
            .chain(held)
            .filter_map(|partition| {
                let partition = Rc::try_unwrap(partition).ok()?;
                Some(Rc::try_unwrap(partition.log).ok()?.into_inner())
            })
            .collect();
        PartitionLog::close_all(logs).await;
    }
}

/// Most partition logs a shard waits on the group commit for at once at shutdown (a round
/// takes every log requested before it starts).
const SHUTDOWN_SYNC_WAITS_IN_FLIGHT: usize = 4096;

/// The shard (mesh index) that owns a partition whose metadata names shard `assigned`, in a
/// run of `shard_count` shards. The metadata keeps the shard chosen at creation; a restart
/// with fewer shards folds it onto the ones that exist, so every partition has an owner.
/// The one place this mapping is computed: every router (handlers, coordinators, image
/// application) must agree on it, or a partition would be served by two shards.
pub fn owner(assigned: u16, shard_count: usize) -> usize {
    usize::from(assigned) % shard_count.max(1)
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

/// What the mesh hands this shard's calls and replies to (its `shard::mesh::Inbox` impl is in
/// `calls.rs`, beside the code it runs).
pub struct Inbox(pub Rc<Shard>);
