//! DescribeConfigs entries, as Kafka answers them: the value in force, its source, read-only
//! and sensitive flags, type, documentation, and the synonyms in precedence order (the topic
//! override, then the broker keys that would supply it: explicitly set first, then defaults).

use std::collections::BTreeMap;

use super::broker::BrokerConfig;
use super::keys::{family, find, ConfigType, Spec, BROKER_KEYS, TOPIC_KEYS};
use super::topic::topic_value;

/// Kafka's DescribeConfigsResponse `ConfigSource` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

/// One synonym of a config: a key that supplies (or would supply) its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
}

/// One DescribeConfigs result entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub config_type: ConfigType,
    pub documentation: Option<String>,
    /// In Kafka's order: the entry's own source first.
    pub synonyms: Vec<ConfigSynonym>,
}

impl ConfigEntry {
    fn new(spec: &Spec, value: Option<String>, source: ConfigSource) -> ConfigEntry {
        ConfigEntry {
            name: spec.name.to_string(),
            value,
            source,
            read_only: !spec.dynamic,
            sensitive: spec.ty == ConfigType::Password,
            config_type: spec.ty,
            documentation: Some(spec.doc.to_string()),
            synonyms: Vec::new(),
        }
    }
}

/// The broker-side synonyms of broker key `key`: each key of its family set dynamically for
/// this broker (DYNAMIC_BROKER_CONFIG), then cluster-wide (DYNAMIC_DEFAULT_BROKER_CONFIG),
/// then statically (STATIC_BROKER_CONFIG), then each with a default (DEFAULT_CONFIG), as Kafka
/// lists them.
fn broker_synonyms(broker: &BrokerConfig, key: &'static str) -> Vec<ConfigSynonym> {
    let keys = family(key);
    let layer = |map: &BTreeMap<String, String>, source: ConfigSource| {
        keys.iter()
            .filter_map(|k| {
                map.get(*k).map(|v| ConfigSynonym {
                    name: k.to_string(),
                    value: Some(v.clone()),
                    source,
                })
            })
            .collect::<Vec<_>>()
    };
    let set = layer(&broker.dynamic_node, ConfigSource::DynamicBroker)
        .into_iter()
        .chain(layer(
            &broker.dynamic_cluster,
            ConfigSource::DynamicDefaultBroker,
        ))
        .chain(layer(&broker.explicit, ConfigSource::StaticBroker));
    let defaults = keys.iter().filter_map(|k| {
        find(BROKER_KEYS, k)
            .and_then(|s| s.default)
            .map(|v| ConfigSynonym {
                name: k.to_string(),
                value: Some(v.to_string()),
                source: ConfigSource::Default,
            })
    });
    set.chain(defaults).collect()
}

/// DescribeConfigs for a topic: every topic key with the value in force and its source.
pub fn describe_topic(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    TOPIC_KEYS
        .iter()
        .map(|spec| {
            let (value, source) = topic_value(broker, overrides, spec);
            let mut entry = ConfigEntry::new(spec, value, source);
            if let Some(v) = overrides.get(spec.name) {
                entry.synonyms.push(ConfigSynonym {
                    name: spec.name.to_string(),
                    value: Some(v.trim().to_string()),
                    source: ConfigSource::DynamicTopic,
                });
            }
            if let Some(bk) = spec.broker_key.filter(|bk| find(BROKER_KEYS, bk).is_some()) {
                entry.synonyms.extend(broker_synonyms(broker, bk));
            }
            entry
        })
        .collect()
}

/// DescribeConfigs for the broker: every broker key we know, with its own value (not folded
/// from its family) and the family's synonyms from the key itself on (Kafka's `dropWhile`).
pub fn describe_broker(broker: &BrokerConfig) -> Vec<ConfigEntry> {
    BROKER_KEYS
        .iter()
        .map(|spec| {
            let source = broker.source_of_key(spec.name);
            let mut entry =
                ConfigEntry::new(spec, broker.raw(spec.name).map(str::to_string), source);
            entry.synonyms = broker_synonyms(broker, spec.name)
                .into_iter()
                .skip_while(|s| s.name != spec.name)
                .collect();
            entry
        })
        .collect()
}
