//! `bench null-broker`: a Kafka responder that stores nothing, so that a client's and the
//! protocol's costs can be measured apart from a broker's.
//!
//! It answers ApiVersions; Metadata (itself the leader of every requested topic, with
//! `--partitions` partitions unless CreateTopics said otherwise); CreateTopics (always ok);
//! Produce (every partition acknowledged with increasing offsets, the records dropped; no
//! answer for acks=0); Fetch (pre-built record batches of `--record-size` records, served
//! from memory with their base offsets patched to the fetch offset, as many as the
//! partition's max bytes allows, at least one); ListOffsets (earliest 0, latest
//! [`HIGH_WATERMARK`]); DeleteTopics (forgets the topic). Any other API closes the connection, as our broker does.
//!
//! With `--tls-keystore` (a PEM file holding the private key and certificate chain, as
//! Kafka's `ssl.keystore.type=PEM`) every connection is TLS (rustls, ring provider): the
//! client's TLS cost without a broker's.
//!
//! One thread per connection with blocking sockets: simple, and cheap at a few connections.
//! The responder's threads' CPU time is tracked ([`NullBroker::cpu_seconds`]) so that an
//! in-process null broker can be accounted apart from the client in the same process.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use wire::generated::api::{self, ApiKey};
use wire::generated::api_versions_response::ApiVersion;
use wire::generated::create_topics_response::CreatableTopicResult;
use wire::generated::delete_topics_response::DeletableTopicResult;
use wire::generated::fetch_response::{FetchableTopicResponse, PartitionData};
use wire::generated::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use wire::generated::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use wire::generated::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use wire::generated::{
    ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    RequestHeader,
};
use wire::primitives::{Decodable, Encodable, Uuid};
use wire::record_batch::{patch_base_offset, BatchBuilder, Compression};
use wire::{varint, ErrorCode};

use crate::cpu;

/// The log end offset every partition reports ("latest").
pub const HIGH_WATERMARK: i64 = 1 << 40;
/// Node id of the null broker.
pub const NODE_ID: i32 = 0;

/// The APIs and versions served (the same ranges as our broker's).
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 0, 7),
    (ApiKey::DeleteTopics, 0, 6),
];

/// `bench null-broker` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct NullBrokerArgs {
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: String,
    /// Host:port advertised in Metadata (default: the bound address; 127.0.0.1 for 0.0.0.0).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Partitions of a topic that was not created with an explicit count.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Value bytes of each record served by Fetch.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Approximate bytes of each pre-built batch served by Fetch.
    #[arg(long, default_value_t = 64 * 1024)]
    pub fetch_batch_bytes: usize,
    /// Serve TLS only, with this PEM keystore (private key and certificate chain).
    #[arg(long)]
    pub tls_keystore: Option<std::path::PathBuf>,
}

impl Default for NullBrokerArgs {
    fn default() -> Self {
        NullBrokerArgs {
            listen: "127.0.0.1:0".into(),
            advertise: None,
            partitions: 1,
            record_size: 1024,
            fetch_batch_bytes: 64 * 1024,
            tls_keystore: None,
        }
    }
}

/// `bench null-broker`: serves until killed.
pub fn run(args: &NullBrokerArgs) -> Result<()> {
    let broker = NullBroker::start(args)?;
    println!("null broker listening on {}", broker.addr());
    // Serve until the process is killed.
    loop {
        std::thread::park();
    }
}

struct Topic {
    id: Uuid,
    partitions: i32,
}

/// Counters of what the null broker answered.
#[derive(Debug, Default)]
pub struct NullCounters {
    pub produce_requests: AtomicU64,
    pub produced_records: AtomicU64,
    pub produced_bytes: AtomicU64,
    pub fetch_requests: AtomicU64,
    pub fetched_bytes: AtomicU64,
    pub other_requests: AtomicU64,
}

struct Shared {
    partitions: i32,
    advertised: (String, u16),
    /// One pre-built batch (offset 0) and its record count.
    fetch_batch: Bytes,
    fetch_batch_records: i64,
    topics: Mutex<HashMap<String, Topic>>,
    offsets: Mutex<HashMap<(String, i32), i64>>,
    counters: NullCounters,
    stop: AtomicBool,
    /// Clones of the open connections (to shut them down on stop), by connection number.
    conns: Mutex<HashMap<u64, TcpStream>>,
    threads: ThreadCpu,
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// CPU of a set of threads of this process, the ended ones included.
#[derive(Default)]
struct ThreadCpu {
    /// Live thread ids, and the nanoseconds of the threads that have ended.
    inner: Mutex<(Vec<i32>, u64)>,
}

impl ThreadCpu {
    fn enter(&self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .push(tid);
    }

    fn exit(&self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let ns = (cpu::thread_cpu_seconds() * 1e9) as u64;
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.0.retain(|&t| t != tid);
        inner.1 += ns;
    }

    fn seconds(&self) -> f64 {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let live: f64 = inner.0.iter().map(|&tid| task_cpu_seconds(tid)).sum();
        live + inner.1 as f64 / 1e9
    }
}

/// A thread's CPU seconds: `/proc/self/task/<tid>/schedstat` (ns), else its stat (ticks).
fn task_cpu_seconds(tid: i32) -> f64 {
    if let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")) {
        if let Some(ns) = text
            .split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())
        {
            return ns as f64 / 1e9;
        }
    }
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|s| cpu::parse_stat_cpu_ticks(&s))
        .map_or(0.0, |ticks| ticks as f64 / cpu::clock_ticks())
}

/// A running null broker (in this process). Dropping it stops it.
pub struct NullBroker {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl NullBroker {
    /// Binds and starts serving on background threads.
    pub fn start(args: &NullBrokerArgs) -> Result<NullBroker> {
        let listener =
            TcpListener::bind(&args.listen).with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr()?;
        let advertised = match &args.advertise {
            Some(a) => {
                let (host, port) = a.rsplit_once(':').context("--advertise is HOST:PORT")?;
                (host.to_string(), port.parse().context("--advertise port")?)
            }
            None if addr.ip().is_unspecified() => ("127.0.0.1".to_string(), addr.port()),
            None => (addr.ip().to_string(), addr.port()),
        };
        let (fetch_batch, fetch_batch_records) =
            build_fetch_batch(args.record_size, args.fetch_batch_bytes);
        let shared = Arc::new(Shared {
            partitions: args.partitions.max(1),
            advertised,
            fetch_batch,
            fetch_batch_records,
            topics: Mutex::default(),
            offsets: Mutex::default(),
            counters: NullCounters::default(),
            stop: AtomicBool::new(false),
            conns: Mutex::default(),
            threads: ThreadCpu::default(),
            tls: args.tls_keystore.as_deref().map(tls_config).transpose()?,
        });
        let accept_shared = shared.clone();
        let accept = std::thread::Builder::new()
            .name("null-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))?;
        Ok(NullBroker {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// CPU seconds of the null broker's threads so far.
    pub fn cpu_seconds(&self) -> f64 {
        self.shared.threads.seconds()
    }

    /// A CPU source for [`cpu::CpuSampler`].
    pub fn cpu_source(&self) -> cpu::BrokerCpu {
        let shared = self.shared.clone();
        cpu::BrokerCpu::InProcess(Arc::new(move || shared.threads.seconds()))
    }

    pub fn counters(&self) -> &NullCounters {
        &self.shared.counters
    }

    /// Stops accepting and closes every connection.
    pub fn stop(&mut self) {
        if self.shared.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        for (_, conn) in self
            .shared
            .conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain()
        {
            let _ = conn.shutdown(Shutdown::Both);
        }
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

impl Drop for NullBroker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One batch of `record_size`-byte values, about `batch_bytes` long (at least one record).
fn build_fetch_batch(record_size: usize, batch_bytes: usize) -> (Bytes, i64) {
    let count = (batch_bytes / (record_size + 8).max(1)).max(1);
    let value = vec![b'x'; record_size];
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut builder = BatchBuilder::new(Compression::None);
    for _ in 0..count {
        builder = builder.push(None, Some(&value), &[], now);
    }
    (builder.build(), count as i64)
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    shared.threads.enter();
    for (id, stream) in listener.incoming().enumerate() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let id = id as u64;
        let _ = stream.set_nodelay(true);
        if let Ok(clone) = stream.try_clone() {
            shared
                .conns
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(id, clone);
        }
        let conn_shared = shared.clone();
        let _ = std::thread::Builder::new()
            .name("null-conn".into())
            .spawn(move || {
                conn_shared.threads.enter();
                let served = match &conn_shared.tls {
                    None => serve(stream, &conn_shared),
                    Some(config) => serve_tls(stream, config.clone(), &conn_shared),
                };
                if let Err(error) = served {
                    if debug() {
                        eprintln!("null broker: connection closed: {error:#}");
                    }
                }
                // Dropping the clone closes the socket (else it would linger in CLOSE-WAIT).
                conn_shared
                    .conns
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&id);
                conn_shared.threads.exit();
            });
    }
    shared.threads.exit();
}

/// `NULL_BROKER_DEBUG=1` prints every request's API key and version.
fn debug() -> bool {
    static DEBUG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DEBUG.get_or_init(|| std::env::var_os("NULL_BROKER_DEBUG").is_some())
}

fn serve(stream: TcpStream, shared: &Shared) -> Result<()> {
    let mut reader = BufReader::with_capacity(256 * 1024, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(256 * 1024, stream);
    loop {
        let mut size = [0u8; 4];
        if reader.read_exact(&mut size).is_err() {
            return Ok(());
        }
        let size = i32::from_be_bytes(size);
        anyhow::ensure!(
            (8..=wire::frame::SOCKET_REQUEST_MAX_BYTES_DEFAULT as i32).contains(&size),
            "bad frame size {size}"
        );
        let mut frame = BytesMut::zeroed(size as usize);
        reader.read_exact(&mut frame)?;
        if let Some(response) = handle(shared, frame.freeze())? {
            writer.write_all(&response)?;
        }
        // Answer now unless the client has pipelined more requests that are already here.
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
}

/// The server side of `--tls-keystore`.
fn tls_config(keystore: &std::path::Path) -> Result<Arc<rustls::ServerConfig>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(keystore)
        .with_context(|| format!("reading {}", keystore.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("certificates of {}", keystore.display()))?;
    let key = PrivateKeyDer::from_pem_file(keystore)
        .with_context(|| format!("private key of {}", keystore.display()))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .context("TLS keystore")?;
    Ok(Arc::new(config))
}

/// [`serve`] over TLS: one rustls session reads requests and writes responses.
fn serve_tls(stream: TcpStream, config: Arc<rustls::ServerConfig>, shared: &Shared) -> Result<()> {
    let session = rustls::ServerConnection::new(config)?;
    let mut tls = rustls::StreamOwned::new(session, stream);
    loop {
        let mut size = [0u8; 4];
        if tls.read_exact(&mut size).is_err() {
            return Ok(());
        }
        let size = i32::from_be_bytes(size);
        anyhow::ensure!(
            (8..=wire::frame::SOCKET_REQUEST_MAX_BYTES_DEFAULT as i32).contains(&size),
            "bad frame size {size}"
        );
        let mut frame = BytesMut::zeroed(size as usize);
        tls.read_exact(&mut frame)?;
        if let Some(response) = handle(shared, frame.freeze())? {
            tls.write_all(&response)?;
            tls.flush()?;
        }
    }
}

struct Ctx {
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
}

/// One request frame (without its size) to its response frame (None: no response).
fn handle(shared: &Shared, mut frame: Bytes) -> Result<Option<BytesMut>> {
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let ctx = Ctx {
        api_key,
        api_version,
        correlation_id,
    };
    if debug() {
        eprintln!("null broker: api {api_key} v{api_version} correlation {correlation_id}");
    }
    let Some(&(key, min, max)) = SUPPORTED.iter().find(|(k, _, _)| *k as i16 == api_key) else {
        anyhow::bail!("unsupported API key {api_key}");
    };
    if api_version < min || api_version > max {
        anyhow::ensure!(
            key == ApiKey::ApiVersions,
            "unsupported version {api_version} of API key {api_key}"
        );
        // KIP-511: a v0 body that lists our ranges, so the client retries at one of them.
        let response = ApiVersionsResponse {
            error_code: ErrorCode::UnsupportedVersion.code(),
            api_keys: api_keys(),
            ..Default::default()
        };
        return encode(&ctx, 0, &response).map(Some);
    }
    RequestHeader::decode(
        &mut frame,
        api::request_header_version(api_key, api_version),
    )?;
    let body = frame;
    let counters = &shared.counters;
    match key {
        ApiKey::Produce => {
            counters.produce_requests.fetch_add(1, Ordering::Relaxed);
            let request: ProduceRequest = decode(&ctx, body)?;
            produce(shared, &ctx, request)
        }
        ApiKey::Fetch => {
            counters.fetch_requests.fetch_add(1, Ordering::Relaxed);
            let request: FetchRequest = decode(&ctx, body)?;
            encode(&ctx, api_version, &fetch(shared, &ctx, request)).map(Some)
        }
        ApiKey::ApiVersions => {
            counters.other_requests.fetch_add(1, Ordering::Relaxed);
            let _request: ApiVersionsRequest = decode(&ctx, body)?;
            let response = ApiVersionsResponse {
                error_code: 0,
                api_keys: api_keys(),
                ..Default::default()
            };
            encode(&ctx, api_version, &response).map(Some)
        }
        ApiKey::Metadata => {
            counters.other_requests.fetch_add(1, Ordering::Relaxed);
            let request: MetadataRequest = decode(&ctx, body)?;
            encode(&ctx, api_version, &metadata(shared, &ctx, request)).map(Some)
        }
        ApiKey::CreateTopics => {
            counters.other_requests.fetch_add(1, Ordering::Relaxed);
            let request: CreateTopicsRequest = decode(&ctx, body)?;
            encode(&ctx, api_version, &create_topics(shared, request)).map(Some)
        }
        ApiKey::DeleteTopics => {
            counters.other_requests.fetch_add(1, Ordering::Relaxed);
            let request: DeleteTopicsRequest = decode(&ctx, body)?;
            encode(&ctx, api_version, &delete_topics(shared, request)).map(Some)
        }
        ApiKey::ListOffsets => {
            counters.other_requests.fetch_add(1, Ordering::Relaxed);
            let request: ListOffsetsRequest = decode(&ctx, body)?;
            encode(&ctx, api_version, &list_offsets(request)).map(Some)
        }
        _ => unreachable!("SUPPORTED lists only handled keys"),
    }
}

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|&(key, min_version, max_version)| ApiVersion {
            api_key: key as i16,
            min_version,
            max_version,
            ..Default::default()
        })
        .collect()
}

fn decode<T: Decodable>(ctx: &Ctx, mut body: Bytes) -> Result<T> {
    T::decode(&mut body, ctx.api_version).with_context(|| {
        format!(
            "undecodable body of API key {} version {}",
            ctx.api_key, ctx.api_version
        )
    })
}

fn encode<T: Encodable>(ctx: &Ctx, api_version: i16, response: &T) -> Result<BytesMut> {
    let header_version = api::response_header_version(ctx.api_key, api_version);
    let header_len = 4 + usize::from(header_version >= 1);
    let body_len = response.encoded_len(api_version);
    let mut out = BytesMut::with_capacity(4 + header_len + body_len);
    out.put_i32((header_len + body_len) as i32);
    out.put_i32(ctx.correlation_id);
    if header_version >= 1 {
        varint::write_unsigned_varint(&mut out, 0);
    }
    response.encode(&mut out, api_version)?;
    Ok(out)
}

/// A topic id derived from the name (stable across restarts, never zero).
fn topic_id(name: &str) -> Uuid {
    let a = crc32c::crc32c(name.as_bytes());
    let b = crc32c::crc32c_append(0x9e37_79b9, name.as_bytes());
    let mut id = [0u8; 16];
    id[..4].copy_from_slice(&a.to_be_bytes());
    id[4..8].copy_from_slice(&b.to_be_bytes());
    id[8..12].copy_from_slice(&(name.len() as u32).to_be_bytes());
    id[12..].copy_from_slice(b"null");
    Uuid(id)
}

fn ensure_topic(shared: &Shared, name: &str, partitions: Option<i32>) -> (Uuid, i32) {
    let mut topics = shared
        .topics
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let topic = topics.entry(name.to_string()).or_insert_with(|| Topic {
        id: topic_id(name),
        partitions: partitions.filter(|&p| p > 0).unwrap_or(shared.partitions),
    });
    (topic.id, topic.partitions)
}

fn describe(shared: &Shared, name: &str, id: Uuid, partitions: i32) -> MetadataResponseTopic {
    let _ = shared;
    MetadataResponseTopic {
        error_code: 0,
        name: Some(name.to_string()),
        topic_id: id,
        is_internal: false,
        partitions: (0..partitions)
            .map(|index| MetadataResponsePartition {
                error_code: 0,
                partition_index: index,
                leader_id: NODE_ID,
                leader_epoch: 0,
                replica_nodes: vec![NODE_ID],
                isr_nodes: vec![NODE_ID],
                offline_replicas: vec![],
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn metadata(shared: &Shared, ctx: &Ctx, request: MetadataRequest) -> MetadataResponse {
    let all = match &request.topics {
        None => true,
        Some(topics) => topics.is_empty() && ctx.api_version == 0,
    };
    let topics = if all {
        let known = shared
            .topics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        known
            .iter()
            .map(|(name, t)| describe(shared, name, t.id, t.partitions))
            .collect()
    } else {
        request
            .topics
            .unwrap_or_default()
            .iter()
            .map(|wanted| {
                let name = match &wanted.name {
                    Some(name) => name.clone(),
                    None => {
                        let known = shared
                            .topics
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        match known.iter().find(|(_, t)| t.id == wanted.topic_id) {
                            Some((name, _)) => name.clone(),
                            None => {
                                return MetadataResponseTopic {
                                    error_code: ErrorCode::UnknownTopicId.code(),
                                    topic_id: wanted.topic_id,
                                    name: None,
                                    ..Default::default()
                                }
                            }
                        }
                    }
                };
                let (id, partitions) = ensure_topic(shared, &name, None);
                describe(shared, &name, id, partitions)
            })
            .collect()
    };
    MetadataResponse {
        brokers: vec![MetadataResponseBroker {
            node_id: NODE_ID,
            host: shared.advertised.0.clone(),
            port: i32::from(shared.advertised.1),
            rack: None,
            ..Default::default()
        }],
        cluster_id: Some("null-broker".to_string()),
        controller_id: NODE_ID,
        topics,
        ..Default::default()
    }
}

fn create_topics(shared: &Shared, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let wanted = if topic.assignments.is_empty() {
                topic.num_partitions
            } else {
                topic.assignments.len() as i32
            };
            let (id, partitions) = ensure_topic(shared, &topic.name, Some(wanted));
            CreatableTopicResult {
                name: topic.name.clone(),
                topic_id: id,
                error_code: 0,
                error_message: None,
                num_partitions: partitions,
                replication_factor: 1,
                configs: Some(vec![]),
                ..Default::default()
            }
        })
        .collect();
    CreateTopicsResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    }
}

fn delete_topics(shared: &Shared, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut topics = shared
        .topics
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut offsets = shared
        .offsets
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let names: Vec<(Option<String>, Uuid)> = request
        .topic_names
        .iter()
        .map(|n| (Some(n.clone()), Uuid::ZERO))
        .chain(request.topics.iter().map(|t| (t.name.clone(), t.topic_id)))
        .collect();
    let responses = names
        .into_iter()
        .map(|(name, id)| {
            let name = name.or_else(|| {
                topics
                    .iter()
                    .find(|(_, t)| t.id == id)
                    .map(|(n, _)| n.clone())
            });
            let known = name.as_ref().and_then(|n| topics.remove(n));
            if let Some(n) = &name {
                offsets.retain(|(t, _), _| t != n);
            }
            DeletableTopicResult {
                error_code: if known.is_some() {
                    0
                } else {
                    ErrorCode::UnknownTopicOrPartition.code()
                },
                topic_id: known.map_or(id, |t| t.id),
                name,
                ..Default::default()
            }
        })
        .collect();
    DeleteTopicsResponse {
        throttle_time_ms: 0,
        responses,
        ..Default::default()
    }
}

/// Records in a buffer of batches, read from each batch's header without checking it.
fn record_count(mut records: &[u8]) -> i64 {
    let mut count = 0i64;
    while records.len() >= 61 {
        let length = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
        count += i64::from(
            i32::from_be_bytes([records[57], records[58], records[59], records[60]]).max(0),
        );
        let total = 12 + length.max(49) as usize;
        records = &records[total.min(records.len())..];
    }
    count
}

fn produce(shared: &Shared, ctx: &Ctx, request: ProduceRequest) -> Result<Option<BytesMut>> {
    let counters = &shared.counters;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    {
        let mut offsets = shared
            .offsets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for topic in &request.topic_data {
            let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
            for partition in &topic.partition_data {
                let records = partition.records.as_deref().unwrap_or_default();
                let count = record_count(records);
                counters
                    .produced_records
                    .fetch_add(count as u64, Ordering::Relaxed);
                counters
                    .produced_bytes
                    .fetch_add(records.len() as u64, Ordering::Relaxed);
                let next = offsets
                    .entry((topic.name.clone(), partition.index))
                    .or_insert(0);
                let base_offset = *next;
                *next += count;
                partition_responses.push(PartitionProduceResponse {
                    index: partition.index,
                    error_code: 0,
                    base_offset,
                    log_append_time_ms: -1,
                    log_start_offset: 0,
                    ..Default::default()
                });
            }
            responses.push(TopicProduceResponse {
                name: topic.name.clone(),
                partition_responses,
                ..Default::default()
            });
        }
    }
    if request.acks == 0 {
        return Ok(None);
    }
    let response = ProduceResponse {
        responses,
        throttle_time_ms: 0,
        ..Default::default()
    };
    encode(ctx, ctx.api_version, &response).map(Some)
}

fn fetch(shared: &Shared, ctx: &Ctx, request: FetchRequest) -> FetchResponse {
    let by_id = ctx.api_version >= 13;
    let batch = &shared.fetch_batch;
    let per_batch = shared.fetch_batch_records;
    let mut budget = request.max_bytes.max(0) as usize;
    let responses = request
        .topics
        .iter()
        .map(|topic| FetchableTopicResponse {
            topic: topic.topic.clone(),
            topic_id: if by_id { topic.topic_id } else { Uuid::ZERO },
            partitions: topic
                .partitions
                .iter()
                .map(|partition| {
                    let offset = partition.fetch_offset;
                    if !(0..HIGH_WATERMARK).contains(&offset) {
                        return PartitionData {
                            partition_index: partition.partition,
                            error_code: ErrorCode::OffsetOutOfRange.code(),
                            high_watermark: HIGH_WATERMARK,
                            last_stable_offset: HIGH_WATERMARK,
                            log_start_offset: 0,
                            preferred_read_replica: -1,
                            records: Some(Bytes::new()),
                            ..Default::default()
                        };
                    }
                    let limit = (partition.partition_max_bytes.max(0) as usize).min(budget);
                    let copies = (limit / batch.len()).max(1);
                    budget = budget.saturating_sub(copies * batch.len());
                    let mut records = BytesMut::with_capacity(copies * batch.len());
                    for i in 0..copies {
                        let start = records.len();
                        records.extend_from_slice(batch);
                        patch_base_offset(&mut records[start..], offset + i as i64 * per_batch);
                    }
                    if debug() {
                        eprintln!(
                            "null broker: fetch partition {} offset {offset}: {copies} batches, {} bytes",
                            partition.partition,
                            records.len()
                        );
                    }
                    shared
                        .counters
                        .fetched_bytes
                        .fetch_add(records.len() as u64, Ordering::Relaxed);
                    PartitionData {
                        partition_index: partition.partition,
                        error_code: 0,
                        high_watermark: HIGH_WATERMARK,
                        last_stable_offset: HIGH_WATERMARK,
                        log_start_offset: 0,
                        aborted_transactions: (request.isolation_level == 1).then(Vec::new),
                        preferred_read_replica: -1,
                        records: Some(records.freeze()),
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    FetchResponse {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        responses,
        ..Default::default()
    }
}

fn list_offsets(request: ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| ListOffsetsTopicResponse {
            name: topic.name.clone(),
            partitions: topic
                .partitions
                .iter()
                .map(|partition| ListOffsetsPartitionResponse {
                    partition_index: partition.partition_index,
                    error_code: 0,
                    timestamp: -1,
                    offset: if partition.timestamp == -1 {
                        HIGH_WATERMARK
                    } else {
                        0
                    },
                    leader_epoch: 0,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    ListOffsetsResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::generated::produce_request::{PartitionProduceData, TopicProduceData};

    fn roundtrip<Req: Encodable, Resp: Decodable>(
        stream: &mut TcpStream,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        let header = RequestHeader {
            request_api_key: key as i16,
            request_api_version: version,
            correlation_id: 7,
            client_id: Some("t".into()),
            ..Default::default()
        };
        let hv = api::request_header_version(key as i16, version);
        let mut body = BytesMut::new();
        header.encode(&mut body, hv).unwrap();
        req.encode(&mut body, version).unwrap();
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        stream.write_all(&frame).unwrap();
        let mut size = [0u8; 4];
        stream.read_exact(&mut size).unwrap();
        let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
        stream.read_exact(&mut buf).unwrap();
        let mut buf = Bytes::from(buf);
        let rhv = api::response_header_version(key as i16, version);
        let rh = wire::generated::ResponseHeader::decode(&mut buf, rhv).unwrap();
        assert_eq!(rh.correlation_id, 7);
        Resp::decode(&mut buf, version).unwrap()
    }

    #[test]
    fn produce_metadata_fetch() {
        let broker = NullBroker::start(&NullBrokerArgs {
            partitions: 3,
            record_size: 100,
            ..Default::default()
        })
        .unwrap();
        let mut s = TcpStream::connect(broker.addr()).unwrap();
        let md: MetadataResponse = roundtrip(
            &mut s,
            ApiKey::Metadata,
            12,
            &MetadataRequest {
                topics: Some(vec![
                    wire::generated::metadata_request::MetadataRequestTopic {
                        name: Some("t".into()),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            },
        );
        assert_eq!(md.topics[0].partitions.len(), 3);
        assert_eq!(md.brokers[0].port, i32::from(broker.addr().port()));
        let batch = BatchBuilder::new(Compression::None)
            .push(None, Some(b"a"), &[], 1)
            .push(None, Some(b"b"), &[], 1)
            .build();
        let req = ProduceRequest {
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 1,
                    records: Some(batch),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        for expected in [0, 2] {
            let resp: ProduceResponse = roundtrip(&mut s, ApiKey::Produce, 9, &req);
            assert_eq!(
                resp.responses[0].partition_responses[0].base_offset,
                expected
            );
        }
        let freq = FetchRequest {
            max_bytes: 1 << 20,
            topics: vec![wire::generated::fetch_request::FetchTopic {
                topic: "t".into(),
                topic_id: md.topics[0].topic_id,
                partitions: vec![wire::generated::fetch_request::FetchPartition {
                    partition: 0,
                    fetch_offset: 5,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let resp: FetchResponse = roundtrip(&mut s, ApiKey::Fetch, 13, &freq);
        let records = resp.responses[0].partitions[0].records.clone().unwrap();
        let mut next = 5;
        let mut n = 0;
        for item in wire::record_batch::batches(&records) {
            let (header, _) = item.unwrap();
            assert_eq!(header.base_offset, next);
            next = header.next_offset();
            n += 1;
        }
        assert!(n >= 10, "{n} batches");
        assert!(broker.counters().produce_requests.load(Ordering::Relaxed) == 2);
        assert!(broker.cpu_seconds() >= 0.0);
    }

    #[test]
    fn counts_records_in_batches() {
        let one = BatchBuilder::new(Compression::None)
            .push(None, Some(b"a"), &[], 1)
            .push(None, None, &[], 1)
            .build();
        let mut two = one.to_vec();
        two.extend_from_slice(&one);
        assert_eq!(record_count(&two), 4);
        assert_eq!(record_count(&[]), 0);
    }
}
