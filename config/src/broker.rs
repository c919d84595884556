//! The typed broker configuration, built once at start from `server.properties` and
//! `--override key=value` pairs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::authorizer::AuthorizerSettings;
use super::describe::ConfigSource;
use super::keys::{find, BROKER_KEYS, FAMILIES, IGNORED_KEYS, LONG_MAX};
use super::listeners::{parse_listeners, parse_protocol_map, Listener, DEFAULT_PROTOCOL_MAP};
use super::properties::list_items;
use super::properties::parse_properties;
use super::sasl::SaslConfig;
use super::ssl::SslConfig;
use super::topic::FlushPolicy;
use super::validate::check_value;
use super::ConfigError;

/// The group coordinator's settings, Kafka's keys and defaults.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    pub offsets_topic_num_partitions: i32,
    pub offsets_topic_segment_bytes: u64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offset_metadata_max_bytes: usize,
    pub initial_rebalance_delay_ms: u64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    /// KIP-848 consumer groups (`group.consumer.*`).
    pub consumer: crate::ConsumerGroupConfig,
}

/// The transaction coordinator's settings, Kafka's keys and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    pub state_log_num_partitions: i32,
    pub state_log_segment_bytes: u64,
    pub max_timeout_ms: i32,
    pub abort_timed_out_interval_ms: u64,
    pub id_expiration_ms: i64,
    pub remove_expired_interval_ms: u64,
}

/// The replication settings of a broker (Kafka's keys and defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicationConfig {
    pub lag_time_max_ms: i64,
    pub fetch_wait_max_ms: i32,
    pub fetch_max_bytes: i32,
    pub fetch_response_max_bytes: i32,
    pub fetchers: i32,
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`, in milliseconds.
    pub leader_imbalance_check_interval_ms: u64,
    /// `unclean.leader.election.enable`: the broker's default for topics.
    pub unclean_leader_election: bool,
}

/// Typed broker configuration. Effective values: aliases and unit variants are already folded
/// (e.g. `log_roll_ms` comes from log.roll.ms or log.roll.hours).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub node_id: i32,
    /// `process.roles`, the quorum's keys and the controller listener (see `quorum`).
    pub quorum: crate::QuorumConfig,
    /// `metadata.log.dir` (see [`BrokerConfig::metadata_log_dir`]).
    pub metadata_log_dir: Option<PathBuf>,
    /// The listeners the broker serves the Kafka API on: `listeners` less the controller
    /// listeners (Kafka's data-plane listeners), which belong to the quorum
    /// (`quorum.controller_listener`).
    pub listeners: Vec<Listener>,
    /// Matched to `listeners` by name (see [`BrokerConfig::advertised_for`]); controller
    /// listeners left out, as Kafka's `effectiveAdvertisedBrokerListeners`.
    pub advertised_listeners: Vec<Listener>,
    /// The SSL listeners' `ssl.*` settings.
    pub ssl: SslConfig,
    /// The SASL listeners' `sasl.*` settings and JAAS configurations.
    pub sasl: SaslConfig,
    /// `authorizer.class.name` and its settings; `None` = no authorization.
    pub authorizer: Option<AuthorizerSettings>,
    /// `ssl.principal.mapping.rules`, raw (parsed at start-up by the `acl` crate).
    pub ssl_principal_mapping_rules: String,
    /// All configured dirs; only `log_dirs[0]` is used (see [`BrokerConfig::data_dir`]).
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub log_segment_bytes: u64,
    pub log_roll_ms: u64,
    pub log_index_interval_bytes: u32,
    pub log_index_size_max_bytes: u32,
    pub message_max_bytes: u32,
    pub socket_request_max_bytes: u32,
    /// Caps every Fetch request's `max_bytes` (Kafka's `fetch.max.bytes`).
    pub fetch_max_bytes: u32,
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions kept, all shards together.
    pub max_incremental_fetch_session_cache_slots: u32,
    /// -1 = unlimited.
    pub log_retention_ms: i64,
    /// -1 = unlimited.
    pub log_retention_bytes: i64,
    /// `log.retention.check.interval.ms`: period of the retention timer of every shard.
    pub log_retention_check_interval_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: the cleaners' key-map memory (all shards together).
    pub log_cleaner_dedupe_buffer_size: u64,
    /// `log.cleaner.backoff.ms`: a shard's cleaner sleeps this long when nothing is due.
    pub log_cleaner_backoff_ms: u64,
    /// `log.fd.cache.size` (ours): log file descriptors held open, all shards together.
    pub log_fd_cache_size: u32,
    /// Replication (issue 21): `replica.lag.time.max.ms`, `replica.fetch.wait.max.ms`,
    /// `replica.fetch.max.bytes`, `replica.fetch.response.max.bytes`, `num.replica.fetchers`.
    pub replication: ReplicationConfig,
    pub log_flush_interval_messages: u64,
    /// `None` = never flush on a timer.
    pub log_flush_interval_ms: Option<u64>,
    pub log_flush_policy: FlushPolicy,
    pub delete_topic_enable: bool,
    /// 0 = one shard per CPU core.
    pub num_shards: u16,
    pub cluster_id: Option<String>,
    /// Idle connections are closed after this long; `None` = never.
    pub connections_max_idle_ms: Option<u64>,
    /// `shard.busy.poll.us` (ours): see `busy_poll`; 0 = a shard parks as soon as it is idle.
    pub shard_busy_poll_us: u64,
    /// Before the file-descriptor cap (see `limits::ConnectionLimits`).
    pub max_connections: u32,
    pub max_connections_per_ip: u32,
    /// Per connection (see `limits::ConnectionLoad`).
    pub queued_max_requests: u32,
    /// `fetch.path=copy`: fetched records are read into memory and copied into the response
    /// (the pre-zero-copy path, kept to measure what sendfile buys).
    pub fetch_copy: bool,
    /// `connection.handoff.enable` (ours): plaintext connections move to the shard owning
    /// what they touch (see `handoff`).
    pub connection_handoff_enable: bool,
    /// `log.format`.
    pub log_format: crate::log_levels::LogFormat,
    /// `log.level`, parsed (RUST_LOG may still win at start, see `logging`).
    pub log_levels: crate::log_levels::LoggerLevels,
    /// `metrics.listener` (ours): `host:port` of the Prometheus endpoint; `None` = off.
    pub metrics_listener: Option<String>,
    /// Per shard; <= 0 = `limits::DEFAULT_SHARD_PENDING_BYTES`.
    pub queued_max_request_bytes: i64,
    /// Group coordinator settings (`offsets.*`, `group.*`).
    pub groups: GroupConfig,
    pub transactions: TxnConfig,
    /// Ignored Kafka keys that were present (for the startup log / tests).
    pub ignored: Vec<String>,
    /// Keys explicitly set (file or overrides), canonical spelling, raw values.
    pub(super) explicit: BTreeMap<String, String>,
    /// Dynamic broker configs (ConfigRecords of the broker resource, see
    /// [`BrokerConfig::with_dynamic`]): this node's, then the cluster-wide defaults.
    pub(super) dynamic_node: BTreeMap<String, String>,
    pub(super) dynamic_cluster: BTreeMap<String, String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self::from_explicit(BTreeMap::new(), Vec::new()).expect("defaults are valid")
    }
}

/// Checks dynamic broker configs (AlterConfigs on the broker resource) against their rows.
pub fn validate_broker_overrides(overrides: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    for (k, v) in overrides {
        let spec =
            find(BROKER_KEYS, k).ok_or_else(|| ConfigError::UnknownKey { key: k.clone() })?;
        check_value(spec, v)?;
    }
    Ok(())
}

/// Loads the properties file (if any), then applies `key=value` overrides (command line).
pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<BrokerConfig, ConfigError> {
    let mut entries: Vec<(String, String)> = Vec::new();
    if let Some(p) = path {
        let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
            path: p.to_path_buf(),
            source,
        })?;
        let name = p.display().to_string();
        for (k, v, _line) in parse_properties(&name, &text)? {
            entries.push((k, v));
        }
    }
    for o in overrides {
        let (k, v) = o
            .split_once('=')
            .ok_or_else(|| ConfigError::BadOverride(o.clone()))?;
        entries.push((k.trim().to_string(), v.trim().to_string()));
    }
    from_pairs(entries)
}

/// Builds a config from (key, value) pairs, later pairs winning.
pub fn from_pairs(
    pairs: impl IntoIterator<Item = (String, String)>,
) -> Result<BrokerConfig, ConfigError> {
    let mut explicit = BTreeMap::new();
    let mut ignored = Vec::new();
    for (k, v) in pairs {
        let k = k.trim().to_string();
        if IGNORED_KEYS.contains(&k.as_str()) {
            tracing::info!(key = %k, value = %v, "ignoring Kafka config key (not applicable)");
            if !ignored.contains(&k) {
                ignored.push(k);
            }
            continue;
        }
        // Per-listener JAAS configuration and session bounds: families of keys, not rows of
        // the table.
        if crate::sasl::jaas_key(&k).is_some() || crate::sasl::reauth_key(&k).is_some() {
            explicit.insert(k, v.trim().to_string());
            continue;
        }
        let spec =
            find(BROKER_KEYS, &k).ok_or_else(|| ConfigError::UnknownKey { key: k.clone() })?;
        // Empty value on a null-default key means "unset" (e.g. `cluster.id=`).
        if v.trim().is_empty() && spec.default.is_none() {
            explicit.remove(&k);
            continue;
        }
        check_value(spec, &v)?;
        explicit.insert(k, v.trim().to_string());
    }
    BrokerConfig::from_explicit(explicit, ignored)
}

impl BrokerConfig {
    fn from_explicit(
        explicit: BTreeMap<String, String>,
        ignored: Vec<String>,
    ) -> Result<Self, ConfigError> {
        let get = |k: &str| -> Option<&str> {
            explicit
                .get(k)
                .map(String::as_str)
                .or_else(|| find(BROKER_KEYS, k).and_then(|s| s.default))
        };
        let set = |k: &str| explicit.get(k).map(String::as_str);
        // Values were validated by check_value, so these parses only fail on a table bug;
        // still report rather than panic.
        fn num<N: std::str::FromStr>(k: &str, v: Option<&str>) -> Result<N, ConfigError> {
            let v = v.unwrap_or("");
            v.trim().parse().map_err(|_| ConfigError::InvalidValue {
                key: k.into(),
                value: v.into(),
                expected: "a number".into(),
            })
        }
        let boolean = |k: &str| get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));

        let node_id = match set("node.id").or(set("broker.id")) {
            Some(v) => num("node.id", Some(v))?,
            None => num("node.id", get("node.id"))?,
        };
        let roles = set("process.roles").filter(|r| !list_items(r).is_empty());
        // Kafka's effective map: in KRaft mode with the map left at its default, controller
        // listener names are PLAINTEXT (so `CONTROLLER://:9093` needs no map entry).
        let protocol_map = crate::quorum::effective_protocol_map(
            roles.is_some(),
            set("listener.security.protocol.map"),
            get("listener.security.protocol.map").unwrap_or(DEFAULT_PROTOCOL_MAP),
            &crate::quorum::controller_names(set("controller.listener.names")),
            get("listeners").unwrap_or_default(),
        );
        let protocol_map = protocol_map.as_str();
        let listeners = parse_listeners(
            "listeners",
            get("listeners").unwrap_or_default(),
            protocol_map,
        )?;
        let advertised_listeners = match set("advertised.listeners") {
            Some(v) => {
                let l = parse_listeners("advertised.listeners", v, protocol_map)?;
                // Kafka: advertised listener names are a subset of the listeners' names.
                if let Some(stray) = l
                    .iter()
                    .find(|a| !listeners.iter().any(|l| l.name == a.name))
                {
                    return Err(ConfigError::InvalidValue {
                        key: "advertised.listeners".into(),
                        value: v.into(),
                        expected: format!(
                            "names of listeners (no listener is named {})",
                            stray.name
                        ),
                    });
                }
                if let Some(bad) = l.iter().find(|l| l.host == "0.0.0.0" || l.host == "::") {
                    return Err(ConfigError::InvalidValue {
                        key: "advertised.listeners".into(),
                        value: v.into(),
                        expected: format!("a host clients can connect to, not {}", bad.host),
                    });
                }
                l
            }
            None => listeners.clone(),
        };
        let quorum = crate::quorum::build(crate::quorum::Inputs {
            roles,
            node_id,
            node_id_set: set("node.id").or(set("broker.id")).is_some(),
            voters: set("controller.quorum.voters"),
            bootstrap_servers: set("controller.quorum.bootstrap.servers"),
            controller_listener_names: set("controller.listener.names"),
            listeners: &listeners,
            advertised: set("advertised.listeners").map(|_| advertised_listeners.as_slice()),
            protocol_map: &parse_protocol_map("listener.security.protocol.map", protocol_map)?,
            timings: [
                num(
                    "broker.heartbeat.interval.ms",
                    get("broker.heartbeat.interval.ms"),
                )?,
                num(
                    "broker.session.timeout.ms",
                    get("broker.session.timeout.ms"),
                )?,
                num(
                    "controller.quorum.election.timeout.ms",
                    get("controller.quorum.election.timeout.ms"),
                )?,
                num(
                    "controller.quorum.fetch.timeout.ms",
                    get("controller.quorum.fetch.timeout.ms"),
                )?,
                num(
                    "controller.quorum.election.backoff.max.ms",
                    get("controller.quorum.election.backoff.max.ms"),
                )?,
                num(
                    "controller.quorum.request.timeout.ms",
                    get("controller.quorum.request.timeout.ms"),
                )?,
                num(
                    "controller.quorum.retry.backoff.ms",
                    get("controller.quorum.retry.backoff.ms"),
                )?,
                num(
                    "controller.quorum.append.linger.ms",
                    get("controller.quorum.append.linger.ms"),
                )?,
            ],
        })?;
        // Checked over every listener (ports, names) above; from here the broker's own.
        let broker_only = |all: Vec<Listener>| -> Vec<Listener> {
            all.into_iter()
                .filter(|l| !quorum.is_controller_listener(&l.name))
                .collect()
        };
        let listeners = broker_only(listeners);
        let advertised_listeners = broker_only(advertised_listeners);
        let dirs = set("log.dirs")
            .or(set("log.dir"))
            .or(get("log.dirs"))
            .unwrap_or("./data");
        let log_dirs = list_items(dirs).into_iter().map(PathBuf::from).collect();
        let log_roll_ms = match set("log.roll.ms") {
            Some(v) => num("log.roll.ms", Some(v))?,
            None => num::<u64>("log.roll.hours", get("log.roll.hours"))? * 3_600_000,
        };
        let log_retention_ms: i64 = if let Some(v) = set("log.retention.ms") {
            num("log.retention.ms", Some(v))?
        } else if let Some(v) = set("log.retention.minutes") {
            num::<i64>("log.retention.minutes", Some(v))? * 60_000
        } else {
            num::<i64>("log.retention.hours", get("log.retention.hours"))? * 3_600_000
        };
        let log_flush_interval_ms = match set("log.flush.interval.ms") {
            Some(v) => Some(num("log.flush.interval.ms", Some(v))?),
            None => None,
        };
        Ok(BrokerConfig {
            node_id,
            quorum,
            metadata_log_dir: set("metadata.log.dir")
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            listeners,
            advertised_listeners,
            ssl: SslConfig::from_values(get)?,
            sasl: SaslConfig::from_values(get, &explicit)?,
            authorizer: AuthorizerSettings::from_values(get)?,
            ssl_principal_mapping_rules: get("ssl.principal.mapping.rules")
                .unwrap_or("DEFAULT")
                .trim()
                .to_string(),
            log_dirs,
            num_partitions: num("num.partitions", get("num.partitions"))?,
            default_replication_factor: num::<i32>(
                "default.replication.factor",
                get("default.replication.factor"),
            )?
            .clamp(1, i16::MAX as i32) as i16,
            auto_create_topics_enable: boolean("auto.create.topics.enable"),
            log_segment_bytes: num("log.segment.bytes", get("log.segment.bytes"))?,
            log_roll_ms,
            log_index_interval_bytes: num(
                "log.index.interval.bytes",
                get("log.index.interval.bytes"),
            )?,
            log_index_size_max_bytes: num(
                "log.index.size.max.bytes",
                get("log.index.size.max.bytes"),
            )?,
            message_max_bytes: num("message.max.bytes", get("message.max.bytes"))?,
            socket_request_max_bytes: num(
                "socket.request.max.bytes",
                get("socket.request.max.bytes"),
            )?,
            fetch_max_bytes: num("fetch.max.bytes", get("fetch.max.bytes"))?,
            max_incremental_fetch_session_cache_slots: num(
                "max.incremental.fetch.session.cache.slots",
                get("max.incremental.fetch.session.cache.slots"),
            )?,
            transactions: TxnConfig {
                state_log_num_partitions: num(
                    "transaction.state.log.num.partitions",
                    get("transaction.state.log.num.partitions"),
                )?,
                state_log_segment_bytes: num(
                    "transaction.state.log.segment.bytes",
                    get("transaction.state.log.segment.bytes"),
                )?,
                max_timeout_ms: num(
                    "transaction.max.timeout.ms",
                    get("transaction.max.timeout.ms"),
                )?,
                abort_timed_out_interval_ms: num(
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                    get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                )?,
                id_expiration_ms: num(
                    "transactional.id.expiration.ms",
                    get("transactional.id.expiration.ms"),
                )?,
                remove_expired_interval_ms: num(
                    "transaction.remove.expired.transaction.cleanup.interval.ms",
                    get("transaction.remove.expired.transaction.cleanup.interval.ms"),
                )?,
            },
            groups: GroupConfig {
                offsets_topic_num_partitions: num(
                    "offsets.topic.num.partitions",
                    get("offsets.topic.num.partitions"),
                )?,
                offsets_topic_segment_bytes: num(
                    "offsets.topic.segment.bytes",
                    get("offsets.topic.segment.bytes"),
                )?,
                offsets_retention_ms: num::<i64>(
                    "offsets.retention.minutes",
                    get("offsets.retention.minutes"),
                )? * 60_000,
                offsets_retention_check_interval_ms: num(
                    "offsets.retention.check.interval.ms",
                    get("offsets.retention.check.interval.ms"),
                )?,
                offset_metadata_max_bytes: num(
                    "offset.metadata.max.bytes",
                    get("offset.metadata.max.bytes"),
                )?,
                initial_rebalance_delay_ms: num(
                    "group.initial.rebalance.delay.ms",
                    get("group.initial.rebalance.delay.ms"),
                )?,
                min_session_timeout_ms: num(
                    "group.min.session.timeout.ms",
                    get("group.min.session.timeout.ms"),
                )?,
                max_session_timeout_ms: num(
                    "group.max.session.timeout.ms",
                    get("group.max.session.timeout.ms"),
                )?,
                max_size: num("group.max.size", get("group.max.size"))?,
                consumer: crate::ConsumerGroupConfig {
                    session_timeout_ms: num(
                        "group.consumer.session.timeout.ms",
                        get("group.consumer.session.timeout.ms"),
                    )?,
                    heartbeat_interval_ms: num(
                        "group.consumer.heartbeat.interval.ms",
                        get("group.consumer.heartbeat.interval.ms"),
                    )?,
                    max_size: num("group.consumer.max.size", get("group.consumer.max.size"))?,
                    assignors: get("group.consumer.assignors")
                        .unwrap_or("uniform,range")
                        .split(',')
                        .filter_map(|name| {
                            crate::Assignor::from_name(&name.trim().to_ascii_lowercase())
                        })
                        .collect(),
                },
            },
            log_retention_ms: if log_retention_ms < 0 {
                -1
            } else {
                log_retention_ms
            },
            log_retention_bytes: num("log.retention.bytes", get("log.retention.bytes"))?,
            log_retention_check_interval_ms: num(
                "log.retention.check.interval.ms",
                get("log.retention.check.interval.ms"),
            )?,
            log_cleaner_dedupe_buffer_size: num(
                "log.cleaner.dedupe.buffer.size",
                get("log.cleaner.dedupe.buffer.size"),
            )?,
            log_cleaner_backoff_ms: num("log.cleaner.backoff.ms", get("log.cleaner.backoff.ms"))?,
            log_fd_cache_size: num("log.fd.cache.size", get("log.fd.cache.size"))?,
            replication: ReplicationConfig {
                lag_time_max_ms: num("replica.lag.time.max.ms", get("replica.lag.time.max.ms"))?,
                fetch_wait_max_ms: num(
                    "replica.fetch.wait.max.ms",
                    get("replica.fetch.wait.max.ms"),
                )?,
                fetch_max_bytes: num("replica.fetch.max.bytes", get("replica.fetch.max.bytes"))?,
                fetch_response_max_bytes: num(
                    "replica.fetch.response.max.bytes",
                    get("replica.fetch.response.max.bytes"),
                )?,
                fetchers: num("num.replica.fetchers", get("num.replica.fetchers"))?,
                auto_leader_rebalance: boolean("auto.leader.rebalance.enable"),
                leader_imbalance_check_interval_ms: num::<u64>(
                    "leader.imbalance.check.interval.seconds",
                    get("leader.imbalance.check.interval.seconds"),
                )?
                .saturating_mul(1000),
                unclean_leader_election: boolean("unclean.leader.election.enable"),
            },
            log_flush_interval_messages: num(
                "log.flush.interval.messages",
                get("log.flush.interval.messages"),
            )?,
            log_flush_interval_ms,
            log_flush_policy: FlushPolicy::parse(get("log.flush.policy").unwrap_or("ack"))
                .unwrap_or_default(),
            delete_topic_enable: boolean("delete.topic.enable"),
            num_shards: num("num.shards", get("num.shards"))?,
            cluster_id: set("cluster.id").map(str::to_string),
            shard_busy_poll_us: num("shard.busy.poll.us", get("shard.busy.poll.us"))?,
            connections_max_idle_ms: Some(num::<i64>(
                "connections.max.idle.ms",
                get("connections.max.idle.ms"),
            )?)
            .filter(|ms| *ms > 0)
            .map(|ms| ms as u64),
            max_connections: num("max.connections", get("max.connections"))?,
            max_connections_per_ip: num("max.connections.per.ip", get("max.connections.per.ip"))?,
            queued_max_requests: num("queued.max.requests", get("queued.max.requests"))?,
            fetch_copy: get("fetch.path") == Some("copy"),
            connection_handoff_enable: !matches!(get("connection.handoff.enable"), Some(v) if v.eq_ignore_ascii_case("false")),
            log_format: crate::log_levels::LogFormat::parse(get("log.format").unwrap_or("text"))
                .unwrap_or_default(),
            log_levels: {
                let value = get("log.level").unwrap_or("INFO");
                crate::log_levels::LoggerLevels::parse(value).map_err(|error| {
                    ConfigError::InvalidValue {
                        key: "log.level".into(),
                        value: value.into(),
                        expected: error.to_string(),
                    }
                })?
            },
            metrics_listener: set("metrics.listener")
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .and_then(|v| crate::parse_http_listener(v).ok()),
            queued_max_request_bytes: num(
                "queued.max.request.bytes",
                get("queued.max.request.bytes"),
            )?,
            ignored,
            explicit,
            dynamic_node: BTreeMap::new(),
            dynamic_cluster: BTreeMap::new(),
        })
    }

    /// The address clients are given for brokers on listener `name` (the one a request came
    /// through): its `advertised.listeners` entry (`listeners` when that is unset), else
    /// the listener's own address (Kafka would not advertise it; a single node must still
    /// name itself), else the first advertised listener.
    pub fn advertised_for(&self, name: &str) -> &Listener {
        self.advertised_listeners
            .iter()
            .find(|l| l.name == name)
            .or_else(|| self.listeners.iter().find(|l| l.name == name))
            .unwrap_or(&self.advertised_listeners[0])
    }

    /// The data directory in use (first of log.dirs).
    pub fn data_dir(&self) -> &Path {
        &self.log_dirs[0]
    }

    /// The directory the metadata log's `__cluster_metadata-0` goes in: `metadata.log.dir`,
    /// else the data directory (Kafka's rule).
    pub fn metadata_log_dir(&self) -> &Path {
        self.metadata_log_dir
            .as_deref()
            .unwrap_or_else(|| self.data_dir())
    }

    /// This static configuration with dynamic broker configs on top (Kafka's precedence:
    /// this node's dynamic value, then the cluster-wide dynamic default, then the static
    /// value, then the default). Typed fields are recomputed; values were validated when they
    /// were altered, so an error here means a damaged metadata log.
    pub fn with_dynamic(
        &self,
        cluster: Option<&BTreeMap<String, String>>,
        node: Option<&BTreeMap<String, String>>,
    ) -> Result<BrokerConfig, ConfigError> {
        let cluster = cluster.cloned().unwrap_or_default();
        let node = node.cloned().unwrap_or_default();
        if cluster.is_empty()
            && node.is_empty()
            && self.dynamic_node.is_empty()
            && self.dynamic_cluster.is_empty()
        {
            return Ok(self.clone());
        }
        let mut merged = self.explicit.clone();
        merged.extend(cluster.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged.extend(node.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut layered = BrokerConfig::from_explicit(merged, self.ignored.clone())?;
        layered.explicit = self.explicit.clone();
        layered.dynamic_cluster = cluster;
        layered.dynamic_node = node;
        Ok(layered)
    }

    /// Where the value of `key` itself comes from (not its family).
    pub fn source_of_key(&self, key: &str) -> ConfigSource {
        if self.dynamic_node.contains_key(key) {
            ConfigSource::DynamicBroker
        } else if self.dynamic_cluster.contains_key(key) {
            ConfigSource::DynamicDefaultBroker
        } else if self.explicit.contains_key(key) {
            ConfigSource::StaticBroker
        } else {
            ConfigSource::Default
        }
    }

    /// Where the effective value of `key`'s alias/unit family comes from: the most specific
    /// source any key of the family is set at.
    pub fn source_of(&self, key: &str) -> ConfigSource {
        let family: &[&str] = FAMILIES
            .iter()
            .find(|f| f.contains(&key))
            .copied()
            .unwrap_or(std::slice::from_ref(&key));
        family
            .iter()
            .map(|k| self.source_of_key(k))
            .min_by_key(|source| *source as i8)
            .unwrap_or(ConfigSource::Default)
    }

    /// Whether `key` (or a key of its alias/unit family) was set in the file, overrides or
    /// dynamically.
    pub fn is_set(&self, key: &str) -> bool {
        self.source_of(key) != ConfigSource::Default
    }

    /// Raw value of a broker key: dynamic, else as set, else its default (`None` = null /
    /// unknown key).
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.dynamic_node
            .get(key)
            .or_else(|| self.dynamic_cluster.get(key))
            .or_else(|| self.explicit.get(key))
            .map(String::as_str)
            .or_else(|| find(BROKER_KEYS, key).and_then(|s| s.default))
    }

    /// Effective value of a broker key as a string, folding families (log.roll.ms from hours,
    /// ...); this is what a topic inherits.
    pub fn effective(&self, key: &str) -> Option<String> {
        match key {
            "node.id" => Some(self.node_id.to_string()),
            "log.roll.ms" => Some(self.log_roll_ms.to_string()),
            "log.retention.ms" => Some(self.log_retention_ms.to_string()),
            // Kafka's flush.ms default is Long.MAX when the broker key is null.
            "log.flush.interval.ms" => Some(
                self.log_flush_interval_ms
                    .map_or(LONG_MAX.into(), |v| v.to_string()),
            ),
            _ => self.raw(key).map(str::to_string),
        }
    }
}
