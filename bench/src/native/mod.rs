//! `--client native`: a lean Kafka client on the workspace's own `wire` and `kclient` crates.
//!
//! Plain std threads and blocking sockets, no runtime: the load generator shares the
//! machine with the broker it measures, so the client spends as little CPU as it can.
//! Connections (framing, ApiVersions, TLS) are `kclient::conn`'s; what is measurement-
//! specific (batching, the producer's split writer/reader pipelining, prefetching fetchers)
//! stays here. Only standard protocol behaviour is used, so it works against any
//! Kafka-compatible broker.
//!
//! * [`producer`]: records are encoded straight into per-partition batch buffers on the
//!   caller's thread; one writer thread and one reader thread per broker connection
//!   pipeline Produce requests (`writev`, CRC-32C once per batch); delivery reports come
//!   back through a channel drained by `poll`/`flush`.
//! * [`consumer`]: one fetcher thread per leader broker keeps a Fetch in flight and hands
//!   raw responses to the caller, which walks the batches without allocating per record.

pub mod batch;
pub mod consumer;
pub mod producer;
pub mod tls;

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wire::generated::api::ApiKey;
use wire::generated::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use wire::generated::metadata_request::MetadataRequestTopic;
use wire::generated::{
    CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse,
};
use wire::ErrorCode;

use kclient::conn::{Connection, Options};

/// An error of the protocol as an `io::Error` (the native client speaks `io::Result`).
pub fn protocol_error(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Connects a native-client connection (see [`kclient::conn`]): ApiVersions v3 first
/// (falling back to v0), named `bench-native`; over TLS when `tls` is given.
pub fn connect(
    addr: &str,
    client_id: &str,
    timeout: Duration,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> kclient::Result<Connection> {
    let options = Options {
        software_name: "bench-native".to_owned(),
        tls: tls.cloned(),
        ..Options::new(client_id, timeout)
    };
    Connection::connect(addr, &options)
}

/// Kafka property lookup with aliases (Java name first, librdkafka names after).
pub(crate) struct PropView<'a>(pub &'a [(String, String)]);

impl PropView<'_> {
    pub fn get(&self, names: &[&str]) -> Option<&str> {
        // The last setting wins, as with repeated command-line properties.
        self.0
            .iter()
            .rev()
            .find(|(k, _)| names.contains(&k.as_str()))
            .map(|(_, v)| v.trim())
    }

    pub fn num<T: std::str::FromStr>(&self, names: &[&str], default: T) -> anyhow::Result<T> {
        match self.get(names) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| anyhow::anyhow!("property {} has a bad value {v:?}", names[0])),
        }
    }

    pub fn string(&self, names: &[&str], default: &str) -> String {
        self.get(names).unwrap_or(default).to_string()
    }
}

/// Bootstrap servers: `host:port[,host:port...]`, an optional `PLAINTEXT://` prefix.
pub fn parse_bootstrap(bootstrap: &str) -> Vec<String> {
    bootstrap
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.rsplit("://").next().unwrap_or(s).to_string())
        .collect()
}

/// Whether an error code means "refresh metadata and try again".
pub fn is_retriable(code: i16) -> bool {
    ErrorCode::from_code(code).is_some_and(ErrorCode::is_retriable)
}

pub fn error_name(code: i16) -> String {
    match ErrorCode::from_code(code) {
        Some(e) => format!("{e:?} ({code})"),
        None => format!("error code {code}"),
    }
}

/// Leaders of one topic's partitions, indexed by partition id (-1: none now).
#[derive(Clone, Debug, Default)]
pub struct TopicMeta {
    pub error_code: i16,
    pub leaders: Vec<i32>,
}

/// A metadata snapshot.
#[derive(Clone, Debug, Default)]
pub struct ClusterMeta {
    pub brokers: HashMap<i32, String>,
    pub topics: HashMap<String, TopicMeta>,
}

impl ClusterMeta {
    fn from_response(resp: &MetadataResponse) -> ClusterMeta {
        let brokers = resp
            .brokers
            .iter()
            .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
            .collect();
        let mut topics = HashMap::new();
        for t in &resp.topics {
            let Some(name) = &t.name else { continue };
            let n = t
                .partitions
                .iter()
                .map(|p| p.partition_index + 1)
                .max()
                .unwrap_or(0)
                .max(0) as usize;
            let mut leaders = vec![-1; n];
            for p in &t.partitions {
                if p.partition_index >= 0 {
                    leaders[p.partition_index as usize] = if p.error_code == 0 || p.leader_id >= 0 {
                        p.leader_id
                    } else {
                        -1
                    };
                }
            }
            topics.insert(
                name.clone(),
                TopicMeta {
                    error_code: t.error_code,
                    leaders,
                },
            );
        }
        ClusterMeta { brokers, topics }
    }
}

/// A connection to any broker of the cluster, for metadata and admin requests.
pub struct MetaClient {
    bootstrap: Vec<String>,
    known: Vec<String>,
    conn: Option<Connection>,
    client_id: String,
    timeout: Duration,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl MetaClient {
    pub fn new(bootstrap: &str, client_id: &str, timeout: Duration) -> MetaClient {
        let bootstrap = parse_bootstrap(bootstrap);
        MetaClient {
            known: bootstrap.clone(),
            bootstrap,
            conn: None,
            client_id: client_id.to_string(),
            timeout,
            tls: None,
        }
    }

    /// Connects over TLS with `tls` (None: plain).
    pub fn with_tls(mut self, tls: Option<Arc<rustls::ClientConfig>>) -> MetaClient {
        self.tls = tls;
        self
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn conn(&mut self) -> io::Result<&mut Connection> {
        if self.conn.is_none() {
            let mut last = None;
            let candidates: Vec<String> = self
                .known
                .iter()
                .chain(self.bootstrap.iter())
                .cloned()
                .collect();
            for addr in candidates {
                match connect(&addr, &self.client_id, self.timeout, self.tls.as_ref()) {
                    Ok(c) => {
                        self.conn = Some(c);
                        break;
                    }
                    Err(e) => last = Some(io::Error::from(e)),
                }
            }
            if self.conn.is_none() {
                return Err(last.unwrap_or_else(|| protocol_error("no bootstrap servers")));
            }
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// Runs one request, dropping the connection on an I/O error so the next call
    /// reconnects (to another broker if this one is gone).
    fn call<Q: wire::primitives::Encodable, R: wire::primitives::Decodable>(
        &mut self,
        key: ApiKey,
        floor: i16,
        cap: i16,
        body: impl FnOnce(i16) -> Q,
    ) -> io::Result<(R, i16)> {
        let conn = self.conn()?;
        let version = conn.versions().pick(key, floor, cap)?;
        let req = body(version);
        match conn.request(key, version, &req) {
            Ok(r) => Ok((r, version)),
            Err(e) => {
                self.conn = None;
                Err(e.into())
            }
        }
    }

    /// Metadata for `topics` (all topics when empty).
    pub fn metadata(
        &mut self,
        topics: &[&str],
        allow_auto_create: bool,
    ) -> io::Result<ClusterMeta> {
        let mut last = None;
        for _ in 0..2 {
            let result =
                self.call::<_, MetadataResponse>(ApiKey::Metadata, 1, 12, |_| MetadataRequest {
                    topics: if topics.is_empty() {
                        None
                    } else {
                        Some(
                            topics
                                .iter()
                                .map(|t| MetadataRequestTopic {
                                    name: Some((*t).to_string()),
                                    ..Default::default()
                                })
                                .collect(),
                        )
                    },
                    allow_auto_topic_creation: allow_auto_create,
                    ..Default::default()
                });
            match result {
                Ok((resp, _)) => {
                    let meta = ClusterMeta::from_response(&resp);
                    if !meta.brokers.is_empty() {
                        self.known = meta.brokers.values().cloned().collect();
                    }
                    return Ok(meta);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("two tries"))
    }

    /// Metadata for one topic, waiting (with backoff) until every partition has a leader.
    pub fn wait_topic(
        &mut self,
        topic: &str,
        allow_auto_create: bool,
        max_wait: Duration,
    ) -> io::Result<(ClusterMeta, TopicMeta)> {
        let deadline = Instant::now() + max_wait;
        let mut backoff = Duration::from_millis(20);
        loop {
            let result = self.metadata(&[topic], allow_auto_create);
            let why = match &result {
                Ok(meta) => match meta.topics.get(topic) {
                    Some(t)
                        if t.error_code == 0
                            && !t.leaders.is_empty()
                            && t.leaders
                                .iter()
                                .all(|&l| l >= 0 && meta.brokers.contains_key(&l)) =>
                    {
                        let t = t.clone();
                        return Ok((result.expect("ok"), t));
                    }
                    Some(t) if t.error_code != 0 && !is_retriable(t.error_code) => {
                        return Err(protocol_error(format!(
                            "topic {topic}: {}",
                            error_name(t.error_code)
                        )));
                    }
                    Some(t) => format!("topic {topic} not ready: {}", error_name(t.error_code)),
                    None => format!("topic {topic} missing from metadata"),
                },
                Err(e) => e.to_string(),
            };
            if Instant::now() + backoff > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, why));
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    /// Creates a topic (TOPIC_ALREADY_EXISTS is success), then waits for its leaders.
    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(&str, &str)],
    ) -> io::Result<()> {
        let timeout_ms = self.timeout.as_millis().min(i32::MAX as u128) as i32;
        let (resp, _) = self.call::<_, CreateTopicsResponse>(ApiKey::CreateTopics, 2, 7, |_| {
            CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: name.to_string(),
                    num_partitions: partitions,
                    replication_factor,
                    configs: configs
                        .iter()
                        .map(|(k, v)| CreatableTopicConfig {
                            name: (*k).to_string(),
                            value: Some((*v).to_string()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                timeout_ms,
                validate_only: false,
                ..Default::default()
            }
        })?;
        for t in &resp.topics {
            if t.error_code != 0 && t.error_code != ErrorCode::TopicAlreadyExists.code() {
                return Err(protocol_error(format!(
                    "CreateTopics {name}: {} {}",
                    error_name(t.error_code),
                    t.error_message.clone().unwrap_or_default()
                )));
            }
        }
        self.wait_topic(name, false, Duration::from_secs(30))
            .map(|_| ())
    }
}
