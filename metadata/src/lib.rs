//! Cluster metadata: topics, partitions, topic ids, configs and partition-to-shard ownership.
//!
//! The state is a log of Kafka-like metadata records ([`records`]) kept on disk by
//! [`log::MetadataLog`] (snapshotted, replayed at start) and folded into an immutable
//! [`image::Image`]. The [`Controller`] runs on the metadata core: it validates requests,
//! appends records (durably) and only then applies them, producing a new `Arc<Image>` that is
//! published to the shards, which read it without locks.
//!
//! Single node for now. A later Raft layer replicates the very same records (hence the
//! epoch field in each log entry and Kafka's record shapes).

pub mod acls;
pub mod alter_partition;
pub mod broker_lifecycle;
pub mod cluster;
pub mod elections;
pub mod image;
pub mod leadership;
pub mod log;
pub mod placement;
pub mod quotas;
pub mod records;
pub mod scram;
mod topic_layout;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use config::{BrokerConfig, ConfigError};
use storage::Disk;

use image::Image;
pub use log::{LogError, MetadataLog};
pub use records::{MetadataRecord, TopicId, RESOURCE_BROKER, RESOURCE_TOPIC};
pub use topic_layout::TopicLayout;
use topic_layout::{new_partition, ReplicasAndIsr};

/// Producer ids per block handed to a shard (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Records between automatic snapshots.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 1000;

/// Upper bound on the partitions one CreateTopics request (or one Metadata request's
/// auto-creation) may create, summed over its topics: Kafka's `MAX_PARTITIONS_PER_BATCH`
/// (KAFKA-17870), answered with POLICY_VIOLATION for every topic. Each partition is a metadata
/// record, a directory and open files; this keeps one request from exhausting them.
pub const MAX_PARTITIONS_PER_REQUEST: u64 = 10_000;

/// Upper bound on one topic's partitions (INVALID_PARTITIONS): no topic can be created with
/// more than one request may create.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = MAX_PARTITIONS_PER_REQUEST as i32;

/// Kafka's internal metadata topic name; reserved (its directory name would collide).
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// Where the metadata log lives under a data directory (Kafka's KRaft layout).
pub fn default_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(format!("{METADATA_TOPIC}-0"))
}

#[derive(Debug, thiserror::Error)]
pub enum CreateTopicError {
    /// INVALID_TOPIC_EXCEPTION (17)
    #[error("{0}")]
    InvalidTopic(String),
    /// TOPIC_ALREADY_EXISTS (36)
    #[error("Topic '{0}' already exists.")]
    TopicAlreadyExists(String),
    /// INVALID_PARTITIONS (37)
    #[error("{0}")]
    InvalidPartitions(String),
    /// INVALID_REPLICATION_FACTOR (38)
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// INVALID_REPLICA_ASSIGNMENT (39)
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    /// INVALID_REQUEST (42)
    #[error("{0}")]
    InvalidRequest(String),
    /// INVALID_CONFIG (40)
    #[error("{0}")]
    InvalidConfig(#[from] ConfigError),
    /// UNKNOWN_SERVER_ERROR (-1): the metadata log could not be written.
    #[error("metadata log: {0}")]
    Storage(#[from] LogError),
}

impl CreateTopicError {
    /// Kafka error code for the CreateTopics response.
    pub fn error_code(&self) -> i16 {
        match self {
            CreateTopicError::InvalidTopic(_) => 17,
            CreateTopicError::TopicAlreadyExists(_) => 36,
            CreateTopicError::InvalidPartitions(_) => 37,
            CreateTopicError::InvalidReplicationFactor(_) => 38,
            CreateTopicError::InvalidReplicaAssignment(_) => 39,
            CreateTopicError::InvalidRequest(_) => 42,
            CreateTopicError::InvalidConfig(_) => 40,
            CreateTopicError::Storage(_) => -1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeleteTopicError {
    /// UNKNOWN_TOPIC_OR_PARTITION (3) (UNKNOWN_TOPIC_ID (100) when deleting by id)
    #[error("This server does not host this topic.")]
    UnknownTopic,
    /// TOPIC_DELETION_DISABLED (73)
    #[error("Topic deletion is disabled (delete.topic.enable=false).")]
    DeletionDisabled,
    /// UNKNOWN_SERVER_ERROR (-1): the metadata log could not be written.
    #[error("metadata log: {0}")]
    Storage(#[from] LogError),
}

/// A resource's config change, as AlterConfigs or IncrementalAlterConfigs asks it.
#[derive(Clone, Debug)]
pub enum ConfigChange {
    /// AlterConfigs: the new override set is exactly these keys.
    Replace(Vec<(String, Option<String>)>),
    /// IncrementalAlterConfigs: these operations on the current overrides.
    Incremental(Vec<(String, config::AlterOp, Option<String>)>),
}

#[derive(Debug, thiserror::Error)]
pub enum AlterConfigsError {
    /// UNKNOWN_TOPIC_OR_PARTITION (3)
    #[error("The topic '{0}' does not exist.")]
    UnknownTopic(String),
    /// INVALID_REQUEST (42): a resource type we keep no configs for.
    #[error("Unsupported resource type {0}")]
    UnsupportedResource(i8),
    /// INVALID_REQUEST (42) / INVALID_CONFIG (40)
    #[error("{0}")]
    Refused(#[from] config::AlterError),
    /// INVALID_CONFIG (40): a value the table refuses.
    #[error("{0}")]
    InvalidConfig(#[from] ConfigError),
    /// UNKNOWN_SERVER_ERROR (-1): the metadata log could not be written.
    #[error("metadata log: {0}")]
    Storage(#[from] LogError),
}

impl AlterConfigsError {
    pub fn error_code(&self) -> i16 {
        match self {
            AlterConfigsError::UnknownTopic(_) => 3,
            AlterConfigsError::UnsupportedResource(_) => 42,
            AlterConfigsError::Refused(error) => error.error_code(),
            AlterConfigsError::InvalidConfig(_) => 40,
            AlterConfigsError::Storage(_) => -1,
        }
    }
}

impl DeleteTopicError {
    /// Kafka error code for the DeleteTopics response (by name).
    pub fn error_code(&self) -> i16 {
        match self {
            DeleteTopicError::UnknownTopic => 3,
            DeleteTopicError::DeletionDisabled => 73,
            DeleteTopicError::Storage(_) => -1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CreatePartitionsError {
    /// UNKNOWN_TOPIC_OR_PARTITION (3)
    #[error("This server does not host this topic.")]
    UnknownTopic,
    /// INVALID_PARTITIONS (37)
    #[error("{0}")]
    InvalidPartitions(String),
    /// INVALID_REPLICA_ASSIGNMENT (39)
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    /// UNKNOWN_SERVER_ERROR (-1): the metadata log could not be written.
    #[error("metadata log: {0}")]
    Storage(#[from] LogError),
}

impl CreatePartitionsError {
    /// Kafka error code for the CreatePartitions response.
    pub fn error_code(&self) -> i16 {
        match self {
            CreatePartitionsError::UnknownTopic => 3,
            CreatePartitionsError::InvalidPartitions(_) => 37,
            CreatePartitionsError::InvalidReplicaAssignment(_) => 39,
            CreatePartitionsError::Storage(_) => -1,
        }
    }
}

/// Kafka's topic name rules (`org.apache.kafka.common.internals.Topic.validate`), plus our
/// reserved metadata topic name.
pub fn validate_topic_name(name: &str) -> Result<(), CreateTopicError> {
    let err = |m: String| Err(CreateTopicError::InvalidTopic(m));
    if name.is_empty() {
        return err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > 249 {
        return err(format!(
            "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII \
             alphanumerics, '.', '_' and '-'"
        ));
    }
    if name == METADATA_TOPIC {
        return err(format!("Topic name \"{name}\" is reserved"));
    }
    Ok(())
}

/// Kafka treats '.' and '_' as colliding (metric names); a new topic may not collide.
fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

/// Reads 16 random bytes as a v4-style UUID, avoiding Kafka's reserved ids (zero, the
/// metadata topic id `...0001`) and ids whose base64 form starts with '-' (Kafka refuses
/// those since they look like command-line flags).
pub fn random_topic_id() -> TopicId {
    loop {
        let mut b = [0u8; 16];
        let ok = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
        if ok.is_err() {
            // Fallback without /dev/urandom: std's per-process random SipHash keys.
            use std::hash::{BuildHasher, Hasher};
            let s = std::collections::hash_map::RandomState::new();
            for (i, chunk) in b.chunks_mut(8).enumerate() {
                let mut h = s.build_hasher();
                h.write_usize(i);
                h.write_u128(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos()),
                );
                chunk.copy_from_slice(&h.finish().to_be_bytes());
            }
        }
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let mut metadata_id = [0u8; 16];
        metadata_id[15] = 1;
        // Base64 url-safe index 62 is '-'.
        if b != [0u8; 16] && b != metadata_id && b[0] >> 2 != 62 {
            return b;
        }
    }
}

/// Shard slots a cluster's controller spreads partitions over: each broker serves slot `s`
/// on its shard `s % num.shards`, so brokers with different shard counts share one
/// assignment. 840 is divisible by every count from 1 to 8, so those stay exactly balanced.
pub const CLUSTER_SHARD_SLOTS: u16 = 840;

/// Where the controller's records go.
enum Sink {
    /// The node's own metadata log (a single node, its own quorum).
    Log(MetadataLog),
    /// A member of a Raft quorum: records wait here for the caller to propose them
    /// ([`Controller::take_staged`]); the image includes them speculatively until the
    /// committed image replaces it ([`Controller::adopt`]), as Kafka's QuorumController
    /// applies its own records before they commit and reverts on a lost leadership.
    Staged(Vec<MetadataRecord>),
}

/// Owns the metadata log (or the records staged for the quorum) and the current image;
/// lives on the metadata core.
pub struct Controller {
    log: Sink,
    image: Arc<Image>,
    config: BrokerConfig,
    /// Round-robin cursor for shard assignment; continues across topics so shards stay
    /// balanced (starts at the number of existing partitions after a restart).
    next_shard: u64,
    snapshot_every: u64,
}

impl Controller {
    /// Opens the log in `dir` on `disk` (the broker: `Disk::Real`; simulations: a `SimDisk`),
    /// replaying snapshot + entries into the image.
    pub fn open(disk: &Disk, dir: &Path, config: BrokerConfig) -> Result<Controller, LogError> {
        let (log, records) = MetadataLog::open(disk, dir)?;
        let mut image = Image::from_records(&records);
        image.offset = log.last_offset();
        let next_shard = image
            .topics_by_name
            .values()
            .map(|t| t.partitions.len() as u64)
            .sum();
        tracing::info!(
            dir = %dir.display(), topics = image.topics_by_name.len(), offset = ?image.offset,
            "metadata loaded"
        );
        Ok(Controller {
            log: Sink::Log(log),
            image: Arc::new(image),
            config,
            next_shard,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
        })
    }

    /// A controller whose records go to a Raft quorum: starts from `image` (the committed
    /// one), stages what each operation writes.
    pub fn staged(config: BrokerConfig, image: Arc<Image>) -> Controller {
        let mut controller = Controller {
            log: Sink::Staged(Vec::new()),
            image: Arc::new(Image::default()),
            config,
            next_shard: 0,
            snapshot_every: 0,
        };
        controller.adopt(image);
        controller
    }

    /// Whether records are staged for a quorum rather than written to a local log.
    pub fn is_staged(&self) -> bool {
        matches!(self.log, Sink::Staged(_))
    }

    /// The records staged since the last call (staged mode; empty otherwise).
    pub fn take_staged(&mut self) -> Vec<MetadataRecord> {
        match &mut self.log {
            Sink::Staged(records) => std::mem::take(records),
            Sink::Log(_) => Vec::new(),
        }
    }

    /// Staged mode: `committed` becomes the image; whatever was staged and not taken is
    /// dropped (a proposal that failed, or the quorum's newer state).
    pub fn adopt(&mut self, committed: Arc<Image>) {
        if let Sink::Staged(records) = &mut self.log {
            records.clear();
        }
        self.next_shard = committed
            .topics_by_name
            .values()
            .map(|t| t.partitions.len() as u64)
            .sum();
        self.image = committed;
    }

    /// Changes the automatic snapshot interval (records); 0 disables automatic snapshots.
    pub fn set_snapshot_interval(&mut self, records: u64) {
        self.snapshot_every = records;
    }

    /// The current image (cheap: an `Arc` clone).
    pub fn image(&self) -> Arc<Image> {
        self.image.clone()
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Durably appends `records`, then applies them and returns the new image. Callers
    /// validate first: records are applied as-is. Snapshots automatically every
    /// `snapshot_every` records (a failed snapshot is logged, not fatal: the log is intact).
    pub fn commit(&mut self, records: &[MetadataRecord]) -> Result<Arc<Image>, LogError> {
        let log = match &mut self.log {
            Sink::Log(log) => log,
            Sink::Staged(staged) => {
                staged.extend_from_slice(records);
                let mut next = Image::clone(&self.image);
                next.apply_all(records);
                self.image = Arc::new(next);
                return Ok(self.image.clone());
            }
        };
        let last = log.append(records)?;
        let mut next = Image::clone(&self.image);
        next.apply_all(records);
        next.offset = Some(last);
        self.image = Arc::new(next);
        if self.snapshot_every > 0 && log.records_since_snapshot() >= self.snapshot_every {
            if let Err(e) = log.snapshot(&self.image) {
                tracing::warn!(error = %e, "metadata snapshot failed; will retry");
            }
        }
        Ok(self.image.clone())
    }

    /// Writes a snapshot now (e.g. at clean shutdown); the quorum snapshots its own log.
    pub fn snapshot(&mut self) -> Result<(), LogError> {
        match &mut self.log {
            Sink::Log(log) => log.snapshot(&self.image),
            Sink::Staged(_) => Ok(()),
        }
    }

    /// Hands out the next block of `PRODUCER_ID_BLOCK_SIZE` producer ids (Kafka's
    /// ProducerIdControlManager): the ProducerIdsRecord is fdatasynced before the block is
    /// returned, so after any crash the next block starts past it. Returns the block's first
    /// id.
    pub fn allocate_producer_ids(&mut self) -> Result<i64, LogError> {
        let first = self.image.next_producer_id;
        let next = first
            .checked_add(PRODUCER_ID_BLOCK_SIZE)
            .ok_or(LogError::ProducerIdsExhausted)?;
        self.commit(&[MetadataRecord::ProducerIds {
            broker_id: self.config.node_id,
            broker_epoch: -1,
            next_producer_id: next,
        }])?;
        Ok(first)
    }

    /// CreateTopics for one topic. `num_partitions` / `replication_factor` of -1 use the
    /// broker defaults. Partitions are spread over `shards` round-robin. With `validate_only`
    /// nothing is written and the returned id is not reserved.
    pub fn create_topic(
        &mut self,
        name: &str,
        num_partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        shards: u16,
        validate_only: bool,
    ) -> Result<TopicId, CreateTopicError> {
        let layout = TopicLayout::Counts {
            num_partitions,
            replication_factor,
        };
        self.create_topic_laid_out(name, layout, configs, shards, validate_only)
    }

    /// CreateTopics for one topic laid out by counts or by a manual assignment (see
    /// [`TopicLayout`]).
    pub fn create_topic_laid_out(
        &mut self,
        name: &str,
        layout: TopicLayout<'_>,
        configs: BTreeMap<String, String>,
        shards: u16,
        validate_only: bool,
    ) -> Result<TopicId, CreateTopicError> {
        validate_topic_name(name)?;
        if self.image.topic(name).is_some() {
            return Err(CreateTopicError::TopicAlreadyExists(name.to_string()));
        }
        let key = collision_key(name);
        if let Some(other) = self
            .image
            .topics_by_name
            .keys()
            .find(|t| collision_key(t) == key)
        {
            return Err(CreateTopicError::InvalidTopic(format!(
                "Topic '{name}' collides with existing topic: {other}"
            )));
        }
        // (replicas, ISR) per partition.
        let assignments: Vec<ReplicasAndIsr> = match layout {
            TopicLayout::Counts {
                num_partitions,
                replication_factor,
            } => self.placed(num_partitions, replication_factor)?,
            TopicLayout::Manual {
                num_partitions,
                replication_factor,
                assignments,
            } => self.manually_placed(num_partitions, replication_factor, assignments)?,
        };
        let partitions = assignments.len() as i32;
        config::validate_topic_overrides(&configs)?;

        let topic_id = loop {
            let id = random_topic_id();
            if self.image.topic_by_id(&id).is_none() {
                break id;
            }
        };
        if validate_only {
            return Ok(topic_id);
        }

        let shards = u64::from(shards.max(1));
        let mut records = Vec::with_capacity(1 + configs.len() + partitions as usize);
        records.push(MetadataRecord::Topic {
            name: name.to_string(),
            topic_id,
        });
        for (k, v) in configs {
            records.push(MetadataRecord::Config {
                resource_type: RESOURCE_TOPIC,
                resource_name: name.to_string(),
                name: k,
                value: Some(v),
            });
        }
        for (p, laid_out) in (0..partitions).zip(assignments) {
            let shard = ((self.next_shard + p as u64) % shards) as u16;
            records.push(new_partition(topic_id, p, laid_out, shard));
        }
        self.commit(&records)?;
        self.next_shard += partitions as u64;
        Ok(topic_id)
    }

    /// The brokers new replicas may go to: the registered ones not shutting down (Kafka's
    /// `usableBrokers`). A node with no quorum registers nowhere and is the only broker of
    /// its cluster.
    fn usable_brokers(&self) -> Vec<placement::UsableBroker> {
        if self.image.brokers.is_empty() {
            return vec![placement::UsableBroker {
                id: self.config.node_id,
                rack: None,
                fenced: false,
            }];
        }
        self.image
            .brokers
            .values()
            .filter(|b| !b.in_controlled_shutdown)
            .map(|b| placement::UsableBroker {
                id: b.broker_id,
                rack: b.rack.clone(),
                fenced: b.fenced,
            })
            .collect()
    }

    /// CreatePartitions for one topic (Kafka's `ReplicationControlManager
    /// .createPartitionsOfTopic`): `count` must exceed the current count (INVALID_PARTITIONS
    /// with Kafka's messages), stay within `MAX_PARTITIONS_PER_TOPIC`, and a manual
    /// assignment must name one replica list per new partition, each this node only (the
    /// replication factor of the existing partitions, 1). The new partitions go to shards
    /// round-robin as at creation, as PartitionRecords of the existing topic.
    pub fn create_partitions(
        &mut self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        shards: u16,
        validate_only: bool,
    ) -> Result<(), CreatePartitionsError> {
        let topic = self
            .image
            .topic(name)
            .ok_or(CreatePartitionsError::UnknownTopic)?;
        let topic_id = topic.topic_id;
        let current = topic.partitions.len() as i32;
        if count < current {
            return Err(CreatePartitionsError::InvalidPartitions(format!(
                "Topic {name} currently has {current} partition(s); {count} would not be an \
                 increase."
            )));
        }
        if count == current {
            return Err(CreatePartitionsError::InvalidPartitions(format!(
                "Topic already has {current} partition(s)."
            )));
        }
        if count > MAX_PARTITIONS_PER_TOPIC {
            return Err(CreatePartitionsError::InvalidPartitions(format!(
                "Number of partitions must be at most {MAX_PARTITIONS_PER_TOPIC}."
            )));
        }
        let additional = count - current;
        // New partitions get the replication factor of the existing ones.
        let rf = topic
            .partitions
            .first()
            .map_or(1, |p| p.replicas.len().max(1));
        let replicas: Vec<ReplicasAndIsr> = match assignments {
            Some(assignments) => {
                if assignments.len() as i32 != additional {
                    return Err(CreatePartitionsError::InvalidReplicaAssignment(format!(
                        "Attempted to add {additional} additional partition(s), but only {} \
                         assignment(s) were specified.",
                        assignments.len()
                    )));
                }
                assignments
                    .iter()
                    .zip(current..)
                    .map(|(replicas, p)| {
                        self.check_manual_replicas(p, replicas, Some(rf))
                            .map(|isr| (replicas.clone(), isr))
                            .map_err(CreatePartitionsError::InvalidReplicaAssignment)
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            None => placement::place(
                &self.usable_brokers(),
                additional as usize,
                rf as i32,
                u64::from_be_bytes(random_topic_id()[..8].try_into().expect("8 of 16 bytes")),
            )
            .map_err(|e| {
                CreatePartitionsError::InvalidReplicaAssignment(format!(
                    "Unable to replicate the partition {rf} time(s): {e}"
                ))
            })
            .and_then(|placed| {
                self.with_active_isr(placed, rf as i32)
                    .map_err(CreatePartitionsError::InvalidReplicaAssignment)
            })?,
        };
        if validate_only {
            return Ok(());
        }
        let shards = u64::from(shards.max(1));
        let records: Vec<MetadataRecord> = (current..count)
            .zip(replicas)
            .map(|(p, laid_out)| {
                let shard = ((self.next_shard + (p - current) as u64) % shards) as u16;
                new_partition(topic_id, p, laid_out, shard)
            })
            .collect();
        self.commit(&records)?;
        self.next_shard += additional as u64;
        Ok(())
    }

    /// Removes a topic regardless of `delete.topic.enable`: undoes a creation whose
    /// partitions could not be opened.
    pub fn remove_topic(&mut self, id: &TopicId) -> Result<(), LogError> {
        if self.image.topic_by_id(id).is_some() {
            self.commit(&[MetadataRecord::RemoveTopic { topic_id: *id }])?;
        }
        Ok(())
    }

    /// DeleteTopics by name.
    pub fn delete_topic(&mut self, name: &str) -> Result<TopicId, DeleteTopicError> {
        let id = self
            .image
            .topic(name)
            .ok_or(DeleteTopicError::UnknownTopic)?
            .topic_id;
        self.delete_topic_id(&id)?;
        Ok(id)
    }

    /// DeleteTopics by topic id (v6+). Returns the deleted topic's name.
    pub fn delete_topic_id(&mut self, id: &TopicId) -> Result<String, DeleteTopicError> {
        let name = self
            .image
            .topic_by_id(id)
            .ok_or(DeleteTopicError::UnknownTopic)?
            .name
            .clone();
        if !self.config.delete_topic_enable {
            return Err(DeleteTopicError::DeletionDisabled);
        }
        self.commit(&[MetadataRecord::RemoveTopic { topic_id: *id }])?;
        Ok(name)
    }

    /// AlterConfigs / IncrementalAlterConfigs on one topic: computes the new override set,
    /// checks it as a whole (every value parsed as the partitions will parse it), and writes
    /// one ConfigRecord per key that changes (`value: None` removes a key), so the change
    /// survives a restart. Returns whether anything changed; `validate_only` writes nothing.
    pub fn alter_topic_configs(
        &mut self,
        name: &str,
        change: &ConfigChange,
        validate_only: bool,
    ) -> Result<bool, AlterConfigsError> {
        let topic = self
            .image
            .topic(name)
            .ok_or_else(|| AlterConfigsError::UnknownTopic(name.to_string()))?;
        let current = topic.configs.clone();
        let next = match change {
            ConfigChange::Replace(configs) => config::alter_topic_overrides(configs)?,
            ConfigChange::Incremental(ops) => {
                config::incremental_alter_topic_overrides(&current, ops)?
            }
        };
        config::resolve(&self.layered_config()?, &next)?;
        self.write_config_changes(RESOURCE_TOPIC, name, &current, &next, validate_only)
    }

    /// The broker config with the dynamic broker configs of the image on top: what topics
    /// inherit.
    pub fn layered_config(&self) -> Result<BrokerConfig, ConfigError> {
        self.config.with_dynamic(
            self.image.broker_configs.get(""),
            self.image
                .broker_configs
                .get(&self.config.node_id.to_string()),
        )
    }

    /// AlterConfigs / IncrementalAlterConfigs on a broker resource (`resource` is "" for the
    /// cluster-wide default or this node's id; the caller checked it): only dynamic keys, each
    /// value checked against its row and the whole layered config rebuilt before anything is
    /// written.
    pub fn alter_broker_configs(
        &mut self,
        resource: &str,
        change: &ConfigChange,
        validate_only: bool,
    ) -> Result<bool, AlterConfigsError> {
        let current = self
            .image
            .broker_configs
            .get(resource)
            .cloned()
            .unwrap_or_default();
        let next = match change {
            ConfigChange::Replace(configs) => config::alter_broker_overrides(configs)?,
            ConfigChange::Incremental(ops) => {
                config::incremental_alter_broker_overrides(&current, ops)?
            }
        };
        config::validate_broker_overrides(&next)?;
        let mut cluster = self.image.broker_configs.get("").cloned();
        let mut node = self
            .image
            .broker_configs
            .get(&self.config.node_id.to_string())
            .cloned();
        if resource.is_empty() {
            cluster = Some(next.clone());
        } else {
            node = Some(next.clone());
        }
        self.config.with_dynamic(cluster.as_ref(), node.as_ref())?;
        self.write_config_changes(RESOURCE_BROKER, resource, &current, &next, validate_only)
    }

    /// One ConfigRecord per key that differs between `current` and `next` (`value: None`
    /// removes a key). Returns whether anything was written.
    fn write_config_changes(
        &mut self,
        resource_type: i8,
        name: &str,
        current: &BTreeMap<String, String>,
        next: &BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<bool, AlterConfigsError> {
        let record = |key: &str, value: Option<&String>| MetadataRecord::Config {
            resource_type,
            resource_name: name.to_string(),
            name: key.to_string(),
            value: value.cloned(),
        };
        let records: Vec<MetadataRecord> = current
            .keys()
            .filter(|key| !next.contains_key(*key))
            .map(|key| record(key, None))
            .chain(
                next.iter()
                    .filter(|(key, value)| current.get(*key) != Some(value))
                    .map(|(key, value)| record(key, Some(value))),
            )
            .collect();
        if validate_only || records.is_empty() {
            return Ok(false);
        }
        self.commit(&records)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(overrides: &[&str]) -> BrokerConfig {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        config::load(None, &o).unwrap()
    }

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// An image with brokers 1..=n registered and unfenced.
    fn cluster_image(n: i32) -> Arc<Image> {
        let records: Vec<MetadataRecord> = (1..=n)
            .map(|id| {
                MetadataRecord::RegisterBroker(records::BrokerRegistration {
                    broker_id: id,
                    incarnation_id: [id as u8; 16],
                    broker_epoch: i64::from(id),
                    endpoints: Vec::new(),
                    rack: None,
                    fenced: false,
                    in_controlled_shutdown: false,
                })
            })
            .collect();
        let mut image = Image::from_records(&records);
        image.offset = Some(n as u64);
        Arc::new(image)
    }

    #[test]
    fn a_manual_assignment_is_checked_as_kafka_checks_it() {
        let mut image = (*cluster_image(3)).clone();
        image.apply(&MetadataRecord::BrokerRegistrationChange {
            broker_id: 3,
            broker_epoch: 3,
            fenced: Some(true),
            in_controlled_shutdown: None,
        });
        let mut c = Controller::staged(cfg(&[]), Arc::new(image));
        let mut create = |counts: (i32, i16), assignments: &[(i32, Vec<i32>)]| {
            let layout = TopicLayout::Manual {
                num_partitions: counts.0,
                replication_factor: counts.1,
                assignments,
            };
            c.create_topic_laid_out("m", layout, none(), CLUSTER_SHARD_SLOTS, false)
                .map(|_| ())
                .map_err(|e| (e.error_code(), e.to_string()))
        };
        let refused = |r: Result<(), (i16, String)>| r.unwrap_err();
        assert_eq!(refused(create((2, -1), &[(0, vec![1])])).0, 42);
        assert_eq!(refused(create((-1, 1), &[(0, vec![1])])).0, 42);
        type Assignment<'a> = &'a [(i32, Vec<i32>)];
        let cases: [(Assignment, &str); 6] = [
            (&[(0, vec![])], "an empty replica list"),
            (&[(0, vec![1, 9])], "includes broker 9, but no such broker"),
            (&[(0, vec![1, 1])], "the broker 1 more than once"),
            (
                &[(0, vec![1, 2]), (1, vec![1])],
                "not consistent with previous partitions",
            ),
            (
                &[(0, vec![1]), (0, vec![2])],
                "multiple manual partition assignments",
            ),
            (&[(0, vec![1]), (2, vec![2])], "consecutive 0-based"),
        ];
        for (assignments, message) in cases {
            let (code, text) = refused(create((-1, -1), assignments));
            assert_eq!(code, 39, "{assignments:?}");
            assert!(text.contains(message), "{assignments:?}: {text}");
        }
        let (code, text) = refused(create((-1, -1), &[(0, vec![3])]));
        assert!(code == 39 && text.contains("fenced"), "{text}");
        // Partitions may come in any order; fenced 3 is a replica outside the ISR, and the
        // first active replica leads.
        create((-1, -1), &[(1, vec![2, 1]), (0, vec![3, 1])]).unwrap();
        let staged = c.take_staged();
        let parts: Vec<_> = staged
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition {
                    partition_id,
                    replicas,
                    isr,
                    leader,
                    ..
                } => Some((*partition_id, replicas.clone(), isr.clone(), *leader)),
                _ => None,
            })
            .collect();
        assert_eq!(
            parts,
            vec![(0, vec![3, 1], vec![1], 1), (1, vec![2, 1], vec![2, 1], 2)]
        );
    }

    #[test]
    fn staged_changes_wait_for_the_quorum_and_revert_on_adopt() {
        let committed = cluster_image(3);
        let mut c = Controller::staged(cfg(&[]), committed.clone());
        assert!(c.is_staged());
        c.create_topic("t", 6, 3, none(), CLUSTER_SHARD_SLOTS, false)
            .unwrap();
        // The speculative image has it, so a second create in the same change is refused.
        assert!(matches!(
            c.create_topic("t", 1, 1, none(), CLUSTER_SHARD_SLOTS, false),
            Err(CreateTopicError::TopicAlreadyExists(_))
        ));
        let staged = c.take_staged();
        assert_eq!(staged.len(), 1 + 6, "the topic and its partitions");
        let mut leaders = std::collections::BTreeSet::new();
        for record in &staged[1..] {
            let MetadataRecord::Partition {
                replicas, leader, ..
            } = record
            else {
                panic!("not a partition: {record:?}");
            };
            let mut sorted = replicas.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![1, 2, 3]);
            leaders.insert(*leader);
        }
        assert_eq!(leaders.len(), 3, "leaders spread over the brokers");
        assert!(c.take_staged().is_empty(), "taken once");
        // Nothing reached a log: the committed image is what the quorum says.
        c.adopt(committed.clone());
        assert!(c.image().topic("t").is_none());
        // rf 4 over 3 brokers, and growing a topic over the brokers.
        assert!(matches!(
            c.create_topic("u", 1, 4, none(), CLUSTER_SHARD_SLOTS, false),
            Err(CreateTopicError::InvalidReplicationFactor(_))
        ));
        c.create_topic("u", 1, 2, none(), CLUSTER_SHARD_SLOTS, false)
            .unwrap();
        c.create_partitions("u", 3, None, CLUSTER_SHARD_SLOTS, false)
            .unwrap();
        let image = c.image();
        let partitions = &image.topic("u").unwrap().partitions;
        assert_eq!(partitions.len(), 3);
        assert!(partitions.iter().all(|p| p.replicas.len() == 2));
        assert!(matches!(
            c.create_partitions("u", 4, Some(&[vec![1, 9]]), CLUSTER_SHARD_SLOTS, false),
            Err(CreatePartitionsError::InvalidReplicaAssignment(_))
        ));
        // A producer id block is staged like any change.
        let first = c.allocate_producer_ids().unwrap();
        assert_eq!(first, 0);
        assert!(c
            .take_staged()
            .iter()
            .any(|r| matches!(r, MetadataRecord::ProducerIds { .. })));
    }

    #[test]
    fn topic_name_rules() {
        for ok in ["a", "A-b_c.9", &"x".repeat(249)] {
            validate_topic_name(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            "a/b",
            "é",
            &"x".repeat(250),
            METADATA_TOPIC,
        ] {
            assert!(
                matches!(
                    validate_topic_name(bad),
                    Err(CreateTopicError::InvalidTopic(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn create_validation() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(&Disk::Real, dir.path(), cfg(&["num.partitions=3"])).unwrap();
        let e = |r: Result<TopicId, CreateTopicError>| r.unwrap_err().error_code();
        assert_eq!(e(c.create_topic("bad name", 1, 1, none(), 4, false)), 17);
        assert_eq!(e(c.create_topic("t", 0, 1, none(), 4, false)), 37);
        assert_eq!(e(c.create_topic("t", -2, 1, none(), 4, false)), 37);
        assert_eq!(
            e(c.create_topic("t", MAX_PARTITIONS_PER_TOPIC + 1, 1, none(), 4, true)),
            37
        );
        assert_eq!(e(c.create_topic("t", 1, 3, none(), 4, false)), 38);
        assert_eq!(e(c.create_topic("t", 1, 0, none(), 4, false)), 38);
        let bad: BTreeMap<_, _> = [("nope".to_string(), "1".to_string())].into();
        assert_eq!(e(c.create_topic("t", 1, 1, bad, 4, false)), 40);
        let bad: BTreeMap<_, _> = [("segment.bytes".to_string(), "1".to_string())].into();
        assert_eq!(e(c.create_topic("t", 1, 1, bad, 4, false)), 40);
        // validate_only writes nothing.
        c.create_topic("t", -1, -1, none(), 4, true).unwrap();
        assert!(c.image().topic("t").is_none());
        assert_eq!(c.image().offset, None);

        let id = c.create_topic("t", -1, -1, none(), 4, false).unwrap();
        let img = c.image();
        let t = img.topic("t").unwrap();
        assert_eq!(t.topic_id, id);
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(t.partitions[0].replicas, vec![1]);
        assert_eq!(t.partitions[0].leader, 1);
        assert_eq!(id[6] >> 4, 4);
        assert_eq!(e(c.create_topic("t", 1, 1, none(), 4, false)), 36);
        c.create_topic("t.x", 1, 1, none(), 4, false).unwrap();
        assert_eq!(e(c.create_topic("t_x", 1, 1, none(), 4, false)), 17);
    }

    /// CreatePartitions: Kafka's errors, validate_only, new partitions round-robin after the
    /// last shard used, and the grown topic replayed from the log after a restart.
    #[test]
    fn create_partitions_grows_topics() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        c.create_topic("a", 2, 1, none(), 4, false).unwrap();
        let e = |r: Result<(), CreatePartitionsError>| r.unwrap_err().error_code();
        assert_eq!(e(c.create_partitions("nope", 3, None, 4, false)), 3);
        assert_eq!(e(c.create_partitions("a", 1, None, 4, false)), 37);
        assert_eq!(e(c.create_partitions("a", 2, None, 4, false)), 37);
        assert_eq!(
            e(c.create_partitions("a", MAX_PARTITIONS_PER_TOPIC + 1, None, 4, false)),
            37
        );
        let node = c.config().node_id;
        assert_eq!(
            e(c.create_partitions("a", 4, Some(&[vec![node]]), 4, false)),
            39
        );
        let bad = [vec![node], vec![node + 1]];
        assert_eq!(e(c.create_partitions("a", 4, Some(&bad), 4, false)), 39);
        let two = [vec![node, node], vec![node]];
        assert_eq!(e(c.create_partitions("a", 4, Some(&two), 4, false)), 39);
        c.create_partitions("a", 5, None, 4, true).unwrap();
        assert_eq!(c.image().topic("a").unwrap().partitions.len(), 2);
        c.create_partitions(
            "a",
            5,
            Some(&[vec![node], vec![node], vec![node]]),
            4,
            false,
        )
        .unwrap();
        let img = c.image();
        let owners: Vec<_> = (0..5).map(|p| img.owner("a", p).unwrap()).collect();
        assert_eq!(owners, vec![0, 1, 2, 3, 0]);
        drop(c);
        let c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        assert_eq!(c.image().topic("a").unwrap().partitions.len(), 5);
    }

    #[test]
    fn shards_round_robin_and_configs() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        let conf: BTreeMap<_, _> = [("retention.ms".to_string(), "1000".to_string())].into();
        c.create_topic("a", 3, 1, conf, 4, false).unwrap();
        c.create_topic("b", 3, 1, none(), 4, false).unwrap();
        let img = c.image();
        let owners = |t: &str| (0..3).map(|p| img.owner(t, p).unwrap()).collect::<Vec<_>>();
        assert_eq!(owners("a"), vec![0, 1, 2]);
        assert_eq!(owners("b"), vec![3, 0, 1]);
        assert_eq!(img.topic("a").unwrap().configs["retention.ms"], "1000");
        let tc = config::resolve(c.config(), &img.topic("a").unwrap().configs).unwrap();
        assert_eq!(tc.retention_ms, 1000);
        // shards = 0 is treated as 1.
        c.create_topic("z", 2, 1, none(), 0, false).unwrap();
        assert_eq!(c.image().owner("z", 1), Some(0));
    }

    #[test]
    fn delete_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        c.set_snapshot_interval(5);
        let old = c.image();
        for i in 0..10 {
            c.create_topic(&format!("t{i}"), 2, 1, none(), 2, false)
                .unwrap();
        }
        let id3 = c.delete_topic("t3").unwrap();
        assert_eq!(c.delete_topic("t3").unwrap_err().error_code(), 3);
        assert_eq!(c.delete_topic_id(&id3).unwrap_err().error_code(), 3);
        assert_eq!(
            c.delete_topic_id(&c.image().topic("t4").unwrap().topic_id)
                .unwrap(),
            "t4"
        );
        // The earlier image handed out is unchanged (shards may still be reading it).
        assert!(old.topics_by_name.is_empty());
        let before = c.image();
        assert!(before.topic("t3").is_none());
        drop(c);

        let c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        assert_eq!(*c.image(), *before);
        // Snapshots were taken automatically: only one snapshot and a recent log remain.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            names.iter().filter(|n| n.starts_with("snapshot-")).count(),
            1,
            "{names:?}"
        );
        assert_eq!(
            names.iter().filter(|n| n.starts_with("log-")).count(),
            1,
            "{names:?}"
        );

        let mut c =
            Controller::open(&Disk::Real, dir.path(), cfg(&["delete.topic.enable=false"])).unwrap();
        assert_eq!(c.delete_topic("t0").unwrap_err().error_code(), 73);
        // Re-creating a deleted name gets a fresh id; the rotation continues.
        let new3 = c.create_topic("t3", 1, 1, none(), 2, false).unwrap();
        assert_ne!(new3, id3);
    }

    #[test]
    fn random_ids_differ() {
        let a = random_topic_id();
        let b = random_topic_id();
        assert_ne!(a, b);
        assert_eq!(a[8] & 0xc0, 0x80);
    }

    #[test]
    fn alter_topic_configs_persist_and_replace() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        let conf: BTreeMap<_, _> = [
            ("retention.ms".to_string(), "1000".to_string()),
            ("segment.bytes".to_string(), "2000".to_string()),
        ]
        .into();
        c.create_topic("t", 1, 1, conf, 1, false).unwrap();
        let set = |k: &str, v: &str| (k.to_string(), Some(v.to_string()));
        let err = |r: Result<bool, AlterConfigsError>| r.unwrap_err().error_code();
        assert_eq!(
            err(c.alter_topic_configs("nope", &ConfigChange::Replace(vec![]), false)),
            3
        );
        let bad = ConfigChange::Replace(vec![set("retention.ms", "abc")]);
        assert_eq!(err(c.alter_topic_configs("t", &bad, false)), 40);
        // validate_only: checked, not written.
        let replace = ConfigChange::Replace(vec![set("max.message.bytes", "100")]);
        assert!(!c.alter_topic_configs("t", &replace, true).unwrap());
        assert_eq!(c.image().topic("t").unwrap().configs.len(), 2);
        // Replace: keys not named go.
        assert!(c.alter_topic_configs("t", &replace, false).unwrap());
        let expected: BTreeMap<_, _> =
            [("max.message.bytes".to_string(), "100".to_string())].into();
        assert_eq!(c.image().topic("t").unwrap().configs, expected);
        // Incremental: only the named keys.
        let incremental = ConfigChange::Incremental(vec![(
            "cleanup.policy".to_string(),
            config::AlterOp::Append,
            Some("compact".to_string()),
        )]);
        assert!(c.alter_topic_configs("t", &incremental, false).unwrap());
        // The same change again writes nothing.
        assert!(!c.alter_topic_configs("t", &incremental, false).unwrap());
        drop(c);
        let c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        let configs = c.image().topic("t").unwrap().configs.clone();
        assert_eq!(
            configs.get("max.message.bytes").map(String::as_str),
            Some("100")
        );
        assert_eq!(
            configs.get("cleanup.policy").map(String::as_str),
            Some("delete,compact")
        );
        assert_eq!(configs.len(), 2);
    }

    #[test]
    fn dynamic_broker_configs_persist_and_reach_topics() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        let set = |k: &str, v: &str| (k.to_string(), Some(v.to_string()));
        let change = ConfigChange::Replace(vec![set("log.retention.ms", "9000")]);
        assert!(c.alter_broker_configs("", &change, false).unwrap());
        let bad = ConfigChange::Replace(vec![set("num.partitions", "3")]);
        assert_eq!(
            c.alter_broker_configs("", &bad, false)
                .unwrap_err()
                .error_code(),
            42
        );
        let bad = ConfigChange::Replace(vec![set("log.segment.bytes", "1")]);
        assert_eq!(
            c.alter_broker_configs("1", &bad, false)
                .unwrap_err()
                .error_code(),
            40
        );
        assert_eq!(c.layered_config().unwrap().log_retention_ms, 9000);
        drop(c);
        let c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        assert_eq!(c.layered_config().unwrap().log_retention_ms, 9000);
        let tc = config::resolve(&c.layered_config().unwrap(), &none()).unwrap();
        assert_eq!(tc.retention_ms, 9000);
    }

    #[test]
    fn create_topic_places_replicas_over_the_registered_brokers() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(&Disk::Real, dir.path(), cfg(&[])).unwrap();
        let register = |id: i32, fenced: bool| {
            MetadataRecord::RegisterBroker(records::BrokerRegistration {
                broker_id: id,
                incarnation_id: [id as u8; 16],
                broker_epoch: 100 + i64::from(id),
                endpoints: vec![],
                rack: None,
                fenced,
                in_controlled_shutdown: false,
            })
        };
        c.commit(&[register(1, false), register(2, false), register(3, false)])
            .unwrap();
        let id = c.create_topic("spread", 6, 3, none(), 2, false).unwrap();
        let image = c.image();
        let topic = image.topic_by_id(&id).unwrap();
        let mut leaders = std::collections::BTreeMap::new();
        for p in &topic.partitions {
            let mut replicas = p.replicas.clone();
            replicas.sort_unstable();
            assert_eq!(replicas, [1, 2, 3]);
            assert_eq!(p.isr, p.replicas);
            assert_eq!(p.leader, p.replicas[0]);
            *leaders.entry(p.leader).or_insert(0) += 1;
        }
        assert_eq!(leaders.into_values().collect::<Vec<_>>(), [2, 2, 2]);
        let e = c.create_topic("four", 1, 4, none(), 2, false).unwrap_err();
        assert_eq!(e.error_code(), 38);
        assert!(
            e.to_string().contains(
                "Unable to replicate the partition 4 time(s): The target replication factor of 4 \
                 cannot be reached because only 3 broker(s) are registered."
            ),
            "{e}"
        );
        // Fenced brokers hold followers, never leaders; with all fenced nothing is placed.
        c.commit(&[register(1, true), register(2, true), register(3, true)])
            .unwrap();
        let e = c
            .create_topic("fenced", 1, 1, none(), 2, false)
            .unwrap_err();
        assert!(
            e.to_string().contains("All brokers are currently fenced."),
            "{e}"
        );
    }
}
