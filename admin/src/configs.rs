//! Topic configs over the Kafka protocol: DescribeConfigs for `topics describe`'s `Configs:`
//! column (every config not at its default, as kafka-topics.sh prints it), and
//! `topics alter-config --add-config k=v,k2=v2 --delete-config k` with kafka-configs.sh's flags
//! and checks: IncrementalAlterConfigs where the broker has it, else AlterConfigs with the
//! topic's current overrides read first (AlterConfigs replaces the whole override set).

use std::collections::{BTreeMap, HashMap};

use anyhow::bail;
use wire::generated::api::ApiKey;
use wire::generated::describe_configs_request::DescribeConfigsResource;
use wire::generated::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::client::{error_message, error_name, Client};

/// ConfigResource type TOPIC.
const RESOURCE_TOPIC: i8 = 2;
/// ConfigSource ids (DescribeConfigs v1+).
const SOURCE_DYNAMIC_TOPIC_CONFIG: i8 = 1;
const SOURCE_DEFAULT_CONFIG: i8 = 5;
/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
/// Topics described per DescribeConfigs request: each brings every config of its topic
/// (~40 entries), so a describe of every topic is split to keep each response a few MiB.
pub const DESCRIBE_CONFIGS_BATCH_TOPICS: usize = 500;

/// One config of a topic as the broker described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// `None` for a sensitive value.
    pub value: Option<String>,
    /// Not at its default (kafka-topics.sh's `!isDefault`: any source but DEFAULT_CONFIG).
    pub non_default: bool,
    /// A per-topic override (source DYNAMIC_TOPIC_CONFIG), which alter-config may delete.
    pub dynamic: bool,
}

/// A Kafka error for one resource, printed as kafka-configs.sh's errors are.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {message} (topic {topic})")]
pub struct ConfigError {
    pub topic: String,
    pub name: String,
    pub message: String,
}

fn config_error(topic: &str, code: i16, message: Option<&str>) -> ConfigError {
    ConfigError {
        topic: topic.to_owned(),
        name: error_name(code),
        message: message.unwrap_or_else(|| error_message(code)).to_owned(),
    }
}

/// The configs of each of `topics`, by topic; `None` when the broker has no DescribeConfigs.
pub fn describe_topics(
    client: &mut Client,
    topics: &[&str],
) -> anyhow::Result<Option<HashMap<String, Vec<Entry>>>> {
    if !client.supports(ApiKey::DescribeConfigs) {
        return Ok(None);
    }
    let version = client.version(ApiKey::DescribeConfigs, 0, i16::MAX)?;
    let mut all = HashMap::with_capacity(topics.len());
    for chunk in topics.chunks(DESCRIBE_CONFIGS_BATCH_TOPICS) {
        let request = DescribeConfigsRequest {
            resources: chunk
                .iter()
                .map(|name| DescribeConfigsResource {
                    resource_type: RESOURCE_TOPIC,
                    resource_name: (*name).to_owned(),
                    configuration_keys: None,
                    ..Default::default()
                })
                .collect(),
            include_synonyms: false,
            include_documentation: false,
            ..Default::default()
        };
        let resp: DescribeConfigsResponse =
            client.request(ApiKey::DescribeConfigs, version, &request)?;
        for result in resp.results {
            if result.error_code != 0 {
                return Err(config_error(
                    &result.resource_name,
                    result.error_code,
                    result.error_message.as_deref(),
                )
                .into());
            }
            let entries = result
                .configs
                .into_iter()
                .map(|c| {
                    // v0 has no source, only is_default (and an override is not read-only).
                    let (non_default, dynamic) = if version == 0 {
                        (!c.is_default, !c.is_default && !c.read_only)
                    } else {
                        (
                            c.config_source != SOURCE_DEFAULT_CONFIG,
                            c.config_source == SOURCE_DYNAMIC_TOPIC_CONFIG,
                        )
                    };
                    Entry {
                        name: c.name,
                        value: c.value,
                        non_default,
                        dynamic,
                    }
                })
                .collect();
            all.insert(result.resource_name, entries);
        }
    }
    Ok(Some(all))
}

/// kafka-topics.sh's `Configs:` value: `name=value` of every non-default config, joined by
/// commas, in the broker's order (a sensitive value prints as `null`, as Kafka's does).
pub fn configs_column(entries: &[Entry]) -> String {
    entries
        .iter()
        .filter(|e| e.non_default)
        .map(|e| format!("{}={}", e.name, e.value.as_deref().unwrap_or("null")))
        .collect::<Vec<_>>()
        .join(",")
}

/// One `--add-config` flag's pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddConfig(pub Vec<(String, String)>);

impl AddConfig {
    pub fn parse(spec: &str) -> Result<AddConfig, String> {
        parse_add_config(spec).map(AddConfig)
    }
}

/// One `--delete-config` flag's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteConfig(pub Vec<String>);

/// Parses kafka-configs.sh's `--add-config`: `k1=v1,k2=[v1,v2,v3],k3=v3`. Commas inside
/// square brackets belong to the value, and the brackets are dropped; keys and values are
/// trimmed; an empty value is allowed (`k=`); a key has only `[a-zA-Z0-9._-]`.
pub fn parse_add_config(spec: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for item in split_outside_brackets(spec, ',') {
        let parts = split_outside_brackets(item, '=');
        let [key, value] = parts.as_slice() else {
            return Err(
                "Invalid entity config: all configs to be added must be in the format \"key=val\"."
                    .to_owned(),
            );
        };
        let key = key.trim();
        if !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(format!("Invalid character found for config key: {key}"));
        }
        let value: String = value.chars().filter(|c| !matches!(c, '[' | ']')).collect();
        pairs.push((key.to_owned(), value.trim().to_owned()));
    }
    Ok(pairs)
}

/// Splits on `sep` where it is not between `[` and `]`.
fn split_outside_brackets(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0u32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            c if c == sep && depth == 0 => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Parses kafka-configs.sh's `--delete-config k1,k2` (repeatable).
pub fn parse_delete_config(spec: &str) -> Result<DeleteConfig, String> {
    Ok(DeleteConfig(
        spec.split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect(),
    ))
}

/// Which request an alter-config used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterApi {
    Incremental,
    /// AlterConfigs with the whole override set (the broker lacks IncrementalAlterConfigs).
    Legacy,
}

impl AlterApi {
    pub fn name(self) -> &'static str {
        match self {
            AlterApi::Incremental => "IncrementalAlterConfigs",
            AlterApi::Legacy => "AlterConfigs",
        }
    }
}

/// Sets `adds` and removes `deletes` on `topic`'s overrides, checking first (as
/// kafka-configs.sh does) that every key to delete is an override of the topic.
pub fn alter_topic(
    client: &mut Client,
    topic: &str,
    adds: &[(String, String)],
    deletes: &[String],
) -> anyhow::Result<AlterApi> {
    let api = if client.supports(ApiKey::IncrementalAlterConfigs) {
        AlterApi::Incremental
    } else if client.supports(ApiKey::AlterConfigs) {
        AlterApi::Legacy
    } else {
        bail!("the broker supports neither IncrementalAlterConfigs nor AlterConfigs");
    };
    if !client.supports(ApiKey::DescribeConfigs) {
        bail!("the broker does not support DescribeConfigs, needed to read the topic's configs");
    }
    let current = describe_topics(client, &[topic])?
        .and_then(|mut all| all.remove(topic))
        .unwrap_or_default();
    let overrides: BTreeMap<&str, Option<&str>> = current
        .iter()
        .filter(|e| e.dynamic)
        .map(|e| (e.name.as_str(), e.value.as_deref()))
        .collect();
    let invalid: Vec<&str> = deletes
        .iter()
        .map(String::as_str)
        .filter(|k| !overrides.contains_key(k))
        .collect();
    if !invalid.is_empty() {
        return Err(ConfigError {
            topic: topic.to_owned(),
            name: "INVALID_CONFIG".to_owned(),
            message: format!("Invalid config(s): {}", invalid.join(",")),
        }
        .into());
    }
    let (code, message) = match api {
        AlterApi::Incremental => {
            let version = client.version(ApiKey::IncrementalAlterConfigs, 0, i16::MAX)?;
            let configs = adds
                .iter()
                .map(|(k, v)| (k, OP_SET, Some(v.clone())))
                .chain(deletes.iter().map(|k| (k, OP_DELETE, None)))
                .map(
                    |(name, op, value)| incremental_alter_configs_request::AlterableConfig {
                        name: name.clone(),
                        config_operation: op,
                        value,
                        ..Default::default()
                    },
                )
                .collect();
            let request = IncrementalAlterConfigsRequest {
                resources: vec![incremental_alter_configs_request::AlterConfigsResource {
                    resource_type: RESOURCE_TOPIC,
                    resource_name: topic.to_owned(),
                    configs,
                    ..Default::default()
                }],
                validate_only: false,
                ..Default::default()
            };
            let resp: IncrementalAlterConfigsResponse =
                client.request(ApiKey::IncrementalAlterConfigs, version, &request)?;
            first_outcome(
                resp.responses
                    .into_iter()
                    .map(|r| (r.resource_name, r.error_code, r.error_message)),
                topic,
            )?
        }
        AlterApi::Legacy => {
            let mut wanted: BTreeMap<&str, Option<&str>> = overrides.clone();
            for k in deletes {
                wanted.remove(k.as_str());
            }
            for (k, v) in adds {
                wanted.insert(k, Some(v));
            }
            let hidden: Vec<&str> = wanted
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(k, _)| *k)
                .collect();
            if !hidden.is_empty() {
                // The broker hides sensitive values, and AlterConfigs would drop them.
                bail!(
                    "the broker has no IncrementalAlterConfigs and these sensitive overrides \
                     of {topic} cannot be kept by AlterConfigs: {}",
                    hidden.join(",")
                );
            }
            let version = client.version(ApiKey::AlterConfigs, 0, i16::MAX)?;
            let request = AlterConfigsRequest {
                resources: vec![alter_configs_request::AlterConfigsResource {
                    resource_type: RESOURCE_TOPIC,
                    resource_name: topic.to_owned(),
                    configs: wanted
                        .iter()
                        .map(|(k, v)| alter_configs_request::AlterableConfig {
                            name: (*k).to_owned(),
                            value: v.map(str::to_owned),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                validate_only: false,
                ..Default::default()
            };
            let resp: AlterConfigsResponse =
                client.request(ApiKey::AlterConfigs, version, &request)?;
            first_outcome(
                resp.responses
                    .into_iter()
                    .map(|r| (r.resource_name, r.error_code, r.error_message)),
                topic,
            )?
        }
    };
    if code != 0 {
        return Err(config_error(topic, code, message.as_deref()).into());
    }
    Ok(api)
}

fn first_outcome(
    mut results: impl Iterator<Item = (String, i16, Option<String>)>,
    topic: &str,
) -> anyhow::Result<(i16, Option<String>)> {
    match results.find(|(name, _, _)| name == topic) {
        Some((_, code, message)) => Ok((code, message)),
        None => bail!("the response does not mention topic {topic}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_broker;
    use bytes::BytesMut;
    use std::sync::{mpsc, Mutex};
    use wire::generated::alter_configs_response::AlterConfigsResourceResponse;
    use wire::generated::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };
    use wire::primitives::{Decodable, Encodable};

    /// A broker without IncrementalAlterConfigs: answers ApiVersions, DescribeConfigs (topic
    /// `t` with two overrides and a default) and AlterConfigs, sending the AlterConfigs
    /// request it got to `seen`.
    fn legacy_broker(seen: mpsc::Sender<AlterConfigsRequest>) -> String {
        let seen = Mutex::new(seen);
        fake_broker::spawn(move |mut request, out: &mut BytesMut| {
            let version = request.version;
            match request.key {
                ApiKey::ApiVersions => fake_broker::api_versions(&[
                    (ApiKey::ApiVersions, 0, 3),
                    (ApiKey::DescribeConfigs, 0, 4),
                    (ApiKey::AlterConfigs, 0, 2),
                ])
                .encode(out, version),
                ApiKey::DescribeConfigs => {
                    let entry = |name: &str, value: &str, source| DescribeConfigsResourceResult {
                        name: name.to_owned(),
                        value: Some(value.to_owned()),
                        config_source: source,
                        ..Default::default()
                    };
                    DescribeConfigsResponse {
                        results: vec![DescribeConfigsResult {
                            resource_type: RESOURCE_TOPIC,
                            resource_name: "t".to_owned(),
                            configs: vec![
                                entry("retention.ms", "5", SOURCE_DYNAMIC_TOPIC_CONFIG),
                                entry("segment.bytes", "1024", SOURCE_DEFAULT_CONFIG),
                                entry("max.message.bytes", "7", SOURCE_DYNAMIC_TOPIC_CONFIG),
                            ],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }
                    .encode(out, version)
                }
                ApiKey::AlterConfigs => {
                    let alter = AlterConfigsRequest::decode(&mut request.body, version).unwrap();
                    seen.lock().unwrap().send(alter).unwrap();
                    AlterConfigsResponse {
                        responses: vec![AlterConfigsResourceResponse {
                            resource_type: RESOURCE_TOPIC,
                            resource_name: "t".to_owned(),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }
                    .encode(out, version)
                }
                other => panic!("unexpected {other:?}"),
            }
            .unwrap();
            true
        })
    }

    #[test]
    fn without_incremental_alter_configs_the_whole_override_set_is_sent() {
        let (tx, rx) = mpsc::channel();
        let mut client = Client::connect(&legacy_broker(tx)).unwrap();
        let api = alter_topic(
            &mut client,
            "t",
            &[("cleanup.policy".to_owned(), "compact".to_owned())],
            &["retention.ms".to_owned()],
        )
        .unwrap();
        assert_eq!(api, AlterApi::Legacy);
        let request = rx.recv().unwrap();
        let sent: Vec<(String, Option<String>)> = request.resources[0]
            .configs
            .iter()
            .map(|c| (c.name.clone(), c.value.clone()))
            .collect();
        // The other override is kept, the deleted one dropped, the default not pinned.
        assert_eq!(
            sent,
            vec![
                ("cleanup.policy".to_owned(), Some("compact".to_owned())),
                ("max.message.bytes".to_owned(), Some("7".to_owned())),
            ]
        );
        // A key that is no override is refused before anything is altered.
        let err = alter_topic(&mut client, "t", &[], &["segment.bytes".to_owned()]).unwrap_err();
        assert!(
            err.to_string().contains("Invalid config(s): segment.bytes"),
            "{err}"
        );
        assert!(rx.try_recv().is_err());
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn add_config_as_kafka_configs_parses_it() {
        assert_eq!(
            parse_add_config("retention.ms=1000, cleanup.policy=[compact,delete],x=").unwrap(),
            pairs(&[
                ("retention.ms", "1000"),
                ("cleanup.policy", "compact,delete"),
                ("x", "")
            ])
        );
        assert_eq!(parse_add_config(" a = b ").unwrap(), pairs(&[("a", "b")]));
        assert!(parse_add_config("novalue").is_err());
        assert!(parse_add_config("a=b=c").is_err());
        let err = parse_add_config("bad key=1").unwrap_err();
        assert!(err.contains("Invalid character"), "{err}");
    }

    #[test]
    fn delete_config_splits_on_commas() {
        assert_eq!(
            parse_delete_config("a, b,,c").unwrap().0,
            vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]
        );
    }

    #[test]
    fn configs_column_lists_non_defaults_in_order() {
        let e = |name: &str, value: Option<&str>, non_default| Entry {
            name: name.to_owned(),
            value: value.map(str::to_owned),
            non_default,
            dynamic: non_default,
        };
        let entries = [
            e("cleanup.policy", Some("delete"), false),
            e("retention.ms", Some("1000"), true),
            e("secret", None, true),
        ];
        assert_eq!(configs_column(&entries), "retention.ms=1000,secret=null");
        assert_eq!(configs_column(&[]), "");
    }
}
