//! Broker and topic configuration, in Kafka's `server.properties` format and key names.
//!
//! Everything is driven by two tables of [`Spec`]s in [`keys`] ([`BROKER_KEYS`],
//! [`TOPIC_KEYS`]): name, Kafka `ConfigType`, default, validator, documentation, whether it can
//! change at run time, and (for topic keys) the broker key that provides the default, the same
//! mapping Kafka's `LogConfig` uses (`segment.bytes` <- `log.segment.bytes`, ...). Parsing
//! ([`broker`], [`topic`]), validation ([`validate`]), DescribeConfigs ([`describe`]),
//! AlterConfigs / IncrementalAlterConfigs ([`alter`]) and `docs/configuration.md` ([`docs`]) all
//! read the tables. Adding a key is one table row; a key the broker acts on also gets a typed
//! field in [`BrokerConfig`] or [`TopicConfig`] and one line in its builder.
//!
//! Modules: `keys` (the broker table and lookups; `rows` what a row is, `topic_keys` the topic
//! table), `validate` (one value against its row), `properties` (Java
//! properties syntax), `listeners`, `quorum` (KRaft roles and quorum keys, Kafka's rules),
//! `broker` (typed broker config, built once at start),
//! `topic` (typed topic config, built once per partition open and per config change),
//! `describe` (DescribeConfigs entries with sources and synonyms), `alter` (override-set
//! changes), `docs` (the generated key reference).
//!
//! Defaults alone give an embedded single node: `node.id=1`,
//! `listeners=PLAINTEXT://127.0.0.1:9092` (Kafka's default binds all interfaces; we don't, on
//! purpose) and `log.dirs=./data`. Without `process.roles` that node is a combined broker and
//! controller that is its own quorum; with it, Kafka's KRaft rules apply (`quorum`).
//!
//! Example `server.properties`:
//!
//! ```properties
//! # identity
//! node.id=1
//! listeners=PLAINTEXT://:9092
//! advertised.listeners=PLAINTEXT://broker1.example.com:9092
//! log.dirs=/var/lib/broker/data
//! # 0 = one shard per CPU core
//! num.shards=0
//! num.partitions=3
//! log.segment.bytes=1073741824
//! log.retention.hours=168
//! # ack: fsync before acknowledging produce; replication: rely on replicas (Kafka's model)
//! log.flush.policy=ack
//! # accepted and ignored (Kafka thread pools do not apply to a thread-per-core broker)
//! num.network.threads=3
//! ```

mod alter;
mod authorizer;
mod broker;
mod consumer_group;
mod describe;
mod docs;
mod error;
mod keys;
mod listeners;
pub mod log_levels;
mod properties;
mod quorum;
mod rows;
mod sasl;
mod ssl;
mod topic;
mod topic_keys;
mod validate;

#[cfg(test)]
mod tests;

pub use alter::{
    alter_broker_overrides, alter_topic_overrides, incremental_alter_broker_overrides,
    incremental_alter_topic_overrides, AlterError, AlterOp,
};
pub use authorizer::{AuthorizerSettings, STANDARD_AUTHORIZER};
pub use broker::{
    from_pairs, load, validate_broker_overrides, BrokerConfig, GroupConfig, ReplicationConfig,
    TxnConfig,
};
pub use consumer_group::{Assignor, ConsumerGroupConfig, ASSIGNOR_NAMES};
pub use describe::{describe_broker, describe_topic, ConfigEntry, ConfigSource, ConfigSynonym};
pub use docs::render_markdown;
pub use error::ConfigError;
pub use keys::{
    find_broker_key, find_topic_key, Check, ConfigType, Spec, BROKER_KEYS, IGNORED_KEYS, TOPIC_KEYS,
};
pub use listeners::{parse_http_listener, parse_listeners, Listener, SecurityProtocol};
pub use properties::parse_properties;
pub use quorum::{
    parse_bootstrap_servers, parse_roles, parse_voters, ControllerListener, HostPort, ProcessRoles,
    QuorumConfig, QuorumError, Voter,
};
pub use sasl::{
    jaas_key, OAuthBearerConfig, SaslConfig, JAAS_SUFFIX as SASL_JAAS_SUFFIX,
    LISTENER_PREFIX as SASL_LISTENER_PREFIX, SERVED_MECHANISMS,
};
pub use ssl::{ClientAuth, SslConfig, TlsVersion};
pub use topic::{
    resolve, topic_key_names, validate_topic_overrides, CleanupPolicy, CompressionType,
    FlushPolicy, TimestampType, TopicConfig,
};
