//! Talking to a whole cluster from one bootstrap address: Metadata names the brokers and each
//! partition's leader, and requests that only a leader (Produce, Fetch, ListOffsets) or a
//! group's coordinator answers go to that broker over a connection opened on first use.

use std::collections::{BTreeMap, HashMap};

use wire::generated::api::ApiKey;
use wire::generated::find_coordinator_request::FindCoordinatorRequest;
use wire::generated::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use wire::generated::{
    FindCoordinatorResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataResponse,
};

use crate::client::Client;
pub use crate::error::{kafka_error, KafkaError};
use crate::error::{Error, Result};

/// ListOffsets' special timestamps.
pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
/// A request's server-side timeout, as Kafka's admin client's default.
pub const REQUEST_TIMEOUT_MS: i32 = 30_000;

/// The bootstrap connection plus one connection per broker addressed so far.
pub struct Cluster {
    bootstrap: Client,
    /// Node id to `host:port`, from the last Metadata answer.
    brokers: HashMap<i32, String>,
    nodes: HashMap<i32, Client>,
}

impl Cluster {
    pub fn connect(bootstrap: &str) -> Result<Cluster> {
        Ok(Cluster {
            bootstrap: Client::connect(bootstrap)?,
            brokers: HashMap::new(),
            nodes: HashMap::new(),
        })
    }

    /// The connection to the bootstrap broker.
    pub fn bootstrap(&mut self) -> &mut Client {
        &mut self.bootstrap
    }

    /// Metadata for `topics` (`None`: every topic), remembering where each broker listens.
    pub fn metadata(&mut self, topics: Option<&[String]>) -> Result<MetadataResponse> {
        self.metadata_as(topics, false)
    }

    fn metadata_as(
        &mut self,
        topics: Option<&[String]>,
        auto_create: bool,
    ) -> Result<MetadataResponse> {
        let response = self.bootstrap.metadata(topics, auto_create)?;
        for b in &response.brokers {
            self.brokers
                .insert(b.node_id, format!("{}:{}", b.host, b.port));
        }
        Ok(response)
    }

    /// Node ids of every broker Metadata named.
    pub fn node_ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self.brokers.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// `host:port` of a broker Metadata named.
    pub fn address(&self, node: i32) -> Option<&str> {
        self.brokers.get(&node).map(String::as_str)
    }

    /// The connection to broker `node` (opened on first use).
    pub fn node(&mut self, node: i32) -> Result<&mut Client> {
        if !self.nodes.contains_key(&node) {
            let Some(addr) = self.brokers.get(&node) else {
                return Err(Error::UnknownBroker { node });
            };
            let client = Client::connect(addr).map_err(|e| Error::Broker {
                node,
                error: Box::new(e),
            })?;
            self.nodes.insert(node, client);
        }
        Ok(self.nodes.get_mut(&node).expect("inserted above"))
    }

    /// The partitions of `topic` and their leaders, in partition order; a topic error (e.g.
    /// UNKNOWN_TOPIC_OR_PARTITION) is returned by name. A missing topic is created where the
    /// broker's `auto.create.topics.enable` allows, as kafka-console-producer/consumer.sh's
    /// clients ask by default.
    pub fn partitions(&mut self, topic: &str) -> Result<Vec<(i32, i32)>> {
        let md = self.metadata_as(Some(&[topic.to_owned()]), true)?;
        leaders(&md, topic)
    }

    /// The coordinator of `group`: node id and connection.
    pub fn coordinator(&mut self, group: &str) -> Result<(i32, &mut Client)> {
        let version = self
            .bootstrap
            .version(ApiKey::FindCoordinator, 0, i16::MAX)?;
        // v4 (KIP-699) asks in batches through `coordinator_keys`.
        let request = if version >= 4 {
            FindCoordinatorRequest {
                key_type: 0,
                coordinator_keys: vec![group.to_owned()],
                ..Default::default()
            }
        } else {
            FindCoordinatorRequest {
                key: group.to_owned(),
                key_type: 0,
                ..Default::default()
            }
        };
        let resp: FindCoordinatorResponse =
            self.bootstrap
                .request(ApiKey::FindCoordinator, version, &request)?;
        let (code, message, node, host, port) = if version >= 4 {
            let Some(c) = resp.coordinators.first() else {
                return Err(Error::NoCoordinator {
                    group: group.to_owned(),
                });
            };
            (
                c.error_code,
                c.error_message.clone(),
                c.node_id,
                c.host.clone(),
                c.port,
            )
        } else {
            (
                resp.error_code,
                resp.error_message.clone(),
                resp.node_id,
                resp.host.clone(),
                resp.port,
            )
        };
        if code != 0 {
            return Err(kafka_error(format!("group {group}"), code, message.as_deref()).into());
        }
        self.brokers.insert(node, format!("{host}:{port}"));
        Ok((node, self.node(node)?))
    }

    /// ListOffsets for `timestamp` (LATEST, EARLIEST or a time in ms) of each partition
    /// of `topic`, asking each leader for its own partitions. A partition without an offset
    /// for that time answers -1, as Kafka does.
    pub fn list_offsets(
        &mut self,
        topic: &str,
        partitions: &[(i32, i32)],
        timestamp: i64,
    ) -> Result<BTreeMap<i32, i64>> {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for &(partition, leader) in partitions {
            if leader < 0 {
                return Err(
                    kafka_error(format!("{topic}-{partition}"), 5, Some("no leader")).into(),
                );
            }
            by_leader.entry(leader).or_default().push(partition);
        }
        let mut offsets = BTreeMap::new();
        for (leader, parts) in by_leader {
            let client = self.node(leader)?;
            // v1 is the first to answer one offset per partition; v6+ is flexible.
            let version = client.version(ApiKey::ListOffsets, 1, i16::MAX)?;
            let request = ListOffsetsRequest {
                replica_id: -1,
                isolation_level: 0,
                topics: vec![ListOffsetsTopic {
                    name: topic.to_owned(),
                    partitions: parts
                        .iter()
                        .map(|&p| ListOffsetsPartition {
                            partition_index: p,
                            current_leader_epoch: -1,
                            timestamp,
                            max_num_offsets: 1,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                timeout_ms: REQUEST_TIMEOUT_MS,
                ..Default::default()
            };
            let resp: ListOffsetsResponse =
                client.request(ApiKey::ListOffsets, version, &request)?;
            for t in &resp.topics {
                for p in &t.partitions {
                    if p.error_code != 0 {
                        return Err(kafka_error(
                            format!("{topic}-{}", p.partition_index),
                            p.error_code,
                            None,
                        )
                        .into());
                    }
                    offsets.insert(p.partition_index, p.offset);
                }
            }
        }
        for &(partition, _) in partitions {
            if !offsets.contains_key(&partition) {
                return Err(Error::MissingOffset {
                    topic: topic.to_owned(),
                    partition,
                });
            }
        }
        Ok(offsets)
    }
}

/// `(partition, leader)` of every partition of `topic` in `md`, in partition order.
pub fn leaders(md: &MetadataResponse, topic: &str) -> Result<Vec<(i32, i32)>> {
    let Some(t) = md.topics.iter().find(|t| t.name.as_deref() == Some(topic)) else {
        return Err(kafka_error(format!("topic {topic}"), 3, None).into());
    };
    if t.error_code != 0 {
        return Err(kafka_error(format!("topic {topic}"), t.error_code, None).into());
    }
    let mut parts: Vec<(i32, i32)> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id))
        .collect();
    parts.sort_unstable();
    Ok(parts)
}
