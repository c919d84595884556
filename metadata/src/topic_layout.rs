//! Where a new topic's or new partitions' replicas go and which of them start in the ISR:
//! the placer's choice or a manual assignment checked as Kafka's `ReplicationControlManager`
//! checks it (counts must be -1: INVALID_REQUEST; empty, unregistered, repeated or unequal
//! replica lists, partitions missing or twice: INVALID_REPLICA_ASSIGNMENT). A new partition's
//! ISR is its active replicas (registered, unfenced, not shutting down) and the first leads.

use std::collections::BTreeMap;

use super::records::{MetadataRecord, TopicId};
use super::{placement, random_topic_id, Controller, CreateTopicError, MAX_PARTITIONS_PER_TOPIC};

/// A new partition's replicas (preferred leader first) and its first ISR.
pub(crate) type ReplicasAndIsr = (Vec<i32>, Vec<i32>);

/// How a new topic's partitions are laid out over brokers.
#[derive(Clone, Copy, Debug)]
pub enum TopicLayout<'a> {
    /// By the placer: counts, -1 for the broker defaults.
    Counts {
        num_partitions: i32,
        replication_factor: i16,
    },
    /// CreateTopics' `assignments`: (partition, replicas, preferred leader first); the counts
    /// as the request sent them (Kafka requires -1 beside an assignment).
    Manual {
        num_partitions: i32,
        replication_factor: i16,
        assignments: &'a [(i32, Vec<i32>)],
    },
}

/// The PartitionRecord of new partition `p` (epochs 0, the first of its ISR leading).
pub(crate) fn new_partition(
    topic_id: TopicId,
    p: i32,
    (replicas, isr): ReplicasAndIsr,
    shard: u16,
) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition_id: p,
        leader: isr[0],
        isr,
        replicas,
        leader_epoch: 0,
        partition_epoch: 0,
        shard,
    }
}

impl Controller {
    /// Replicas placed by the placer for `num_partitions` partitions of `replication_factor`
    /// (-1: the broker defaults); the active ones start in the ISR.
    pub(crate) fn placed(
        &self,
        num_partitions: i32,
        replication_factor: i16,
    ) -> Result<Vec<ReplicasAndIsr>, CreateTopicError> {
        let partitions = match num_partitions {
            -1 => self.config.num_partitions,
            n => n,
        };
        if partitions <= 0 {
            return Err(CreateTopicError::InvalidPartitions(
                "Number of partitions must be larger than 0.".into(),
            ));
        }
        if partitions > MAX_PARTITIONS_PER_TOPIC {
            return Err(CreateTopicError::InvalidPartitions(format!(
                "Number of partitions must be at most {MAX_PARTITIONS_PER_TOPIC}."
            )));
        }
        let rf = match replication_factor {
            -1 => self.config.default_replication_factor,
            r => r,
        };
        if rf <= 0 {
            return Err(CreateTopicError::InvalidReplicationFactor(
                "Replication factor must be larger than 0.".into(),
            ));
        }
        // Kafka's ReplicationControlManager wraps the placer's reason in this sentence.
        let placed = placement::place(
            &self.usable_brokers(),
            partitions as usize,
            i32::from(rf),
            u64::from_be_bytes(random_topic_id()[..8].try_into().expect("8 of 16 bytes")),
        )
        .map_err(|e| {
            CreateTopicError::InvalidReplicationFactor(format!(
                "Unable to replicate the partition {rf} time(s): {e}"
            ))
        })?;
        self.with_active_isr(placed, i32::from(rf))
            .map_err(CreateTopicError::InvalidReplicationFactor)
    }

    /// A manual assignment checked as Kafka's `ReplicationControlManager.createTopic` does,
    /// with its messages: counts must be -1 (INVALID_REQUEST); each partition once, its
    /// replicas registered, distinct, as many as the others', and at least one of them active
    /// (the ISR: registered, unfenced, not shutting down; it leads); partitions numbered from
    /// 0 without gaps (INVALID_REPLICA_ASSIGNMENT).
    pub(crate) fn manually_placed(
        &self,
        num_partitions: i32,
        replication_factor: i16,
        assignments: &[(i32, Vec<i32>)],
    ) -> Result<Vec<ReplicasAndIsr>, CreateTopicError> {
        use CreateTopicError::{InvalidReplicaAssignment as Invalid, InvalidRequest};
        if replication_factor != -1 {
            return Err(InvalidRequest(
                "A manual partition assignment was specified, but replication factor was not \
                 set to -1."
                    .into(),
            ));
        }
        if num_partitions != -1 {
            return Err(InvalidRequest(
                "A manual partition assignment was specified, but numPartitions was not set to \
                 -1."
                .into(),
            ));
        }
        if assignments.len() > MAX_PARTITIONS_PER_TOPIC as usize {
            return Err(CreateTopicError::InvalidPartitions(format!(
                "Number of partitions must be at most {MAX_PARTITIONS_PER_TOPIC}."
            )));
        }
        let mut by_partition: BTreeMap<i32, (Vec<i32>, Vec<i32>)> = BTreeMap::new();
        let mut rf: Option<usize> = None;
        for (partition, replicas) in assignments {
            if by_partition.contains_key(partition) {
                return Err(Invalid(format!(
                    "Found multiple manual partition assignments for partition {partition}"
                )));
            }
            let isr = self
                .check_manual_replicas(*partition, replicas, rf)
                .map_err(Invalid)?;
            rf = Some(replicas.len());
            by_partition.insert(*partition, (replicas.clone(), isr));
        }
        if by_partition
            .keys()
            .copied()
            .ne(0..by_partition.len() as i32)
        {
            return Err(Invalid(
                "partitions should be a consecutive 0-based integer sequence".into(),
            ));
        }
        Ok(by_partition.into_values().collect())
    }

    /// One partition's manual replicas (Kafka's `validateManualPartitionAssignment`, with its
    /// messages): not empty, every broker registered and named once, `rf` of them if the
    /// other partitions fix it, at least one active. Returns the ISR: the active ones.
    pub(crate) fn check_manual_replicas(
        &self,
        partition: i32,
        replicas: &[i32],
        rf: Option<usize>,
    ) -> Result<Vec<i32>, String> {
        if replicas.is_empty() {
            return Err("The manual partition assignment includes an empty replica list.".into());
        }
        for (i, id) in replicas.iter().enumerate() {
            if !self.registered(*id) {
                return Err(format!(
                    "The manual partition assignment includes broker {id}, but no such broker \
                     is registered."
                ));
            }
            if replicas[..i].contains(id) {
                return Err(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                ));
            }
        }
        if let Some(rf) = rf.filter(|&rf| rf != replicas.len()) {
            return Err(format!(
                "The manual partition assignment includes a partition with {} replica(s), but \
                 this is not consistent with previous partitions, which have {rf} replica(s).",
                replicas.len()
            ));
        }
        let isr = self.active_of(replicas);
        if isr.is_empty() {
            return Err(format!(
                "All brokers specified in the manual partition assignment for partition \
                 {partition} are fenced or in controlled shutdown."
            ));
        }
        Ok(isr)
    }

    /// The placer's replicas with their first ISR: the active ones (a fenced replica joins
    /// once caught up). Kafka's message when a partition has none.
    pub(crate) fn with_active_isr(
        &self,
        placed: Vec<Vec<i32>>,
        rf: i32,
    ) -> Result<Vec<ReplicasAndIsr>, String> {
        placed
            .into_iter()
            .map(|replicas| {
                let isr = self.active_of(&replicas);
                if isr.is_empty() {
                    return Err(format!(
                        "Unable to replicate the partition {rf} time(s): All brokers are \
                         currently fenced or in controlled shutdown."
                    ));
                }
                Ok((replicas, isr))
            })
            .collect()
    }

    /// The active ones of `replicas`, in their order.
    pub(crate) fn active_of(&self, replicas: &[i32]) -> Vec<i32> {
        replicas
            .iter()
            .copied()
            .filter(|&id| self.active(id))
            .collect()
    }

    /// Whether broker `id` is registered (a node with no quorum: whether it is this node).
    pub(crate) fn registered(&self, id: i32) -> bool {
        if self.image.brokers.is_empty() {
            id == self.config.node_id
        } else {
            self.image.brokers.contains_key(&id)
        }
    }

    /// Whether broker `id` is registered, unfenced and not shutting down (Kafka's
    /// `ClusterControlManager.isActive`).
    pub(crate) fn active(&self, id: i32) -> bool {
        if self.image.brokers.is_empty() {
            return id == self.config.node_id;
        }
        self.image
            .brokers
            .get(&id)
            .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
    }
}
