//! Metadata: brokers, topics, partitions (leader, epoch, replicas), topic ids; auto-creates
//! requested topics that do not exist when both the request (v4+) and
//! `auto.create.topics.enable` allow it, as Kafka does. With an authorizer, as Kafka's
//! KafkaApis: DESCRIBE on each topic (hidden from a listing of all topics, refused when
//! named), CREATE on the cluster or the topic to auto-create it, and the authorized
//! operations bit sets when asked for.

use std::rc::Rc;

use wire::generated::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use wire::generated::{MetadataRequest, MetadataResponse};
use wire::primitives::Uuid;
use wire::ErrorCode;

use acl::AclOperation::{Create, Describe};
use acl::ResourceType::Topic;

use super::{encode_response, RequestContext, Response};
use crate::forward::{self, TopicSpec};
use crate::metadata::image::TopicImage;
use crate::metadata::{validate_topic_name, MAX_PARTITIONS_PER_REQUEST};
use crate::shard::Shard;

/// Topics one Metadata request may auto-create (fewer when `num.partitions` times this would
/// pass `MAX_PARTITIONS_PER_REQUEST`): each is a metadata commit (an fsync) on the metadata core.
const MAX_AUTO_CREATE_TOPICS_PER_REQUEST: u64 = 1_000;

/// Cluster id reported when none is configured.
const DEFAULT_CLUSTER_ID: &str = "kafka-tpc-single-node";

/// The cluster id Metadata and DescribeCluster report.
pub(super) fn cluster_id(config: &crate::config::BrokerConfig) -> String {
    let default = if config.quorum.is_single_node(config.node_id) {
        DEFAULT_CLUSTER_ID
    } else {
        crate::metadata::cluster::DEFAULT_CLUSTER_ID
    };
    config
        .cluster_id
        .clone()
        .unwrap_or_else(|| default.to_string())
}

/// Kafka's first check of a Metadata request: v10-11 carry a topic id field but serve names
/// only, so a topic with a null name or a non-zero id fails the whole request
/// (`InvalidRequestException` → `MetadataRequest.getErrorResponse`): every listed topic,
/// duplicates included, answered INVALID_REQUEST with its name (`""` for null) and id, and no
/// brokers, cluster id or controller.
fn refuse_topic_ids(version: i16, request: &MetadataRequest) -> Option<MetadataResponse> {
    let topics = request.topics.as_ref()?;
    if !(10..=11).contains(&version)
        || !topics
            .iter()
            .any(|topic| topic.name.is_none() || topic.topic_id != Uuid::ZERO)
    {
        return None;
    }
    Some(MetadataResponse {
        topics: topics
            .iter()
            .map(|topic| MetadataResponseTopic {
                error_code: ErrorCode::InvalidRequest.code(),
                name: Some(topic.name.clone().unwrap_or_default()),
                topic_id: topic.topic_id,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

pub async fn handle(shard: Rc<Shard>, request: MetadataRequest, ctx: RequestContext) -> Response {
    let config = &shard.config;
    if let Some(refused) = refuse_topic_ids(ctx.api_version, &request) {
        return encode_response(&ctx, ctx.api_version, &refused);
    }
    // v0: an empty list means every topic; v1+: null means every topic.
    let all_topics = match &request.topics {
        None => true,
        Some(topics) => topics.is_empty() && ctx.api_version == 0,
    };
    // Kafka collects the requested names into a set: a name (or topic id) listed many times
    // is answered once, so a request cannot multiply its response.
    let mut requested = request.topics.unwrap_or_default();
    let mut seen = std::collections::HashSet::with_capacity(requested.len());
    requested.retain(|topic| seen.insert((topic.name.clone(), topic.topic_id)));
    let auto_create = config.auto_create_topics_enable
        && (ctx.api_version < 4 || request.allow_auto_topic_creation);
    if !all_topics && auto_create {
        let image = shard.image();
        // Bounded like a CreateTopics request: names past the bounds are not created by this
        // request (they answer UNKNOWN_TOPIC_OR_PARTITION; a client's next Metadata creates more).
        let per_topic = u64::try_from(config.num_partitions.max(1)).unwrap_or(1);
        let max_topics = (MAX_PARTITIONS_PER_REQUEST / per_topic)
            .min(MAX_AUTO_CREATE_TOPICS_PER_REQUEST) as usize;
        let mut seen = std::collections::HashSet::new();
        // Kafka: only topics the request may DESCRIBE, and CREATE (on the cluster, or on
        // the topic), are created.
        let create_all = shard.authorize_cluster(&ctx, Create);
        let missing: Vec<TopicSpec> = requested
            .iter()
            .filter_map(|topic| topic.name.as_ref())
            .filter(|name| image.topic(name).is_none() && validate_topic_name(name).is_ok())
            .filter(|name| seen.insert(name.as_str()))
            .filter(|name| shard.authorize(&ctx, Describe, Topic, name))
            .filter(|name| create_all || shard.authorize(&ctx, Create, Topic, name))
            .take(max_topics)
            .map(|name| TopicSpec {
                name: name.clone(),
                num_partitions: -1,
                replication_factor: -1,
                configs: Default::default(),
                assignments: Vec::new(),
            })
            .collect();
        if !missing.is_empty() {
            shard
                .call(
                    0,
                    forward::CreateTopics {
                        topics: missing,
                        validate_only: false,
                    },
                )
                .await;
        }
    }
    let image = shard.image();
    let describe = |topic: &TopicImage| MetadataResponseTopic {
        error_code: 0,
        name: Some(topic.name.clone()),
        topic_id: Uuid(topic.topic_id),
        // v0 has no such field.
        is_internal: ctx.api_version >= 1
            && (topic.name == crate::group::OFFSETS_TOPIC || topic.name == crate::txn::TXN_TOPIC),
        partitions: topic
            .partitions
            .iter()
            .map(|partition| {
                let (leader_id, replica_nodes, isr_nodes) =
                    super::cluster_view::placement(&shard, partition);
                MetadataResponsePartition {
                    error_code: if leader_id < 0 {
                        ErrorCode::LeaderNotAvailable.code()
                    } else {
                        0
                    },
                    partition_index: partition.partition_id,
                    leader_id,
                    leader_epoch: partition.leader_epoch,
                    replica_nodes,
                    isr_nodes,
                    offline_replicas: vec![],
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    let include_operations = ctx.api_version >= 8 && request.include_topic_authorized_operations;
    // Kafka fills `topic_authorized_operations` for every topic it answered as authorized
    // (found or not), and leaves the default on the refused ones.
    let with_operations = |mut topic: MetadataResponseTopic| {
        if include_operations {
            let name = topic.name.as_deref().unwrap_or_default();
            topic.topic_authorized_operations = shard.authorized_operations(&ctx, Topic, name);
        }
        topic
    };
    let refused = |name: Option<String>, topic_id: Uuid| MetadataResponseTopic {
        error_code: ErrorCode::TopicAuthorizationFailed.code(),
        name,
        topic_id,
        ..Default::default()
    };
    let topics = if all_topics {
        image
            .topics_by_name
            .values()
            // Internal topics are listed only when asked for by name.
            .filter(|topic| {
                topic.name != crate::group::OFFSETS_TOPIC && topic.name != crate::txn::TXN_TOPIC
            })
            // Kafka: a listing of every topic leaves out those the request may not DESCRIBE.
            .filter(|topic| shard.authorize(&ctx, Describe, Topic, &topic.name))
            .map(|topic| with_operations(describe(topic)))
            .collect()
    } else {
        requested
            .iter()
            .map(|wanted| {
                let found = match &wanted.name {
                    Some(name) => image.topic(name),
                    None => image.topic_by_id(&wanted.topic_id.0),
                };
                // A topic named, or found by its id, that the request may not DESCRIBE: the
                // name is not disclosed for an id (an id is not secret), nor the id for a name.
                let name = wanted.name.as_deref().or(found.map(|t| t.name.as_str()));
                if let Some(name) = name.filter(|n| !shard.authorize(&ctx, Describe, Topic, n)) {
                    return match &wanted.name {
                        Some(_) => refused(Some(name.to_owned()), Uuid::ZERO),
                        None if ctx.api_version < 12 => {
                            refused(Some(String::new()), wanted.topic_id)
                        }
                        None => refused(None, wanted.topic_id),
                    };
                }
                // Not created for want of CREATE (see above): Kafka refuses it.
                let creatable = |name: &str| {
                    shard.authorize_cluster(&ctx, Create)
                        || shard.authorize(&ctx, Create, Topic, name)
                };
                match (found, &wanted.name) {
                    (None, Some(name))
                        if auto_create && validate_topic_name(name).is_ok() && !creatable(name) =>
                    {
                        let mut topic = refused(Some(name.clone()), Uuid::ZERO);
                        topic.is_internal = ctx.api_version >= 1
                            && (name == crate::group::OFFSETS_TOPIC
                                || name == crate::txn::TXN_TOPIC);
                        topic
                    }
                    (Some(topic), _) => with_operations(describe(topic)),
                    (None, Some(name)) => with_operations(MetadataResponseTopic {
                        error_code: if validate_topic_name(name).is_err() {
                            ErrorCode::InvalidTopicException.code()
                        } else {
                            ErrorCode::UnknownTopicOrPartition.code()
                        },
                        name: Some(name.clone()),
                        ..Default::default()
                    }),
                    (None, None) => MetadataResponseTopic {
                        error_code: ErrorCode::UnknownTopicId.code(),
                        name: None,
                        topic_id: wanted.topic_id,
                        ..Default::default()
                    },
                }
            })
            .collect()
    };
    // Kafka answers with the brokers' endpoints on the listener the request came through.
    let response = MetadataResponse {
        brokers: super::cluster_view::brokers(&shard, &ctx.listener)
            .into_iter()
            .map(|b| MetadataResponseBroker {
                node_id: b.node_id,
                host: b.host,
                port: b.port,
                rack: b.rack,
                ..Default::default()
            })
            .collect(),
        cluster_id: Some(cluster_id(config)),
        controller_id: super::cluster_view::controller_id(&shard),
        topics,
        // v8-10 only (Kafka: 0 without DESCRIBE on the cluster).
        cluster_authorized_operations: if (8..=10).contains(&ctx.api_version)
            && request.include_cluster_authorized_operations
        {
            if shard.authorize_cluster(&ctx, Describe) {
                shard.authorized_operations(&ctx, acl::ResourceType::Cluster, acl::CLUSTER_NAME)
            } else {
                0
            }
        } else {
            i32::MIN
        },
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::generated::metadata_request::MetadataRequestTopic;

    fn request(topics: Vec<(Option<&str>, u128)>) -> MetadataRequest {
        MetadataRequest {
            topics: Some(
                topics
                    .into_iter()
                    .map(|(name, id)| MetadataRequestTopic {
                        name: name.map(str::to_string),
                        topic_id: Uuid(id.to_be_bytes()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn v10_and_v11_refuse_a_topic_id_or_null_name_for_the_whole_request() {
        let req = request(vec![
            (Some("a"), 0),
            (Some("b"), 7),
            (None, 9),
            (Some("a"), 0),
        ]);
        for version in [10, 11] {
            let answer = refuse_topic_ids(version, &req).expect("refused");
            let got: Vec<_> = answer
                .topics
                .iter()
                .map(|t| (t.error_code, t.name.clone().unwrap(), t.topic_id))
                .collect();
            let invalid = ErrorCode::InvalidRequest.code();
            assert_eq!(
                got,
                vec![
                    (invalid, "a".to_string(), Uuid::ZERO),
                    (invalid, "b".to_string(), Uuid(7u128.to_be_bytes())),
                    (invalid, String::new(), Uuid(9u128.to_be_bytes())),
                    (invalid, "a".to_string(), Uuid::ZERO),
                ]
            );
            assert!(answer.brokers.is_empty());
            assert_eq!(answer.cluster_id, None);
            assert_eq!(answer.controller_id, -1);
            assert_eq!(answer.cluster_authorized_operations, i32::MIN);
        }
        // v12 serves ids; names only are served at v10-11.
        assert!(refuse_topic_ids(12, &req).is_none());
        assert!(refuse_topic_ids(10, &request(vec![(Some("a"), 0)])).is_none());
        assert!(refuse_topic_ids(
            10,
            &MetadataRequest {
                topics: None,
                ..Default::default()
            }
        )
        .is_none());
    }
}
