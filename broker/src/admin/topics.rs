//! `broker topics create|list|describe|delete --bootstrap-server HOST:PORT`: what Kafka's
//! `kafka-topics.sh` does, over the Kafka protocol (Metadata, CreateTopics, DeleteTopics).
//! A Kafka error code is reported by its name and makes the command fail.

use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use wire::generated::delete_topics_request::DeleteTopicState;
use wire::generated::metadata_request::MetadataRequestTopic;
use wire::generated::metadata_response::MetadataResponseTopic;
use wire::generated::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    MetadataRequest, MetadataResponse,
};

use super::client::{error_message, error_name, Client, IO_TIMEOUT};

/// A request's server-side timeout, as kafka-topics.sh's default.
const REQUEST_TIMEOUT_MS: i32 = 30_000;
/// The Metadata version at which a null topic list means "all topics" (v0 used empty).
const METADATA_MIN_VERSION: i16 = 1;

/// What one `topics` command does.
#[derive(Debug, Clone)]
pub enum Action {
    Create {
        topic: String,
        /// -1: the broker's `num.partitions` (KIP-464).
        partitions: i32,
        /// -1: the broker's `default.replication.factor`.
        replication_factor: i16,
        configs: Vec<(String, String)>,
    },
    List,
    /// `None`: every topic.
    Describe {
        topic: Option<String>,
    },
    Delete {
        topic: String,
    },
}

/// A Kafka error code the broker answered, reported as kafka-topics.sh does.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {message} (topic {topic})")]
pub struct KafkaError {
    pub topic: String,
    pub name: String,
    pub message: String,
}

fn kafka_error(topic: &str, code: i16, message: Option<&str>) -> KafkaError {
    KafkaError {
        topic: topic.to_owned(),
        name: error_name(code),
        message: message.unwrap_or_else(|| error_message(code)).to_owned(),
    }
}

/// Parses one `--config key=value`.
pub fn parse_config(kv: &str) -> Result<(String, String), String> {
    match kv.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected key=value, got {kv:?}")),
    }
}

/// Runs `action` against the broker at `bootstrap`, printing to `out`.
pub fn run(
    bootstrap: &str,
    action: &Action,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut client = Client::connect(bootstrap)?;
    match action {
        Action::Create {
            topic,
            partitions,
            replication_factor,
            configs,
        } => create(
            &mut client,
            topic,
            *partitions,
            *replication_factor,
            configs,
            json,
            out,
        ),
        Action::List => {
            let metadata = metadata(&mut client, None)?;
            let mut names: Vec<&str> = metadata
                .topics
                .iter()
                .filter(|t| t.error_code == 0)
                .filter_map(|t| t.name.as_deref())
                .collect();
            names.sort_unstable();
            if json {
                writeln!(out, "{}", json!({ "topics": names }))?;
            } else {
                for name in names {
                    writeln!(out, "{name}")?;
                }
            }
            Ok(())
        }
        Action::Describe { topic } => {
            let metadata = metadata(&mut client, topic.as_deref())?;
            let mut topics: Vec<&MetadataResponseTopic> = metadata.topics.iter().collect();
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            for t in &topics {
                if t.error_code != 0 {
                    let name = t.name.clone().unwrap_or_default();
                    return Err(kafka_error(&name, t.error_code, None).into());
                }
            }
            for t in topics {
                describe_topic(t, json, out)?;
            }
            Ok(())
        }
        Action::Delete { topic } => delete(&mut client, topic, json, out),
    }
}

fn metadata(client: &mut Client, topic: Option<&str>) -> anyhow::Result<MetadataResponse> {
    let version = client.version(ApiKey::Metadata, METADATA_MIN_VERSION, i16::MAX)?;
    let request = MetadataRequest {
        topics: topic.map(|name| {
            vec![MetadataRequestTopic {
                name: Some(name.to_owned()),
                ..Default::default()
            }]
        }),
        allow_auto_topic_creation: false,
        ..Default::default()
    };
    client.request(ApiKey::Metadata, version, &request)
}

fn describe_topic(
    t: &MetadataResponseTopic,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let name = t.name.as_deref().unwrap_or("");
    let mut partitions: Vec<_> = t.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    let replication_factor = partitions.first().map_or(0, |p| p.replica_nodes.len());
    if json {
        let parts: Vec<_> = partitions
            .iter()
            .map(|p| {
                json!({
                    "partition": p.partition_index,
                    "leader": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "replicas": p.replica_nodes,
                    "isr": p.isr_nodes,
                    "offline": p.offline_replicas,
                    "error": (p.error_code != 0).then(|| error_name(p.error_code)),
                })
            })
            .collect();
        let line = json!({
            "topic": name,
            "topic_id": t.topic_id.to_string(),
            "internal": t.is_internal,
            "partition_count": partitions.len(),
            "replication_factor": replication_factor,
            "partitions": parts,
        });
        writeln!(out, "{line}")?;
        return Ok(());
    }
    let ids = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    writeln!(
        out,
        "Topic: {name}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {replication_factor}",
        t.topic_id,
        partitions.len(),
    )?;
    for p in partitions {
        write!(
            out,
            "\tTopic: {name}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
            p.partition_index,
            if p.leader_id < 0 {
                "none".to_owned()
            } else {
                p.leader_id.to_string()
            },
            ids(&p.replica_nodes),
            ids(&p.isr_nodes),
        )?;
        if p.error_code != 0 {
            write!(out, "\tError: {}", error_name(p.error_code))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn create(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(String, String)],
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    // Broker defaults (-1) need CreateTopics v4 (KIP-464).
    let floor = if partitions < 0 || replication_factor < 0 {
        4
    } else {
        0
    };
    let version = client.version(ApiKey::CreateTopics, floor, i16::MAX)?;
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: topic.to_owned(),
            num_partitions: partitions,
            replication_factor,
            configs: configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig {
                    name: k.clone(),
                    value: Some(v.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: REQUEST_TIMEOUT_MS,
        validate_only: false,
        ..Default::default()
    };
    let resp: CreateTopicsResponse = client.request(ApiKey::CreateTopics, version, &request)?;
    let Some(result) = resp.topics.iter().find(|t| t.name == topic) else {
        bail!("CreateTopics response does not mention {topic}");
    };
    if result.error_code != 0 {
        return Err(kafka_error(topic, result.error_code, result.error_message.as_deref()).into());
    }
    if json {
        writeln!(
            out,
            "{}",
            json!({
                "created": topic,
                "topic_id": result.topic_id.to_string(),
                "partitions": result.num_partitions,
                "replication_factor": result.replication_factor,
            })
        )?;
    } else {
        writeln!(out, "Created topic {topic}.")?;
    }
    Ok(())
}

fn delete(client: &mut Client, topic: &str, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let version = client.version(ApiKey::DeleteTopics, 0, i16::MAX)?;
    // v6 (KIP-516) names topics in `topics`; earlier versions in `topic_names`.
    let request = if version >= 6 {
        DeleteTopicsRequest {
            topics: vec![DeleteTopicState {
                name: Some(topic.to_owned()),
                ..Default::default()
            }],
            timeout_ms: REQUEST_TIMEOUT_MS,
            ..Default::default()
        }
    } else {
        DeleteTopicsRequest {
            topic_names: vec![topic.to_owned()],
            timeout_ms: REQUEST_TIMEOUT_MS,
            ..Default::default()
        }
    };
    let resp: DeleteTopicsResponse = client
        .request(ApiKey::DeleteTopics, version, &request)
        .with_context(|| format!("deleting {topic} (timeout {IO_TIMEOUT:?})"))?;
    let Some(result) = resp
        .responses
        .iter()
        .find(|r| r.name.as_deref() == Some(topic))
    else {
        bail!("DeleteTopics response does not mention {topic}");
    };
    if result.error_code != 0 {
        return Err(kafka_error(topic, result.error_code, result.error_message.as_deref()).into());
    }
    if json {
        writeln!(out, "{}", json!({ "deleted": topic }))?;
    } else {
        writeln!(out, "Deleted topic {topic}.")?;
    }
    Ok(())
}

/// Options every `topics` command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// A broker to talk to, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// One JSON object per line instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// `broker topics ...`, with kafka-topics.sh's flags.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TopicsCommand {
    /// Creates a topic.
    Create {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        topic: String,
        /// Number of partitions (default: the broker's num.partitions).
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        partitions: i32,
        /// Replication factor (default: the broker's default.replication.factor).
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        replication_factor: i16,
        /// A topic configuration override, `key=value`; repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_config)]
        configs: Vec<(String, String)>,
    },
    /// Lists topic names.
    List {
        #[command(flatten)]
        common: Common,
    },
    /// Prints partitions, leaders, replicas and ISR of one topic (or of every topic).
    Describe {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        topic: Option<String>,
    },
    /// Deletes a topic.
    Delete {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        topic: String,
    },
}

impl TopicsCommand {
    /// Runs the command, printing to `out`.
    pub fn run(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let (common, action) = match self {
            TopicsCommand::Create {
                common,
                topic,
                partitions,
                replication_factor,
                configs,
            } => (
                common,
                Action::Create {
                    topic,
                    partitions,
                    replication_factor,
                    configs,
                },
            ),
            TopicsCommand::List { common } => (common, Action::List),
            TopicsCommand::Describe { common, topic } => (common, Action::Describe { topic }),
            TopicsCommand::Delete { common, topic } => (common, Action::Delete { topic }),
        };
        run(&common.bootstrap_server, &action, common.json, out)
    }
}
