//! The metadata image: the state obtained by applying metadata records in order.
//!
//! The metadata core builds a new `Image` per committed batch (clone, apply, wrap in `Arc`) and
//! publishes it to the shards as `Arc<Image>`; shards only read it, so they need no locks.
//! Topics are `Arc<TopicImage>` so cloning an image to produce the next version copies
//! pointers, not partition lists, and untouched topics are shared between versions.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::quotas::QuotaImage;
use super::records::{
    BrokerRegistration, MetadataRecord, TopicId, NO_LEADER_CHANGE, RESOURCE_BROKER, RESOURCE_TOPIC,
};
use super::scram::ScramImage;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionImage {
    pub partition_id: i32,
    /// Shard (core) owning this partition.
    pub shard: u16,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    /// In-sync replicas (the leader among them while it leads).
    pub isr: Vec<i32>,
    /// Bumped by every change of the partition (KIP-497's AlterPartition names it).
    pub partition_epoch: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: TopicId,
    /// Sorted by `partition_id`; normally `partitions[i].partition_id == i`.
    pub partitions: Vec<PartitionImage>,
    /// Topic config overrides (only the keys set on the topic, not the resolved values).
    pub configs: BTreeMap<String, String>,
}

impl TopicImage {
    pub fn partition(&self, partition: i32) -> Option<&PartitionImage> {
        // Fast path: dense ids.
        if let Some(p) = usize::try_from(partition)
            .ok()
            .and_then(|i| self.partitions.get(i))
        {
            if p.partition_id == partition {
                return Some(p);
            }
        }
        self.partitions
            .binary_search_by_key(&partition, |p| p.partition_id)
            .ok()
            .map(|i| &self.partitions[i])
    }
}

#[derive(Clone, Debug)]
pub struct Image {
    pub topics_by_name: BTreeMap<String, Arc<TopicImage>>,
    pub topics_by_id: BTreeMap<TopicId, Arc<TopicImage>>,
    /// Broker configs (ConfigRecord resource_type 4) by resource name: "" is the cluster-wide
    /// default, "<node id>" a single broker (Kafka's convention).
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Offset of the last record applied (None for an empty log); lets shards tell versions
    /// apart.
    pub offset: Option<u64>,
    /// First producer id of the next block to hand out (ProducerIdsRecord.nextProducerId);
    /// every id below it was given to some block already.
    pub next_producer_id: i64,
    /// Registered brokers by id (KIP-631): their epoch, endpoints, rack and whether they are
    /// fenced or shutting down.
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    /// SCRAM credentials (KIP-554), shared between image versions until one changes them.
    pub scram: Arc<ScramImage>,
    /// ACLs (AccessControlEntryRecord), shared between image versions until a batch changes
    /// them; the broker authorizes requests against it.
    pub acls: Arc<acl::Authorizer>,
    /// Client quotas (ClientQuotaRecord), shared between image versions until one changes
    /// them.
    pub quotas: Arc<QuotaImage>,
}

impl Default for Image {
    fn default() -> Self {
        Image {
            topics_by_name: BTreeMap::new(),
            topics_by_id: BTreeMap::new(),
            broker_configs: BTreeMap::new(),
            offset: None,
            next_producer_id: 0,
            brokers: BTreeMap::new(),
            scram: Arc::default(),
            acls: Arc::new(acl::Authorizer::new(acl::AuthorizerConfig::default())),
            quotas: Arc::default(),
        }
    }
}

/// Equal images hold the same state; ACLs compare by id and binding (`Authorizer` has no
/// `PartialEq` of its own).
impl PartialEq for Image {
    fn eq(&self, other: &Self) -> bool {
        self.topics_by_name == other.topics_by_name
            && self.topics_by_id == other.topics_by_id
            && self.broker_configs == other.broker_configs
            && self.offset == other.offset
            && self.next_producer_id == other.next_producer_id
            && self.brokers == other.brokers
            && self.scram == other.scram
            && self.quotas == other.quotas
            && (Arc::ptr_eq(&self.acls, &other.acls)
                || (self.acls.config() == other.acls.config()
                    && self.acls.entries().eq(other.acls.entries())))
    }
}

impl Eq for Image {}

impl Image {
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics_by_name.get(name)
    }

    pub fn topic_by_id(&self, id: &TopicId) -> Option<&Arc<TopicImage>> {
        self.topics_by_id.get(id)
    }

    /// Shard owning `topic`/`partition`.
    pub fn owner(&self, topic: &str, partition: i32) -> Option<u16> {
        self.topic(topic)?.partition(partition).map(|p| p.shard)
    }

    /// Config `name` of broker resource `resource` ("" = cluster default).
    pub fn broker_config(&self, resource: &str, name: &str) -> Option<&str> {
        self.broker_configs
            .get(resource)?
            .get(name)
            .map(String::as_str)
    }

    /// Applies one record. Records referring to unknown topics are ignored (logged): a valid
    /// log never contains them, and refusing would make a damaged log unrecoverable.
    pub fn apply(&mut self, rec: &MetadataRecord) {
        self.apply_all(std::iter::once(rec));
    }

    /// Applies records in order. Cost is O(records + partitions of the topics they touch),
    /// not O(partitions) per record: a topic touched by a run of records is taken out of the
    /// maps once, changed in place, and put back once at the end of the run. Taking it out
    /// copies its partition list only when another image version still shares it (the
    /// controller's previous image): at most once per run, never per record. Replaying
    /// 100,000 PartitionRecords used to copy a growing list per record (O(P^2) on the
    /// metadata core at every start).
    pub fn apply_all<'a>(&mut self, records: impl IntoIterator<Item = &'a MetadataRecord>) {
        let mut open: Option<TopicImage> = None;
        // The ACLs a run of ACL records changes: copied once per batch (never per record), so
        // the previous image keeps its own.
        let mut acls: Option<acl::Authorizer> = None;
        for rec in records {
            match rec {
                MetadataRecord::AccessControlEntry { .. }
                | MetadataRecord::RemoveAccessControlEntry { .. } => {
                    let acls = acls.get_or_insert_with(|| crate::acls::copy(&self.acls));
                    crate::acls::apply(acls, rec);
                }
                _ => self.apply_one(rec, &mut open),
            }
        }
        if let Some(t) = open {
            self.put(t);
        }
        if let Some(acls) = acls {
            self.acls = Arc::new(acls);
        }
    }

    fn apply_one(&mut self, rec: &MetadataRecord, open: &mut Option<TopicImage>) {
        match rec {
            MetadataRecord::Topic { name, topic_id } => {
                if let Some(t) = open.take() {
                    self.put(t);
                }
                // A re-created name replaces the old topic (its RemoveTopic came first in a
                // valid log; be robust anyway).
                if let Some(old) = self.topics_by_name.remove(name) {
                    self.topics_by_id.remove(&old.topic_id);
                }
                if let Some(old) = self.topics_by_id.remove(topic_id) {
                    self.topics_by_name.remove(&old.name);
                }
                *open = Some(TopicImage {
                    name: name.clone(),
                    topic_id: *topic_id,
                    partitions: Vec::new(),
                    configs: BTreeMap::new(),
                });
            }
            MetadataRecord::Partition {
                topic_id,
                partition_id,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                shard,
            } => {
                let Some(t) = self.take_topic(
                    open,
                    |t| t.topic_id == *topic_id,
                    |img| img.topics_by_id.get(topic_id).cloned(),
                ) else {
                    tracing::warn!(?topic_id, partition_id, "PartitionRecord for unknown topic");
                    return;
                };
                let p = PartitionImage {
                    partition_id: *partition_id,
                    shard: *shard,
                    leader: *leader,
                    leader_epoch: *leader_epoch,
                    replicas: replicas.clone(),
                    isr: isr.clone(),
                    partition_epoch: *partition_epoch,
                };
                // Records come in partition order: the common case appends.
                if t.partitions
                    .last()
                    .is_none_or(|l| l.partition_id < *partition_id)
                {
                    t.partitions.push(p);
                } else {
                    match t
                        .partitions
                        .binary_search_by_key(partition_id, |p| p.partition_id)
                    {
                        Ok(i) => t.partitions[i] = p,
                        Err(i) => t.partitions.insert(i, p),
                    }
                }
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => match *resource_type {
                RESOURCE_TOPIC => {
                    let Some(t) = self.take_topic(
                        open,
                        |t| t.name == *resource_name,
                        |img| img.topics_by_name.get(resource_name).cloned(),
                    ) else {
                        tracing::warn!(topic = %resource_name, "ConfigRecord for unknown topic");
                        return;
                    };
                    set_or_remove(&mut t.configs, name, value);
                }
                RESOURCE_BROKER => {
                    let m = self
                        .broker_configs
                        .entry(resource_name.clone())
                        .or_default();
                    set_or_remove(m, name, value);
                    if m.is_empty() {
                        self.broker_configs.remove(resource_name);
                    }
                }
                other => tracing::warn!(
                    resource_type = other,
                    "ConfigRecord for unsupported resource type"
                ),
            },
            MetadataRecord::RemoveTopic { topic_id } => {
                if open.as_ref().is_some_and(|t| t.topic_id == *topic_id) {
                    *open = None;
                } else if let Some(t) = self.topics_by_id.remove(topic_id) {
                    self.topics_by_name.remove(&t.name);
                } else {
                    tracing::warn!(?topic_id, "RemoveTopicRecord for unknown topic");
                }
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                // Never backwards, whatever a damaged log says: ids must not be reused.
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition_id,
                leader,
                isr,
                replicas,
            } => {
                let Some(t) = self.take_topic(
                    open,
                    |t| t.topic_id == *topic_id,
                    |img| img.topics_by_id.get(topic_id).cloned(),
                ) else {
                    tracing::warn!(
                        ?topic_id,
                        partition_id,
                        "PartitionChangeRecord for unknown topic"
                    );
                    return;
                };
                let Ok(i) = t
                    .partitions
                    .binary_search_by_key(partition_id, |p| p.partition_id)
                else {
                    tracing::warn!(
                        ?topic_id,
                        partition_id,
                        "PartitionChangeRecord for unknown partition"
                    );
                    return;
                };
                let p = &mut t.partitions[i];
                if *leader != NO_LEADER_CHANGE && *leader != p.leader {
                    p.leader = *leader;
                    p.leader_epoch += 1;
                }
                if let Some(isr) = isr {
                    p.isr.clone_from(isr);
                }
                if let Some(replicas) = replicas {
                    p.replicas.clone_from(replicas);
                }
                p.partition_epoch += 1;
            }
            MetadataRecord::RegisterBroker(registration) => {
                self.brokers
                    .insert(registration.broker_id, registration.clone());
            }
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            } => {
                if self
                    .brokers
                    .get(broker_id)
                    .is_some_and(|b| b.broker_epoch == *broker_epoch)
                {
                    self.brokers.remove(broker_id);
                }
            }
            MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch,
                fenced,
                in_controlled_shutdown,
            } => match self.brokers.get_mut(broker_id) {
                Some(b) if b.broker_epoch == *broker_epoch => {
                    if let Some(fenced) = fenced {
                        b.fenced = *fenced;
                    }
                    if let Some(shutting_down) = in_controlled_shutdown {
                        b.in_controlled_shutdown = *shutting_down;
                    }
                }
                _ => tracing::warn!(
                    broker_id,
                    broker_epoch,
                    "BrokerRegistrationChangeRecord for no such registration"
                ),
            },
            MetadataRecord::UserScramCredential(credential) => {
                Arc::make_mut(&mut self.scram).upsert(credential);
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                Arc::make_mut(&mut self.scram).remove(*mechanism, name);
            }
            MetadataRecord::ClientQuota(quota) => Arc::make_mut(&mut self.quotas).apply(quota),
            MetadataRecord::AccessControlEntry { .. }
            | MetadataRecord::RemoveAccessControlEntry { .. } => {
                unreachable!("apply_all applies ACL records to its copy of the ACLs")
            }
        }
    }

    /// The topic being changed by the current run of records: `open` if `is_it` says it is
    /// the one, else `open` is put back and the topic found by `find` is taken out of both
    /// maps (copied only if another image still shares it).
    fn take_topic<'o>(
        &mut self,
        open: &'o mut Option<TopicImage>,
        is_it: impl Fn(&TopicImage) -> bool,
        find: impl Fn(&Image) -> Option<Arc<TopicImage>>,
    ) -> Option<&'o mut TopicImage> {
        if open.as_ref().is_some_and(&is_it) {
            return open.as_mut();
        }
        let t = find(self)?;
        if let Some(prev) = open.take() {
            self.put(prev);
        }
        self.topics_by_id.remove(&t.topic_id);
        self.topics_by_name.remove(&t.name);
        *open = Some(Arc::try_unwrap(t).unwrap_or_else(|shared| TopicImage::clone(&shared)));
        open.as_mut()
    }

    fn put(&mut self, t: TopicImage) {
        let t = Arc::new(t);
        self.topics_by_id.insert(t.topic_id, t.clone());
        self.topics_by_name.insert(t.name.clone(), t);
    }

    /// Records that rebuild this image from empty (the content of a snapshot).
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut out: Vec<MetadataRecord> = self
            .brokers
            .values()
            .cloned()
            .map(MetadataRecord::RegisterBroker)
            .collect();
        for t in self.topics_by_name.values() {
            out.push(MetadataRecord::Topic {
                name: t.name.clone(),
                topic_id: t.topic_id,
            });
            for (k, v) in &t.configs {
                out.push(MetadataRecord::Config {
                    resource_type: RESOURCE_TOPIC,
                    resource_name: t.name.clone(),
                    name: k.clone(),
                    value: Some(v.clone()),
                });
            }
            for p in &t.partitions {
                out.push(MetadataRecord::Partition {
                    topic_id: t.topic_id,
                    partition_id: p.partition_id,
                    replicas: p.replicas.clone(),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr.clone(),
                    partition_epoch: p.partition_epoch,
                    shard: p.shard,
                });
            }
        }
        for (res, m) in &self.broker_configs {
            for (k, v) in m {
                out.push(MetadataRecord::Config {
                    resource_type: RESOURCE_BROKER,
                    resource_name: res.clone(),
                    name: k.clone(),
                    value: Some(v.clone()),
                });
            }
        }
        if self.next_producer_id > 0 {
            out.push(MetadataRecord::ProducerIds {
                broker_id: -1,
                broker_epoch: -1,
                next_producer_id: self.next_producer_id,
            });
        }
        out.extend(self.scram.to_records());
        out.extend(crate::acls::to_records(&self.acls));
        out.extend(self.quotas.to_records());
        out
    }

    /// Builds an image from records (replay).
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a MetadataRecord>) -> Image {
        let mut img = Image::default();
        img.apply_all(records);
        img
    }
}

fn set_or_remove(m: &mut BTreeMap<String, String>, name: &str, value: &Option<String>) {
    match value {
        Some(v) => {
            m.insert(name.to_string(), v.clone());
        }
        None => {
            m.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(id: TopicId, p: i32, shard: u16) -> MetadataRecord {
        MetadataRecord::Partition {
            topic_id: id,
            partition_id: p,
            replicas: vec![1],
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            partition_epoch: 0,
            shard,
        }
    }

    #[test]
    fn apply_and_rebuild() {
        let a = [1u8; 16];
        let b = [2u8; 16];
        let recs = vec![
            MetadataRecord::Topic {
                name: "a".into(),
                topic_id: a,
            },
            part(a, 1, 1),
            part(a, 0, 0),
            MetadataRecord::Config {
                resource_type: RESOURCE_TOPIC,
                resource_name: "a".into(),
                name: "retention.ms".into(),
                value: Some("5".into()),
            },
            MetadataRecord::Topic {
                name: "b".into(),
                topic_id: b,
            },
            part(b, 0, 3),
            MetadataRecord::Config {
                resource_type: RESOURCE_BROKER,
                resource_name: "".into(),
                name: "k".into(),
                value: Some("v".into()),
            },
            part([9u8; 16], 0, 0), // unknown topic: ignored
        ];
        let img = Image::from_records(&recs);
        assert_eq!(img.owner("a", 0), Some(0));
        assert_eq!(img.owner("a", 1), Some(1));
        assert_eq!(img.owner("a", 2), None);
        assert_eq!(img.owner("b", 0), Some(3));
        assert_eq!(img.topic("a").unwrap().configs["retention.ms"], "5");
        assert!(Arc::ptr_eq(
            img.topic("a").unwrap(),
            img.topic_by_id(&a).unwrap()
        ));
        assert_eq!(img.broker_config("", "k"), Some("v"));
        assert_eq!(Image::from_records(&img.to_records()), img);

        let mut img2 = img.clone();
        img2.apply(&MetadataRecord::RemoveTopic { topic_id: a });
        img2.apply(&MetadataRecord::Config {
            resource_type: RESOURCE_BROKER,
            resource_name: "".into(),
            name: "k".into(),
            value: None,
        });
        assert!(img2.topic("a").is_none() && img2.topic_by_id(&a).is_none());
        assert!(img2.broker_configs.is_empty());
        // The old version is untouched and shares unchanged topics.
        assert!(img.topic("a").is_some());
        assert!(Arc::ptr_eq(
            img.topic("b").unwrap(),
            img2.topic("b").unwrap()
        ));
    }

    /// Replaying (or committing) a topic of 50,000 partitions is linear: the old per-record
    /// copy of the partition list made this 1.25 billion element copies (minutes). The bound
    /// is a sanity bound, two orders of magnitude above the linear cost, not a benchmark.
    #[test]
    fn applying_many_partition_records_is_linear() {
        const PARTITIONS: i32 = 50_000;
        let id = [7u8; 16];
        let mut recs = vec![MetadataRecord::Topic {
            name: "big".into(),
            topic_id: id,
        }];
        recs.extend((0..PARTITIONS).map(|p| part(id, p, (p % 4) as u16)));
        let started = std::time::Instant::now();
        let img = Image::from_records(&recs);
        assert_eq!(
            img.topic("big").unwrap().partitions.len(),
            PARTITIONS as usize
        );
        assert!(Arc::ptr_eq(
            img.topic("big").unwrap(),
            img.topic_by_id(&id).unwrap()
        ));

        // One record at a time onto an image another version shares (the controller's
        // commit path): the shared topic is copied once, not once per record.
        let shared = Arc::new(img);
        let mut next = Image::clone(&shared);
        let more: Vec<MetadataRecord> = (PARTITIONS..2 * PARTITIONS)
            .map(|p| part(id, p, 0))
            .collect();
        next.apply_all(&more);
        for p in 2 * PARTITIONS..2 * PARTITIONS + 1000 {
            next.apply(&part(id, p, 0));
        }
        let elapsed = started.elapsed();
        assert_eq!(
            next.topic("big").unwrap().partitions.len(),
            2 * PARTITIONS as usize + 1000
        );
        assert_eq!(
            shared.topic("big").unwrap().partitions.len(),
            PARTITIONS as usize
        );
        assert_eq!(next.owner("big", 2 * PARTITIONS + 999), Some(0));
        assert!(
            elapsed < std::time::Duration::from_secs(5),
            "took {elapsed:?}"
        );
    }

    #[test]
    fn runs_of_records_across_topics() {
        let (a, b) = ([1u8; 16], [2u8; 16]);
        let topic = |name: &str, id| MetadataRecord::Topic {
            name: name.into(),
            topic_id: id,
        };
        let config = |name: &str, value: Option<&str>| MetadataRecord::Config {
            resource_type: RESOURCE_TOPIC,
            resource_name: name.into(),
            name: "retention.ms".into(),
            value: value.map(Into::into),
        };
        let recs = vec![
            topic("a", a),
            part(a, 0, 0),
            topic("b", b),
            part(b, 0, 0),
            part(a, 2, 0),
            config("a", Some("1")),
            part(b, 1, 1),
            part(a, 1, 1),
            config("b", Some("2")),
            config("a", None),
            MetadataRecord::RemoveTopic { topic_id: b },
            topic("b", b),
            part(b, 5, 0),
        ];
        let mut batched = Image::default();
        batched.apply_all(&recs);
        let mut single = Image::default();
        for r in &recs {
            single.apply(r);
        }
        assert_eq!(batched, single);
        let ids: Vec<i32> = batched
            .topic("a")
            .unwrap()
            .partitions
            .iter()
            .map(|p| p.partition_id)
            .collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert!(batched.topic("a").unwrap().configs.is_empty());
        assert_eq!(batched.topic("b").unwrap().partitions.len(), 1);
        assert_eq!(batched.owner("b", 5), Some(0));
        assert_eq!(batched.topics_by_id.len(), 2);
    }

    fn registration(id: i32, epoch: i64) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: id,
            incarnation_id: [id as u8; 16],
            broker_epoch: epoch,
            endpoints: vec![],
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
        }
    }

    #[test]
    fn partition_changes_bump_epochs_as_kafka() {
        let a = [1u8; 16];
        let mut img = Image::from_records(&[
            MetadataRecord::Topic {
                name: "a".into(),
                topic_id: a,
            },
            MetadataRecord::Partition {
                topic_id: a,
                partition_id: 0,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                shard: 0,
            },
        ]);
        let change = |leader, isr: Option<Vec<i32>>| MetadataRecord::PartitionChange {
            topic_id: a,
            partition_id: 0,
            leader,
            isr,
            replicas: None,
        };
        // An ISR shrink: the partition epoch moves, the leader epoch does not.
        img.apply(&change(NO_LEADER_CHANGE, Some(vec![1, 2])));
        let p = img.topic("a").unwrap().partitions[0].clone();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
        assert_eq!(p.isr, [1, 2]);
        // A new leader: both move.
        img.apply(&change(2, Some(vec![2])));
        let p = img.topic("a").unwrap().partitions[0].clone();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
        // A snapshot keeps all of it.
        assert_eq!(Image::from_records(&img.to_records()), img);
        // A change for a partition that does not exist changes nothing.
        let before = img.clone();
        img.apply(&MetadataRecord::PartitionChange {
            topic_id: a,
            partition_id: 9,
            leader: 3,
            isr: None,
            replicas: None,
        });
        assert_eq!(img, before);
    }

    #[test]
    fn broker_registrations_change_only_for_their_epoch() {
        let mut img = Image::default();
        img.apply(&MetadataRecord::RegisterBroker(registration(1, 10)));
        img.apply(&MetadataRecord::RegisterBroker(registration(2, 11)));
        let unfence = |id, epoch| MetadataRecord::BrokerRegistrationChange {
            broker_id: id,
            broker_epoch: epoch,
            fenced: Some(false),
            in_controlled_shutdown: None,
        };
        img.apply(&unfence(1, 10));
        img.apply(&unfence(2, 99)); // a stale epoch: ignored
        assert!(!img.brokers[&1].fenced);
        assert!(img.brokers[&2].fenced);
        // A restarted broker registers again with a new epoch; the old epoch's unregistration
        // no longer applies.
        img.apply(&MetadataRecord::RegisterBroker(registration(1, 12)));
        img.apply(&MetadataRecord::UnregisterBroker {
            broker_id: 1,
            broker_epoch: 10,
        });
        assert_eq!(img.brokers[&1].broker_epoch, 12);
        assert_eq!(Image::from_records(&img.to_records()), img);
        img.apply(&MetadataRecord::UnregisterBroker {
            broker_id: 1,
            broker_epoch: 12,
        });
        assert!(!img.brokers.contains_key(&1));
    }
}
