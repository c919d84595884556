//! The native producer.
//!
//! * `send` (caller's thread) encodes the record straight into its partition's open batch
//!   (no per-record allocation beyond the caller's boxed callback) under one uncontended
//!   mutex; a full batch is handed to its leader's connection right away.
//! * A sweeper thread closes batches older than `linger.ms` and re-routes retried batches
//!   (after a metadata refresh and `retry.backoff.ms`); it sleeps when nothing is open.
//! * Per broker connection: a writer thread closes batches (compression, CRC-32C once),
//!   packs every batch queued for that broker into one Produce request (one batch per
//!   partition per request) and writes it with `writev`, pipelining up to
//!   `max.in.flight.requests.per.connection`; a reader thread matches responses (in
//!   order) and reports deliveries back to the caller through a channel that
//!   `poll`/`flush` drain, running the callbacks on the caller's thread.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, BufReader};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wire::generated::api::ApiKey;
use wire::generated::ProduceResponse;
use wire::record_batch::Compression;

use super::batch::{finish_batch, partition_for_key, record_size_upper_bound, OpenBatch};
use super::connection::{
    decode_response, protocol_error, read_frame, write_all_vectored, Connection,
};
use super::{error_name, is_retriable, MetaClient, PropView};
use crate::engine::{DeliveryCallback, DeliveryInfo, SendError};

/// Produce requests written by every native producer of this process so far: benches read
/// it before and after a run to report requests/s and records per request for any broker
/// (the null broker counts what it receives, other brokers do not tell).
pub static PRODUCE_REQUESTS_SENT: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// Producer settings, from Kafka property names (librdkafka aliases accepted).
#[derive(Clone, Debug)]
pub struct ProducerConfig {
    pub client_id: String,
    pub batch_size: usize,
    pub linger: Duration,
    pub max_in_flight: usize,
    pub acks: i16,
    pub compression: Compression,
    pub request_timeout: Duration,
    pub delivery_timeout: Duration,
    pub retry_backoff: Duration,
    pub max_block: Duration,
    pub max_messages: usize,
    pub max_bytes: usize,
    pub max_request_size: usize,
}

pub fn parse_compression(name: &str) -> anyhow::Result<Compression> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "" | "none" | "uncompressed" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => anyhow::bail!("unknown compression.type {other:?}"),
    })
}

impl ProducerConfig {
    pub fn from_props(props: &[(String, String)]) -> anyhow::Result<ProducerConfig> {
        let p = PropView(props);
        if super::tls::client_config(props)?.is_some() {
            anyhow::bail!("the native producer speaks PLAINTEXT only (security.protocol=SSL is for the native consumer)");
        }
        let acks = match p
            .string(&["acks", "request.required.acks"], "all")
            .to_ascii_lowercase()
            .as_str()
        {
            "all" | "-1" => -1,
            "1" => 1,
            "0" => 0,
            other => anyhow::bail!("unsupported acks={other}"),
        };
        let ms = |names: &[&str], d: u64| -> anyhow::Result<Duration> {
            Ok(Duration::from_millis(p.num(names, d)?))
        };
        Ok(ProducerConfig {
            client_id: p.string(&["client.id"], "bench-native"),
            batch_size: p.num::<usize>(&["batch.size"], 16384)?.max(128),
            linger: Duration::from_secs_f64(
                p.num::<f64>(&["linger.ms", "queue.buffering.max.ms"], 5.0)?
                    .max(0.0)
                    / 1000.0,
            ),
            max_in_flight: p
                .num::<usize>(
                    &["max.in.flight.requests.per.connection", "max.in.flight"],
                    5,
                )?
                .max(1),
            acks,
            compression: parse_compression(
                &p.string(&["compression.type", "compression.codec"], "none"),
            )?,
            request_timeout: ms(&["request.timeout.ms"], 30_000)?,
            delivery_timeout: ms(&["delivery.timeout.ms", "message.timeout.ms"], 120_000)?,
            retry_backoff: ms(&["retry.backoff.ms"], 100)?,
            max_block: ms(&["max.block.ms"], 60_000)?,
            max_messages: p
                .num::<usize>(&["queue.buffering.max.messages"], 100_000)?
                .max(1),
            max_bytes: match p.get(&["buffer.memory"]) {
                Some(_) => p.num::<usize>(&["buffer.memory"], 0)?,
                None => p.num::<usize>(&["queue.buffering.max.kbytes"], 1 << 20)? * 1024,
            }
            .max(1024),
            max_request_size: p
                .num::<usize>(&["max.request.size", "message.max.bytes"], 1 << 20)?
                .max(1024),
        })
    }
}

/// A batch on its way to a broker (or back, for a retry).
pub(crate) struct Job {
    topic: Arc<str>,
    partition: i32,
    /// Records (after header room) until `finished`; then the whole batch.
    buf: Vec<u8>,
    finished: bool,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    callbacks: Vec<DeliveryCallback>,
    /// Bytes charged against the caller's buffer limit.
    bytes: usize,
    created: Instant,
    retry_at: Instant,
}

/// A delivery report for one batch, sent to the caller's thread.
struct Report {
    partition: i32,
    base_offset: i64,
    error: Option<String>,
    callbacks: Vec<DeliveryCallback>,
    count: usize,
    bytes: usize,
}

impl Report {
    fn of(job: Job, base_offset: i64, error: Option<String>) -> Report {
        Report {
            partition: job.partition,
            base_offset,
            error,
            count: job.count as usize,
            bytes: job.bytes,
            callbacks: job.callbacks,
        }
    }
}

struct TopicState {
    name: Arc<str>,
    leaders: Vec<i32>,
    open: Vec<Option<(OpenBatch, usize)>>,
    sticky: usize,
    /// Records in the last batch closed (to size the next one's callback list).
    last_count: usize,
}

struct BrokerConn {
    tx: Sender<Job>,
    /// Batches handed to the writer and not yet written to the socket.
    queued: Arc<AtomicUsize>,
    slots: Arc<Slots>,
    dead: Arc<AtomicBool>,
    stream: TcpStream,
}

struct State {
    cfg: Arc<ProducerConfig>,
    meta: MetaClient,
    brokers: HashMap<i32, String>,
    topics: Vec<TopicState>,
    last_topic: usize,
    conns: HashMap<i32, BrokerConn>,
    retries: Vec<Job>,
    metadata_stale: bool,
    open_batches: usize,
    /// The sweeper is waiting with no timeout: the next new batch must wake it.
    sweeper_idle: bool,
    closed: bool,
    events: Sender<Report>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands batches that failed with a retriable error back for re-routing, or fails them
    /// once their delivery timeout has passed.
    fn retry(&self, jobs: impl IntoIterator<Item = Job>, why: &str) {
        let mut st = self.lock();
        let now = Instant::now();
        let backoff = st.cfg.retry_backoff;
        let timeout = st.cfg.delivery_timeout;
        for mut job in jobs {
            if now.duration_since(job.created) >= timeout {
                let msg = format!("delivery timed out after retries (last error: {why})");
                let _ = st.events.send(Report::of(job, -1, Some(msg)));
            } else {
                job.retry_at = now + backoff;
                st.retries.push(job);
            }
        }
        st.metadata_stale = true;
        drop(st);
        self.wake.notify_all();
    }
}

/// The caller-side handle.
pub struct NativeProducer {
    shared: Arc<Shared>,
    events: Receiver<Report>,
    cfg: Arc<ProducerConfig>,
    outstanding_msgs: usize,
    outstanding_bytes: usize,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl NativeProducer {
    pub fn new(bootstrap: &str, props: &[(String, String)]) -> anyhow::Result<NativeProducer> {
        let cfg = Arc::new(ProducerConfig::from_props(props)?);
        let mut meta = MetaClient::new(
            bootstrap,
            &cfg.client_id,
            cfg.request_timeout.min(Duration::from_secs(30)),
        );
        // Fail fast on an unreachable cluster, as the Java client's first metadata does.
        let cluster = meta
            .metadata(&[], false)
            .map_err(|e| anyhow::anyhow!("cannot reach {bootstrap}: {e}"))?;
        let (events_tx, events) = mpsc::channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                cfg: cfg.clone(),
                meta,
                brokers: cluster.brokers,
                topics: Vec::new(),
                last_topic: 0,
                conns: HashMap::new(),
                retries: Vec::new(),
                metadata_stale: false,
                open_batches: 0,
                sweeper_idle: true,
                closed: false,
                events: events_tx,
            }),
            wake: Condvar::new(),
        });
        let sweeper = shared.clone();
        thread::Builder::new()
            .name("native-linger".into())
            .spawn(move || sweeper_loop(&sweeper))?;
        Ok(NativeProducer {
            shared,
            events,
            cfg,
            outstanding_msgs: 0,
            outstanding_bytes: 0,
        })
    }

    fn run_report(&mut self, report: Report) {
        self.outstanding_msgs -= report.count.min(self.outstanding_msgs);
        self.outstanding_bytes -= report.bytes.min(self.outstanding_bytes);
        let partition = report.partition;
        match report.error {
            None => {
                for (i, cb) in report.callbacks.into_iter().enumerate() {
                    let offset = if report.base_offset >= 0 {
                        report.base_offset + i as i64
                    } else {
                        -1
                    };
                    cb(Ok(DeliveryInfo { partition, offset }));
                }
            }
            Some(e) => {
                for cb in report.callbacks {
                    cb(Err(e.clone()));
                }
            }
        }
    }

    /// Messages sent whose callbacks have not run yet.
    pub fn in_flight(&self) -> usize {
        self.outstanding_msgs
    }

    fn send_inner(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp_ms: i64,
        on_delivery: DeliveryCallback,
    ) -> Result<(), SendError> {
        let size = value.len() + key.map_or(0, <[u8]>::len);
        if self.outstanding_msgs >= self.cfg.max_messages
            || (self.outstanding_bytes > 0 && self.outstanding_bytes + size > self.cfg.max_bytes)
        {
            return Err(SendError::QueueFull);
        }
        let timestamp = if timestamp_ms < 0 {
            now_ms()
        } else {
            timestamp_ms
        };
        let shared = &*self.shared;
        let mut st = shared.lock();
        let ti = topic_index(&mut st, topic).map_err(SendError::Other)?;
        let batch_size = st.cfg.batch_size;
        let (p, sticky) = {
            let t = &st.topics[ti];
            let n = t.leaders.len();
            match (partition, key) {
                (Some(p), _) if p >= 0 && (p as usize) < n => (p as usize, false),
                (Some(p), _) => {
                    return Err(SendError::Other(format!("{topic} has no partition {p}")))
                }
                (None, Some(k)) => (partition_for_key(k, n) as usize, false),
                (None, None) => (t.sticky % n, true),
            }
        };
        let upper = record_size_upper_bound(key, value.len());
        // Close the open batch first if this record would overflow it.
        let overflow = matches!(&st.topics[ti].open[p], Some((b, _)) if !b.is_empty() && b.len() + upper > batch_size);
        let mut p = p;
        if overflow {
            close_and_dispatch(&mut st, &self.shared, ti, p);
            if sticky {
                p = st.topics[ti].sticky % st.topics[ti].leaders.len();
            }
        }
        let mut created = false;
        let t = &mut st.topics[ti];
        let last_count = t.last_count;
        let slot = &mut t.open[p];
        let (batch, bytes) = match slot {
            Some(b) => b,
            None => {
                created = true;
                let mut b = OpenBatch::new(batch_size.max(upper + 61), Instant::now());
                b.callbacks.reserve(last_count);
                slot.insert((b, 0))
            }
        };
        batch.append(key, value, timestamp);
        batch.callbacks.push(on_delivery);
        *bytes += size;
        let mut ready = batch.len() >= batch_size;
        let mut notify = false;
        if created {
            st.open_batches += 1;
            // The sweeper polls every linger.ms while batches come and go; it only needs a
            // wake-up (a futex syscall) when it went to sleep for good.
            notify = st.sweeper_idle;
            st.sweeper_idle = false;
        }
        if !ready && st.cfg.linger.is_zero() {
            // linger.ms=0: send now if the leader's connection can take another request;
            // otherwise the records pile up into this batch (up to batch.size), as with
            // librdkafka, and the sweeper sends it once the connection frees up.
            let leader = st.topics[ti].leaders[p];
            ready = st.conns.get(&leader).is_none_or(BrokerConn::can_send);
        }
        if ready {
            close_and_dispatch(&mut st, &self.shared, ti, p);
        }
        drop(st);
        if notify {
            shared.wake.notify_all();
        }
        self.outstanding_msgs += 1;
        self.outstanding_bytes += size;
        Ok(())
    }

    fn drain(&mut self, first_wait: Duration) -> usize {
        let mut n = 0;
        let first = if first_wait.is_zero() {
            self.events.try_recv().ok()
        } else {
            self.events.recv_timeout(first_wait).ok()
        };
        if let Some(r) = first {
            self.run_report(r);
            n += 1;
            while let Ok(r) = self.events.try_recv() {
                self.run_report(r);
                n += 1;
            }
        }
        n
    }

    fn flush_inner(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        {
            let mut st = self.shared.lock();
            for ti in 0..st.topics.len() {
                for p in 0..st.topics[ti].open.len() {
                    if st.topics[ti].open[p].is_some() {
                        close_and_dispatch(&mut st, &self.shared, ti, p);
                    }
                }
            }
        }
        self.shared.wake.notify_all();
        while self.outstanding_msgs > 0 {
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "flush timed out with {} messages undelivered",
                    self.outstanding_msgs
                ));
            }
            self.drain((deadline - now).min(Duration::from_millis(100)));
        }
        Ok(())
    }
}

impl Drop for NativeProducer {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.closed = true;
        for (_, c) in st.conns.drain() {
            c.dead.store(true, Ordering::Release);
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        drop(st);
        self.shared.wake.notify_all();
    }
}

impl crate::engine::Producer for NativeProducer {
    fn send(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp_ms: i64,
        on_delivery: DeliveryCallback,
    ) -> Result<(), SendError> {
        self.send_inner(topic, partition, key, value, timestamp_ms, on_delivery)
    }

    fn poll(&mut self, timeout: Duration) {
        self.drain(timeout);
    }

    fn flush(&mut self, timeout: Duration) -> Result<(), String> {
        self.flush_inner(timeout)
    }
}

impl BrokerConn {
    /// Nothing is waiting for the writer and a request slot is free (or the connection
    /// is dead, so that the batch gets re-routed now).
    fn can_send(&self) -> bool {
        self.dead.load(Ordering::Acquire)
            || (self.queued.load(Ordering::Acquire) == 0
                && self.slots.available.load(Ordering::Acquire) > 0)
    }
}

/// The index of `topic` in the state, fetching its metadata on first use.
fn topic_index(st: &mut State, topic: &str) -> Result<usize, String> {
    if let Some(t) = st.topics.get(st.last_topic) {
        if &*t.name == topic {
            return Ok(st.last_topic);
        }
    }
    if let Some(i) = st.topics.iter().position(|t| &*t.name == topic) {
        st.last_topic = i;
        return Ok(i);
    }
    let max_block = st.cfg.max_block;
    let (cluster, meta) = st
        .meta
        .wait_topic(topic, true, max_block)
        .map_err(|e| format!("metadata for {topic}: {e}"))?;
    st.brokers.extend(cluster.brokers);
    let n = meta.leaders.len();
    st.topics.push(TopicState {
        name: Arc::from(topic),
        leaders: meta.leaders,
        open: (0..n).map(|_| None).collect(),
        sticky: (now_ms() as usize) % n.max(1),
        last_count: 0,
    });
    st.last_topic = st.topics.len() - 1;
    Ok(st.last_topic)
}

/// Closes partition `p`'s open batch and sends it to its leader.
fn close_and_dispatch(st: &mut State, shared: &Arc<Shared>, ti: usize, p: usize) {
    let t = &mut st.topics[ti];
    let Some((batch, bytes)) = t.open[p].take() else {
        return;
    };
    if t.sticky % t.leaders.len() == p {
        t.sticky = (p + 1) % t.leaders.len();
    }
    st.open_batches -= 1;
    t.last_count = batch.count as usize;
    let OpenBatch {
        buf,
        count,
        base_timestamp,
        max_timestamp,
        callbacks,
        created,
    } = batch;
    let job = Job {
        topic: t.name.clone(),
        partition: p as i32,
        buf,
        finished: false,
        count,
        base_timestamp,
        max_timestamp,
        callbacks,
        bytes,
        created,
        retry_at: created,
    };
    dispatch(st, shared, job);
}

/// Routes a batch to its partition leader's connection (connecting if needed); batches
/// with no usable leader go to the retry list.
fn dispatch(st: &mut State, shared: &Arc<Shared>, job: Job) {
    let leader = st
        .topics
        .iter()
        .find(|t| t.name == job.topic)
        .and_then(|t| t.leaders.get(job.partition as usize).copied())
        .unwrap_or(-1);
    if leader < 0 {
        park(st, job);
        return;
    }
    let usable = st
        .conns
        .get(&leader)
        .is_some_and(|c| !c.dead.load(Ordering::Acquire));
    if !usable {
        st.conns.remove(&leader);
        match connect_broker(st, shared, leader) {
            Ok(c) => {
                st.conns.insert(leader, c);
            }
            Err(_) => {
                st.metadata_stale = true;
                park(st, job);
                return;
            }
        }
    }
    let conn = st.conns.get(&leader).expect("inserted above");
    conn.queued.fetch_add(1, Ordering::AcqRel);
    if let Err(mpsc::SendError(job)) = conn.tx.send(job) {
        st.conns.remove(&leader);
        park(st, job);
    }
}

fn park(st: &mut State, mut job: Job) {
    job.retry_at = Instant::now() + st.cfg.retry_backoff;
    st.metadata_stale = true;
    st.retries.push(job);
}

fn connect_broker(st: &mut State, shared: &Arc<Shared>, node: i32) -> io::Result<BrokerConn> {
    let addr = st
        .brokers
        .get(&node)
        .cloned()
        .ok_or_else(|| protocol_error(format!("unknown broker {node}")))?;
    let cfg = st.cfg.clone();
    let conn = Connection::connect(
        &addr,
        &cfg.client_id,
        cfg.request_timeout.min(Duration::from_secs(10)),
    )?;
    let version = conn.versions.pick(ApiKey::Produce, 3, 11)?;
    let (stream, reader, _, client_id) = conn.into_parts()?;
    stream.set_read_timeout(Some(cfg.request_timeout + Duration::from_secs(5)))?;
    let dead = Arc::new(AtomicBool::new(false));
    let queued = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<Job>();
    let slots = Arc::new(Slots::new(cfg.max_in_flight));
    let (inflight_tx, inflight_rx) = mpsc::channel::<InFlight>();
    let events = st.events.clone();
    let writer = Writer {
        stream: stream.try_clone()?,
        cfg: cfg.clone(),
        version,
        client_id,
        dead: dead.clone(),
        shared: shared.clone(),
        events: events.clone(),
        slots: slots.clone(),
        inflight: inflight_tx,
        queued: queued.clone(),
        correlation: 1000,
    };
    thread::Builder::new()
        .name(format!("native-w{node}"))
        .spawn(move || writer.run(rx))?;
    if cfg.acks != 0 {
        let reader_state = Reader {
            reader,
            stream: stream.try_clone()?,
            version,
            dead: dead.clone(),
            shared: shared.clone(),
            events,
            slots: slots.clone(),
            linger_zero: cfg.linger.is_zero(),
        };
        thread::Builder::new()
            .name(format!("native-r{node}"))
            .spawn(move || reader_state.run(inflight_rx))?;
    }
    Ok(BrokerConn {
        tx,
        queued,
        slots,
        dead,
        stream,
    })
}

/// Batches already represented in a request that the writer looks past, at most, for
/// batches of other partitions to add to it.
const GATHER_SCAN_LIMIT: usize = 256;

/// Counting semaphore for in-flight requests.
struct Slots {
    free: Mutex<usize>,
    /// A lock-free copy of `free`, for senders deciding whether to send now.
    available: AtomicUsize,
    cv: Condvar,
}

impl Slots {
    fn new(n: usize) -> Slots {
        Slots {
            free: Mutex::new(n),
            available: AtomicUsize::new(n),
            cv: Condvar::new(),
        }
    }

    /// Takes a slot; false if the connection died while waiting.
    fn acquire(&self, dead: &AtomicBool) -> bool {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            if dead.load(Ordering::Acquire) {
                return false;
            }
            free = self
                .cv
                .wait_timeout(free, Duration::from_millis(200))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *free -= 1;
        self.available.store(*free, Ordering::Release);
        true
    }

    fn release(&self) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        *free += 1;
        self.available.store(*free, Ordering::Release);
        drop(free);
        self.cv.notify_one();
    }
}

struct InFlight {
    correlation: i32,
    jobs: Vec<Job>,
}

struct Writer {
    stream: TcpStream,
    cfg: Arc<ProducerConfig>,
    version: i16,
    client_id: String,
    dead: Arc<AtomicBool>,
    shared: Arc<Shared>,
    events: Sender<Report>,
    slots: Arc<Slots>,
    inflight: Sender<InFlight>,
    queued: Arc<AtomicUsize>,
    correlation: i32,
}

impl Writer {
    fn run(mut self, rx: Receiver<Job>) {
        // Batches taken off the channel and not yet sent, oldest first. They (and the
        // batches of the request being built) still count in `queued` until written, so
        // that linger.ms=0 senders keep filling their open batch meanwhile.
        let mut carry: VecDeque<Job> = VecDeque::new();
        let mut head = Vec::with_capacity(4096);
        let mut pieces: Vec<Piece> = Vec::new();
        let mut seen: HashSet<(Arc<str>, i32)> = HashSet::new();
        loop {
            if carry.is_empty() {
                match rx.recv() {
                    Ok(job) => carry.push_back(job),
                    Err(_) => return,
                }
            }
            // Take a request slot first: batches handed over while max.in.flight requests
            // are outstanding then join this request (or grow in the caller's open batch).
            let slot = self.cfg.acks == 0 || self.slots.acquire(&self.dead);
            carry.extend(rx.try_iter());
            if !slot || self.dead.load(Ordering::Acquire) {
                if slot && self.cfg.acks != 0 {
                    self.slots.release();
                }
                let jobs: Vec<Job> = carry.drain(..).collect();
                self.queued.fetch_sub(jobs.len(), Ordering::AcqRel);
                self.shared.retry(jobs, "connection closed");
                continue;
            }
            // Gather: oldest first, one batch per partition and at most max.request.size
            // per request (the first always fits); the rest stays carried, in order.
            let max_request = self.cfg.max_request_size;
            let mut jobs: Vec<Job> = Vec::new();
            let mut size = 0usize;
            seen.clear();
            // Jobs looked at and left stay in `rest` (few: see GATHER_SCAN_LIMIT) and go back
            // to the front of `carry` in order; the untouched tail of `carry` is not moved.
            let mut rest: Vec<Job> = Vec::new();
            while let Some(job) = carry.pop_front() {
                let len = job.buf.len();
                if !jobs.is_empty() && size + len > max_request {
                    rest.push(job);
                    break;
                }
                if !seen.insert((job.topic.clone(), job.partition)) {
                    rest.push(job);
                    // A backlog of one partition's batches (one record each at linger.ms=0
                    // behind schedule) would otherwise be walked whole for every request:
                    // quadratic, ~100 requests/s with 30k batches queued.
                    if rest.len() >= GATHER_SCAN_LIMIT {
                        break;
                    }
                    continue;
                }
                size += len;
                jobs.push(job);
            }
            for job in rest.into_iter().rev() {
                carry.push_front(job);
            }
            let taken = jobs.len();
            // Close the batches (compression + CRC) off the caller's thread.
            let mut failed = Vec::new();
            jobs.retain_mut(|job| {
                if job.finished {
                    return true;
                }
                let buf = std::mem::take(&mut job.buf);
                match finish_batch(
                    buf,
                    job.count,
                    job.base_timestamp,
                    job.max_timestamp,
                    self.cfg.compression,
                ) {
                    Ok(b) => {
                        job.buf = b;
                        job.finished = true;
                        true
                    }
                    Err(e) => {
                        failed.push((
                            std::mem::take(&mut job.callbacks),
                            job.partition,
                            job.count,
                            job.bytes,
                            e,
                        ));
                        false
                    }
                }
            });
            for (callbacks, partition, count, bytes, e) in failed {
                let _ = self.events.send(Report {
                    partition,
                    base_offset: -1,
                    error: Some(format!("compression failed: {e}")),
                    callbacks,
                    count: count as usize,
                    bytes,
                });
            }
            if jobs.is_empty() {
                if self.cfg.acks != 0 {
                    self.slots.release();
                }
                self.queued.fetch_sub(taken, Ordering::AcqRel);
                continue;
            }
            jobs.sort_by(|a, b| a.topic.cmp(&b.topic));
            let correlation = self.correlation;
            self.correlation = self.correlation.wrapping_add(1) & 0x7fff_ffff;
            encode_produce(
                &mut head,
                &mut pieces,
                self.version,
                correlation,
                &self.client_id,
                self.cfg.acks,
                self.cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
                &jobs,
            );
            let slices: Vec<&[u8]> = pieces
                .iter()
                .map(|p| match *p {
                    Piece::Head(a, b) => &head[a..b],
                    Piece::Batch(i) => &jobs[i].buf[..],
                })
                .collect();
            let written = write_all_vectored(&mut self.stream, &slices);
            drop(slices);
            match written {
                Ok(()) => {
                    PRODUCE_REQUESTS_SENT.fetch_add(1, Ordering::Relaxed);
                    if self.cfg.acks == 0 {
                        for job in jobs {
                            let _ = self.events.send(Report::of(job, -1, None));
                        }
                    } else if let Err(mpsc::SendError(f)) =
                        self.inflight.send(InFlight { correlation, jobs })
                    {
                        self.shared.retry(f.jobs, "connection closed");
                    }
                }
                Err(e) => {
                    self.dead.store(true, Ordering::Release);
                    let _ = self.stream.shutdown(Shutdown::Both);
                    if self.cfg.acks != 0 {
                        self.slots.release();
                    }
                    self.shared.retry(jobs, &e.to_string());
                }
            }
            let left = self.queued.fetch_sub(taken, Ordering::AcqRel) - taken;
            if left == 0 && self.cfg.linger.is_zero() {
                // linger.ms=0 batches wait for the connection: tell the sweeper it is free.
                self.shared.wake.notify_all();
            }
        }
    }
}

/// A part of an encoded Produce request: request bytes in `head`, or a job's batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Piece {
    Head(usize, usize),
    Batch(usize),
}

fn put_len(out: &mut Vec<u8>, n: usize, flexible: bool, wide: bool) {
    if flexible {
        wire::varint::write_unsigned_varint(out, (n + 1) as u32);
    } else if wide {
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.extend_from_slice(&(n as i16).to_be_bytes());
    }
}

/// Encodes a Produce request (v3-v11) around the jobs' batch bytes, without copying
/// them: `head` gets every other byte, `pieces` says how to interleave. `jobs` must be
/// grouped by topic.
#[allow(clippy::too_many_arguments)]
fn encode_produce(
    head: &mut Vec<u8>,
    pieces: &mut Vec<Piece>,
    version: i16,
    correlation: i32,
    client_id: &str,
    acks: i16,
    timeout_ms: i32,
    jobs: &[Job],
) {
    head.clear();
    pieces.clear();
    let flexible = version >= 9;
    head.extend_from_slice(&[0, 0, 0, 0]); // frame size, patched below
    head.extend_from_slice(&(ApiKey::Produce as i16).to_be_bytes());
    head.extend_from_slice(&version.to_be_bytes());
    head.extend_from_slice(&correlation.to_be_bytes());
    head.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    head.extend_from_slice(client_id.as_bytes());
    if flexible {
        head.push(0); // header tagged fields
    }
    // transactional_id: null
    if flexible {
        head.push(0);
    } else {
        head.extend_from_slice(&(-1i16).to_be_bytes());
    }
    head.extend_from_slice(&acks.to_be_bytes());
    head.extend_from_slice(&timeout_ms.to_be_bytes());
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < jobs.len() {
        let mut j = i + 1;
        while j < jobs.len() && jobs[j].topic == jobs[i].topic {
            j += 1;
        }
        groups.push((i, j));
        i = j;
    }
    put_len(head, groups.len(), flexible, true);
    let mut start = 0;
    let mut total = 0usize;
    for (a, b) in groups {
        let name = jobs[a].topic.as_bytes();
        put_len(head, name.len(), flexible, false);
        head.extend_from_slice(name);
        put_len(head, b - a, flexible, true);
        for (k, job) in jobs[a..b].iter().enumerate() {
            head.extend_from_slice(&job.partition.to_be_bytes());
            put_len(head, job.buf.len(), flexible, true);
            pieces.push(Piece::Head(start, head.len()));
            start = head.len();
            pieces.push(Piece::Batch(a + k));
            total += job.buf.len();
            if flexible {
                head.push(0); // partition tagged fields
            }
        }
        if flexible {
            head.push(0); // topic tagged fields
        }
    }
    if flexible {
        head.push(0); // request tagged fields
    }
    pieces.push(Piece::Head(start, head.len()));
    total += head.len();
    let size = (total - 4) as i32;
    head[..4].copy_from_slice(&size.to_be_bytes());
}

struct Reader {
    reader: BufReader<TcpStream>,
    stream: TcpStream,
    version: i16,
    dead: Arc<AtomicBool>,
    shared: Arc<Shared>,
    events: Sender<Report>,
    slots: Arc<Slots>,
    /// linger.ms=0: wake the sweeper when a request slot frees up.
    linger_zero: bool,
}

impl Reader {
    fn run(mut self, inflight: Receiver<InFlight>) {
        while let Ok(entry) = inflight.recv() {
            let result = read_frame(&mut self.reader).and_then(|frame| {
                decode_response::<ProduceResponse>(
                    frame,
                    ApiKey::Produce,
                    self.version,
                    entry.correlation,
                )
            });
            self.slots.release();
            if self.linger_zero {
                self.shared.wake.notify_all();
            }
            match result {
                Ok(resp) => self.complete(entry.jobs, &resp),
                Err(e) => {
                    self.dead.store(true, Ordering::Release);
                    let _ = self.stream.shutdown(Shutdown::Both);
                    let mut jobs = entry.jobs;
                    // Everything else in flight on this socket is lost with it.
                    while let Ok(more) = inflight.recv_timeout(Duration::from_millis(10)) {
                        self.slots.release();
                        jobs.extend(more.jobs);
                    }
                    self.shared.retry(jobs, &e.to_string());
                    // Keep draining until the writer notices and stops.
                    while let Ok(more) = inflight.recv() {
                        self.slots.release();
                        self.shared.retry(more.jobs, &e.to_string());
                    }
                    return;
                }
            }
        }
    }

    fn complete(&self, jobs: Vec<Job>, resp: &ProduceResponse) {
        let mut retry = Vec::new();
        let mut why = String::new();
        for job in jobs {
            let part = resp
                .responses
                .iter()
                .filter(|t| *t.name == *job.topic)
                .flat_map(|t| t.partition_responses.iter())
                .find(|p| p.index == job.partition);
            match part {
                Some(p) if p.error_code == 0 => {
                    let _ = self.events.send(Report::of(job, p.base_offset, None));
                }
                Some(p) if is_retriable(p.error_code) => {
                    why = error_name(p.error_code);
                    retry.push(job);
                }
                Some(p) => {
                    let msg = match &p.error_message {
                        Some(m) if !m.is_empty() => format!("{}: {m}", error_name(p.error_code)),
                        _ => error_name(p.error_code),
                    };
                    let _ = self.events.send(Report::of(job, -1, Some(msg)));
                }
                None => {
                    let _ = self.events.send(Report::of(
                        job,
                        -1,
                        Some("partition missing from Produce response".into()),
                    ));
                }
            }
        }
        if !retry.is_empty() {
            self.shared.retry(retry, &why);
        }
    }
}

/// Closes batches past `linger.ms` and re-routes due retries.
fn leader_can_send(st: &State, ti: usize, p: usize) -> bool {
    let leader = st.topics[ti].leaders[p];
    st.conns.get(&leader).is_none_or(BrokerConn::can_send)
}

fn sweeper_loop(shared: &Arc<Shared>) {
    let mut st = shared.lock();
    let mut quiet_rounds = 0u32;
    loop {
        st.sweeper_idle = false;
        if st.closed {
            // Fail whatever is still waiting so flush() callers are not left hanging.
            for job in std::mem::take(&mut st.retries) {
                let _ = st
                    .events
                    .send(Report::of(job, -1, Some("producer closed".into())));
            }
            return;
        }
        let now = Instant::now();
        let linger = st.cfg.linger;
        let mut next: Option<Instant> = None;
        if st.open_batches > 0 {
            for ti in 0..st.topics.len() {
                for p in 0..st.topics[ti].open.len() {
                    let due = match &st.topics[ti].open[p] {
                        Some((b, _)) => b.created + linger,
                        None => continue,
                    };
                    if linger.is_zero() && !leader_can_send(&st, ti, p) {
                        // Sent once the connection frees up (the writer or reader wakes
                        // us); poll as a fallback.
                        let due = now + Duration::from_millis(1);
                        next = Some(next.map_or(due, |n| n.min(due)));
                        continue;
                    }
                    if due <= now {
                        close_and_dispatch(&mut st, shared, ti, p);
                    } else {
                        next = Some(next.map_or(due, |n| n.min(due)));
                    }
                }
            }
        }
        if !st.retries.is_empty() {
            let due_now = st.retries.iter().any(|j| j.retry_at <= now);
            if due_now && st.metadata_stale {
                refresh_metadata(&mut st);
            }
            let jobs = std::mem::take(&mut st.retries);
            for job in jobs {
                if now.duration_since(job.created) >= st.cfg.delivery_timeout {
                    let _ = st
                        .events
                        .send(Report::of(job, -1, Some("delivery timed out".into())));
                } else if job.retry_at <= now {
                    dispatch(&mut st, shared, job);
                } else {
                    st.retries.push(job);
                }
            }
            for j in &st.retries {
                next = Some(next.map_or(j.retry_at, |n| n.min(j.retry_at)));
            }
        }
        if next.is_some() {
            quiet_rounds = 0;
        }
        st = match next {
            // Nothing open: keep polling for a while (cheaper than a wake-up per batch
            // while records keep coming), then sleep until a new batch wakes us.
            None if quiet_rounds < 20 => {
                quiet_rounds += 1;
                let wait = linger.max(Duration::from_millis(1));
                shared
                    .wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => {
                st.sweeper_idle = true;
                shared.wake.wait(st).unwrap_or_else(|e| e.into_inner())
            }
            Some(t) => {
                let wait = t
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_micros(200));
                shared
                    .wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
    }
}

fn refresh_metadata(st: &mut State) {
    let names: Vec<String> = st.topics.iter().map(|t| t.name.to_string()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let Ok(cluster) = st.meta.metadata(&refs, false) else {
        return;
    };
    st.metadata_stale = false;
    st.brokers.extend(cluster.brokers);
    for t in &mut st.topics {
        if let Some(m) = cluster.topics.get(&*t.name) {
            if m.leaders.len() >= t.leaders.len() {
                t.open.resize_with(m.leaders.len(), || None);
                t.leaders.clone_from(&m.leaders);
            }
        }
    }
    // Connections to brokers that lead nothing any more can go.
    let leaders: std::collections::HashSet<i32> = st
        .topics
        .iter()
        .flat_map(|t| t.leaders.iter().copied())
        .collect();
    st.conns.retain(|node, _| leaders.contains(node));
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use wire::generated::ProduceRequest;
    use wire::primitives::Decodable;

    fn job(topic: &str, partition: i32, body: &[u8]) -> Job {
        Job {
            topic: Arc::from(topic),
            partition,
            buf: body.to_vec(),
            finished: true,
            count: 1,
            base_timestamp: 0,
            max_timestamp: 0,
            callbacks: Vec::new(),
            bytes: 0,
            created: Instant::now(),
            retry_at: Instant::now(),
        }
    }

    #[test]
    fn hand_encoded_produce_requests_decode_with_the_generated_codec() {
        let jobs = vec![
            job("alpha", 0, b"batch-a0"),
            job("alpha", 2, b"a2"),
            job("beta", 1, &[7u8; 300]),
        ];
        for version in 3..=11i16 {
            let (mut head, mut pieces) = (Vec::new(), Vec::new());
            encode_produce(&mut head, &mut pieces, version, 42, "cid", -1, 1234, &jobs);
            let mut frame = Vec::new();
            for p in &pieces {
                match *p {
                    Piece::Head(a, b) => frame.extend_from_slice(&head[a..b]),
                    Piece::Batch(i) => frame.extend_from_slice(&jobs[i].buf),
                }
            }
            let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
            assert_eq!(size, frame.len() - 4, "v{version}");
            let mut body = Bytes::from(frame[4..].to_vec());
            let hv = wire::generated::api::request_header_version(0, version);
            let header = wire::generated::RequestHeader::decode(&mut body, hv).unwrap();
            assert_eq!(
                (
                    header.request_api_key,
                    header.request_api_version,
                    header.correlation_id
                ),
                (0, version, 42)
            );
            assert_eq!(header.client_id.as_deref(), Some("cid"));
            let req = ProduceRequest::decode(&mut body, version).unwrap();
            assert!(body.is_empty(), "v{version}: {} bytes left", body.len());
            assert_eq!(req.acks, -1);
            assert_eq!(req.timeout_ms, 1234);
            assert_eq!(req.transactional_id, None);
            assert_eq!(req.topic_data.len(), 2);
            assert_eq!(req.topic_data[0].name, "alpha");
            assert_eq!(req.topic_data[0].partition_data.len(), 2);
            assert_eq!(req.topic_data[0].partition_data[1].index, 2);
            assert_eq!(
                req.topic_data[0].partition_data[1].records.as_deref(),
                Some(&b"a2"[..])
            );
            assert_eq!(
                req.topic_data[1].partition_data[0].records.as_deref(),
                Some(&[7u8; 300][..])
            );
            let _ = BytesMut::new();
        }
    }

    #[test]
    fn config_reads_kafka_and_librdkafka_names() {
        let props = vec![
            ("acks".to_string(), "1".to_string()),
            ("queue.buffering.max.ms".to_string(), "0".to_string()),
            ("compression.codec".to_string(), "lz4".to_string()),
            ("batch.size".to_string(), "65536".to_string()),
        ];
        let c = ProducerConfig::from_props(&props).unwrap();
        assert_eq!(c.acks, 1);
        assert_eq!(c.linger, Duration::ZERO);
        assert_eq!(c.compression, Compression::Lz4);
        assert_eq!(c.batch_size, 65536);
        let d = ProducerConfig::from_props(&[]).unwrap();
        assert_eq!((d.acks, d.batch_size, d.max_in_flight), (-1, 16384, 5));
        assert_eq!(d.linger, Duration::from_millis(5));
    }
}
