//! `broker topics create|list|describe|delete|alter|alter-config --bootstrap-server HOST:PORT`:
//! what Kafka's `kafka-topics.sh` (and, for alter-config, `kafka-configs.sh --entity-type
//! topics`) does, over the Kafka protocol (Metadata, CreateTopics, DeleteTopics,
//! CreatePartitions, DescribeConfigs, IncrementalAlterConfigs/AlterConfigs).
//! A Kafka error code is reported by its name and makes the command fail.
//!
//! `--topic` of describe and delete is a legal topic name, taken exactly, or else (it has a
//! character no topic name may have, e.g. `*`) a regular expression matched against every
//! topic's whole name, as kafka-topics.sh takes it.

use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::create_partitions_request::CreatePartitionsTopic;
use wire::generated::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use wire::generated::delete_topics_request::DeleteTopicState;
use wire::generated::metadata_response::MetadataResponseTopic;
use wire::generated::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, MetadataResponse,
};
use wire::primitives::Uuid;

use super::client::{error_message, error_name, Client, IO_TIMEOUT};
use super::configs::{self, Entry};
use super::progress::Progress;
use super::topic_filter::{include_list, is_topic_name};
use super::CommonProgressArgs;

/// A request's server-side timeout, as kafka-topics.sh's default.
const REQUEST_TIMEOUT_MS: i32 = 30_000;
/// Topics named per DeleteTopics request when a regex selects many: each deletion is a
/// metadata commit on the broker, and a bounded batch keeps a request within its timeout
/// (and lets progress move).
pub const DELETE_BATCH_TOPICS: usize = 100;

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
    /// Raises a topic's partition count (CreatePartitions).
    Alter {
        topic: String,
        partitions: i32,
    },
    /// Sets and removes per-topic config overrides.
    AlterConfig {
        topic: String,
        adds: Vec<(String, String)>,
        deletes: Vec<String>,
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
    progress: bool,
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
            let metadata = match topic.as_deref() {
                Some(name) if is_topic_name(name) => metadata(&mut client, Some(name))?,
                _ => metadata(&mut client, None)?,
            };
            let pattern = match topic.as_deref() {
                Some(name) if !is_topic_name(name) => {
                    Some(include_list(name).map_err(anyhow::Error::msg)?)
                }
                _ => None,
            };
            let mut topics: Vec<&MetadataResponseTopic> = metadata
                .topics
                .iter()
                .filter(|t| {
                    pattern
                        .as_ref()
                        .is_none_or(|re| re.is_match(t.name.as_deref().unwrap_or("")))
                })
                .collect();
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            for t in &topics {
                if t.error_code != 0 {
                    let name = t.name.clone().unwrap_or_default();
                    return Err(kafka_error(&name, t.error_code, None).into());
                }
            }
            if let (Some(name), true) = (topic, topics.is_empty()) {
                return Err(not_found(name).into());
            }
            let names: Vec<&str> = topics.iter().filter_map(|t| t.name.as_deref()).collect();
            let configs = configs::describe_topics(&mut client, &names)?;
            for t in topics {
                let name = t.name.as_deref().unwrap_or("");
                let entries = configs
                    .as_ref()
                    .map(|all| all.get(name).map(Vec::as_slice).unwrap_or_default());
                describe_topic(t, entries, json, out)?;
            }
            Ok(())
        }
        Action::Delete { topic } if is_topic_name(topic) => delete(&mut client, topic, json, out),
        Action::Delete { topic } => delete_matching(&mut client, topic, json, progress, out),
        Action::Alter { topic, partitions } => {
            create_partitions(&mut client, topic, *partitions, json, out)
        }
        Action::AlterConfig {
            topic,
            adds,
            deletes,
        } => {
            if adds.is_empty() && deletes.is_empty() {
                bail!("alter-config needs --add-config or --delete-config");
            }
            let api = configs::alter_topic(&mut client, topic, adds, deletes)?;
            if json {
                let added: serde_json::Map<String, serde_json::Value> = adds
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into()))
                    .collect();
                writeln!(
                    out,
                    "{}",
                    json!({
                        "altered": topic,
                        "set": added,
                        "deleted": deletes,
                        "api": api.name(),
                    })
                )?;
            } else {
                writeln!(out, "Completed updating config for topic {topic}.")?;
            }
            Ok(())
        }
    }
}

/// kafka-topics.sh's error for a `--topic` that names or matches no topic.
fn not_found(topic: &str) -> KafkaError {
    KafkaError {
        topic: topic.to_owned(),
        name: error_name(wire::ErrorCode::UnknownTopicOrPartition.code()),
        message: format!("Topic '{topic}' does not exist as expected"),
    }
}

/// Metadata of one topic, or of every topic.
pub(crate) fn metadata(
    client: &mut Client,
    topic: Option<&str>,
) -> anyhow::Result<MetadataResponse> {
    Ok(client.metadata(topic.map(|name| vec![name.to_owned()]).as_deref(), false)?)
}

/// Prints one topic; `configs` is `None` when the broker has no DescribeConfigs (the
/// `Configs:` column is then left out).
fn describe_topic(
    t: &MetadataResponseTopic,
    configs: Option<&[Entry]>,
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
            "configs": configs.map(|entries| {
                entries
                    .iter()
                    .filter(|e| e.non_default)
                    .map(|e| (e.name.clone(), e.value.clone().into()))
                    .collect::<serde_json::Map<String, serde_json::Value>>()
            }),
        });
        writeln!(out, "{line}")?;
        return Ok(());
    }
    let ids = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    // kafka-topics.sh's line: the id only when there is one, then the non-default configs.
    write!(out, "Topic: {name}")?;
    if t.topic_id != Uuid::ZERO {
        write!(out, "\tTopicId: {}", t.topic_id)?;
    }
    write!(
        out,
        "\tPartitionCount: {}\tReplicationFactor: {replication_factor}",
        partitions.len()
    )?;
    if let Some(entries) = configs {
        write!(out, "\tConfigs: {}", configs::configs_column(entries))?;
    }
    writeln!(out)?;
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

/// One DeleteTopics request for `topics`: each topic's error, if any.
fn delete_topics(
    client: &mut Client,
    topics: &[&str],
) -> anyhow::Result<Vec<(String, Option<KafkaError>)>> {
    let version = client.version(ApiKey::DeleteTopics, 0, i16::MAX)?;
    // v6 (KIP-516) names topics in `topics`; earlier versions in `topic_names`.
    let request = if version >= 6 {
        DeleteTopicsRequest {
            topics: topics
                .iter()
                .map(|name| DeleteTopicState {
                    name: Some((*name).to_owned()),
                    ..Default::default()
                })
                .collect(),
            timeout_ms: REQUEST_TIMEOUT_MS,
            ..Default::default()
        }
    } else {
        DeleteTopicsRequest {
            topic_names: topics.iter().map(|name| (*name).to_owned()).collect(),
            timeout_ms: REQUEST_TIMEOUT_MS,
            ..Default::default()
        }
    };
    let resp: DeleteTopicsResponse = client
        .request(ApiKey::DeleteTopics, version, &request)
        .with_context(|| {
            format!(
                "deleting {} topic(s) (timeout {IO_TIMEOUT:?})",
                topics.len()
            )
        })?;
    topics
        .iter()
        .map(|topic| {
            let Some(result) = resp
                .responses
                .iter()
                .find(|r| r.name.as_deref() == Some(*topic))
            else {
                bail!("DeleteTopics response does not mention {topic}");
            };
            let error = (result.error_code != 0)
                .then(|| kafka_error(topic, result.error_code, result.error_message.as_deref()));
            Ok(((*topic).to_owned(), error))
        })
        .collect()
}

fn print_deleted(topic: &str, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", json!({ "deleted": topic }))?;
    } else {
        writeln!(out, "Deleted topic {topic}.")?;
    }
    Ok(())
}

fn delete(client: &mut Client, topic: &str, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    for (name, error) in delete_topics(client, &[topic])? {
        if let Some(error) = error {
            return Err(error.into());
        }
        print_deleted(&name, json, out)?;
    }
    Ok(())
}

/// Deletes every topic whose name `pattern` matches, `DELETE_BATCH_TOPICS` per request, with
/// progress; goes on past a topic's error and fails at the end if there was one.
fn delete_matching(
    client: &mut Client,
    pattern: &str,
    json: bool,
    progress: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let re = include_list(pattern).map_err(anyhow::Error::msg)?;
    let metadata = metadata(client, None)?;
    let mut names: Vec<&str> = metadata
        .topics
        .iter()
        // Internal topics (__consumer_offsets) are never deleted by a pattern: a broker
        // refuses it anyway, and `.*` must not try.
        .filter(|t| t.error_code == 0 && !t.is_internal)
        .filter_map(|t| t.name.as_deref())
        .filter(|name| re.is_match(name))
        .collect();
    names.sort_unstable();
    if names.is_empty() {
        return Err(not_found(pattern).into());
    }
    let mut progress = Progress::stderr("topics deleted", names.len() as u64, progress);
    let mut failed = 0usize;
    for chunk in names.chunks(DELETE_BATCH_TOPICS) {
        for (name, error) in delete_topics(client, chunk)? {
            match error {
                None => print_deleted(&name, json, out)?,
                Some(error) => {
                    failed += 1;
                    eprintln!("error: {error}");
                }
            }
        }
        out.flush()?;
        progress.advance(chunk.len() as u64);
    }
    progress.finish();
    if failed > 0 {
        bail!(
            "{failed} of {} matching topic(s) could not be deleted",
            names.len()
        );
    }
    Ok(())
}

/// kafka-topics.sh `--alter --partitions N`: raises the topic's partition count to `count`.
fn create_partitions(
    client: &mut Client,
    topic: &str,
    count: i32,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let version = client.version(ApiKey::CreatePartitions, 0, i16::MAX)?;
    let request = CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic {
            name: topic.to_owned(),
            count,
            assignments: None,
            ..Default::default()
        }],
        timeout_ms: REQUEST_TIMEOUT_MS,
        validate_only: false,
        ..Default::default()
    };
    let resp: CreatePartitionsResponse =
        client.request(ApiKey::CreatePartitions, version, &request)?;
    let Some(result) = resp.results.iter().find(|r| r.name == topic) else {
        bail!("CreatePartitions response does not mention {topic}");
    };
    if result.error_code != 0 {
        return Err(kafka_error(topic, result.error_code, result.error_message.as_deref()).into());
    }
    if json {
        writeln!(out, "{}", json!({ "altered": topic, "partitions": count }))?;
    } else {
        writeln!(out, "Altered topic {topic}: {count} partitions.")?;
    }
    Ok(())
}

/// `broker topics ...`, with kafka-topics.sh's flags.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TopicsCommand {
    /// Creates a topic.
    Create {
        #[command(flatten)]
        common: CommonProgressArgs,
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
        common: CommonProgressArgs,
    },
    /// Prints partitions, leaders, replicas, ISR and non-default configs of one topic, of the
    /// topics a regular expression matches, or of every topic.
    Describe {
        #[command(flatten)]
        common: CommonProgressArgs,
        /// A topic name, or a regular expression over whole names.
        #[arg(long)]
        topic: Option<String>,
    },
    /// Deletes a topic, or every topic a regular expression matches.
    Delete {
        #[command(flatten)]
        common: CommonProgressArgs,
        /// A topic name, or a regular expression over whole names.
        #[arg(long)]
        topic: String,
    },
    /// Raises a topic's partition count (kafka-topics.sh --alter --partitions).
    Alter {
        #[command(flatten)]
        common: CommonProgressArgs,
        #[arg(long)]
        topic: String,
        /// The new partition count.
        #[arg(long)]
        partitions: i32,
    },
    /// Sets and removes a topic's config overrides (kafka-configs.sh --alter).
    AlterConfig {
        #[command(flatten)]
        common: CommonProgressArgs,
        #[arg(long)]
        topic: String,
        /// `k1=v1,k2=[v1,v2]`: overrides to set; repeatable.
        #[arg(long = "add-config", value_name = "K=V,...", value_parser = configs::AddConfig::parse)]
        add_config: Vec<configs::AddConfig>,
        /// A Java properties file of overrides to set (`k=v` lines, `#` comments), before
        /// those of --add-config.
        #[arg(long = "add-config-file", value_name = "FILE")]
        add_config_file: Option<std::path::PathBuf>,
        /// `k1,k2`: overrides to remove; repeatable.
        #[arg(long = "delete-config", value_name = "K,...", value_parser = configs::parse_delete_config)]
        delete_config: Vec<configs::DeleteConfig>,
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
            TopicsCommand::Alter {
                common,
                topic,
                partitions,
            } => (common, Action::Alter { topic, partitions }),
            TopicsCommand::AlterConfig {
                common,
                topic,
                add_config,
                add_config_file,
                delete_config,
            } => {
                let mut adds = match add_config_file {
                    Some(path) => read_config_file(&path)?,
                    None => Vec::new(),
                };
                adds.extend(add_config.into_iter().flat_map(|a| a.0));
                (
                    common,
                    Action::AlterConfig {
                        topic,
                        adds,
                        deletes: delete_config.into_iter().flat_map(|d| d.0).collect(),
                    },
                )
            }
        };
        run(
            common.bootstrap_server(),
            &action,
            common.json(),
            common.progress,
            out,
        )
    }
}

/// The overrides of an `--add-config-file`: a Java properties file.
fn read_config_file(path: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the config file {}", path.display()))?;
    let pairs = config::parse_properties(&path.display().to_string(), &text)?;
    Ok(pairs
        .into_iter()
        .map(|(key, value, _)| (key, value))
        .collect())
}
