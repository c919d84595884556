//! The native consumer: manual assignment of every partition of a topic, from the
//! earliest offset, no group.
//!
//! One fetcher thread per partition leader keeps a Fetch request in flight: as soon as a
//! response arrives it computes the next offsets from the batch headers alone (no record
//! decoding), sends the next Fetch and hands the raw response to the caller through a
//! bounded channel. The caller walks batches and records in `poll_into`, borrowing from
//! the response buffer (compressed batches are decompressed once per batch), and fills
//! `ConsumedRecord`s without allocating per record.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use wire::generated::api::ApiKey;
use wire::generated::fetch_request::{FetchPartition, FetchTopic};
use wire::generated::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use wire::generated::{
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse,
};
use wire::record_batch::{records, validate_batch, BatchError, BatchHeader};
use wire::ErrorCode;

use super::{error_name, is_retriable, protocol_error, MetaClient, PropView};
use crate::engine::ConsumedRecord;
use kclient::conn::Connection;

/// Consumer settings, from Kafka property names (librdkafka aliases accepted).
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    pub client_id: String,
    pub fetch_max_bytes: i32,
    pub partition_max_bytes: i32,
    pub min_bytes: i32,
    pub max_wait_ms: i32,
    pub isolation_level: i8,
    pub check_crcs: bool,
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
    /// Responses buffered ahead of the caller, per consumer.
    pub prefetch: usize,
    /// TLS (`security.protocol=SSL`, see [`super::tls`]); None: plain.
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl ConsumerConfig {
    pub fn from_props(props: &[(String, String)]) -> anyhow::Result<ConsumerConfig> {
        let p = PropView(props);
        Ok(ConsumerConfig {
            client_id: p.string(&["client.id"], "bench-native"),
            fetch_max_bytes: p.num(&["fetch.max.bytes"], 52_428_800)?,
            partition_max_bytes: p.num(
                &["max.partition.fetch.bytes", "fetch.message.max.bytes"],
                1_048_576,
            )?,
            min_bytes: p.num(&["fetch.min.bytes"], 1)?,
            max_wait_ms: p.num(&["fetch.max.wait.ms", "fetch.wait.max.ms"], 500)?,
            isolation_level: match p.string(&["isolation.level"], "read_uncommitted").as_str() {
                "read_committed" => 1,
                _ => 0,
            },
            check_crcs: p
                .string(&["check.crcs"], "false")
                .eq_ignore_ascii_case("true"),
            request_timeout: Duration::from_millis(p.num(&["request.timeout.ms"], 30_000)?),
            retry_backoff: Duration::from_millis(p.num(&["retry.backoff.ms"], 100)?),
            prefetch: p.num(&["native.prefetch.responses"], 4)?.max(1),
            tls: super::tls::client_config(props)?,
        })
    }
}

/// One partition's records from one Fetch response.
struct PartData {
    partition: i32,
    /// The offset the fetch asked for: records before it (a fetch inside a batch returns
    /// the whole batch) are skipped.
    fetch_offset: i64,
    records: Bytes,
}

/// The most fetcher messages (fetch responses) one `poll_into` call drains after the
/// first, so that a call returns promptly even while fetchers keep the channel fed.
const MAX_DRAIN_PER_POLL: usize = 500;

enum Msg {
    Data(Vec<PartData>),
    /// The fetcher gave up on a partition (its leader moved): re-assign it.
    Lost(i32),
    /// The fetcher for this broker stopped: re-assign everything it had.
    Gone(i32, String),
    /// A non-retriable error.
    Error(String),
}

enum Ctl {
    /// Fetch this partition from this offset (-2: the earliest).
    Add(i32, i64),
}

struct FetcherHandle {
    ctl: Sender<Ctl>,
    stream: TcpStream,
}

pub struct NativeConsumer {
    cfg: std::sync::Arc<ConsumerConfig>,
    meta: MetaClient,
    topic: Option<String>,
    /// Next offset to hand out per partition (-2: the earliest, not known yet).
    position: Vec<i64>,
    /// Which broker fetches each partition (-1: none, waiting to be re-assigned).
    assigned: Vec<i32>,
    fetchers: HashMap<i32, FetcherHandle>,
    rx: Receiver<Msg>,
    tx: SyncSender<Msg>,
    reassign_at: Option<Instant>,
}

impl NativeConsumer {
    pub fn new(bootstrap: &str, props: &[(String, String)]) -> anyhow::Result<NativeConsumer> {
        let cfg = std::sync::Arc::new(ConsumerConfig::from_props(props)?);
        let mut meta = MetaClient::new(
            bootstrap,
            &cfg.client_id,
            cfg.request_timeout.min(Duration::from_secs(30)),
        )
        .with_tls(cfg.tls.clone());
        meta.metadata(&[], false)
            .map_err(|e| anyhow::anyhow!("cannot reach {bootstrap}: {e}"))?;
        let (tx, rx) = mpsc::sync_channel(cfg.prefetch);
        Ok(NativeConsumer {
            cfg,
            meta,
            topic: None,
            position: Vec::new(),
            assigned: Vec::new(),
            fetchers: HashMap::new(),
            rx,
            tx,
            reassign_at: None,
        })
    }

    fn assign_all_inner(&mut self, topic: &str) -> Result<Vec<i32>, String> {
        let (_, t) = self
            .meta
            .wait_topic(topic, true, Duration::from_secs(60))
            .map_err(|e| format!("metadata for {topic}: {e}"))?;
        self.stop_fetchers();
        self.topic = Some(topic.to_string());
        let n = t.leaders.len();
        self.position = vec![-2; n];
        self.assigned = vec![-1; n];
        self.reassign_at = Some(Instant::now());
        self.reassign()?;
        Ok((0..n as i32).collect())
    }

    fn stop_fetchers(&mut self) {
        for (_, f) in self.fetchers.drain() {
            let _ = f.stream.shutdown(Shutdown::Both);
        }
        // Drop whatever the old fetchers had queued.
        let (tx, rx) = mpsc::sync_channel(self.cfg.prefetch);
        self.tx = tx;
        self.rx = rx;
    }

    /// Hands every unassigned partition to its leader's fetcher (starting one if needed).
    fn reassign(&mut self) -> Result<(), String> {
        let Some(topic) = self.topic.clone() else {
            return Ok(());
        };
        if !self.assigned.iter().any(|&a| a < 0) {
            self.reassign_at = None;
            return Ok(());
        }
        let cluster = match self.meta.metadata(&[topic.as_str()], false) {
            Ok(c) => c,
            Err(_) => {
                self.reassign_at = Some(Instant::now() + self.cfg.retry_backoff);
                return Ok(());
            }
        };
        let leaders = cluster
            .topics
            .get(&topic)
            .map(|t| t.leaders.clone())
            .unwrap_or_default();
        let mut waiting = false;
        for p in 0..self.assigned.len() {
            if self.assigned[p] >= 0 {
                continue;
            }
            let leader = leaders.get(p).copied().unwrap_or(-1);
            let Some(addr) = cluster.brokers.get(&leader).cloned() else {
                waiting = true;
                continue;
            };
            if !self.fetchers.contains_key(&leader) {
                match spawn_fetcher(&self.cfg, &addr, leader, &topic, self.tx.clone()) {
                    Ok(h) => {
                        self.fetchers.insert(leader, h);
                    }
                    Err(_) => {
                        waiting = true;
                        continue;
                    }
                }
            }
            let sent = self.fetchers[&leader]
                .ctl
                .send(Ctl::Add(p as i32, self.position[p]))
                .is_ok();
            if sent {
                self.assigned[p] = leader;
            } else {
                self.fetchers.remove(&leader);
                waiting = true;
            }
        }
        self.reassign_at = waiting.then(|| Instant::now() + self.cfg.retry_backoff);
        Ok(())
    }

    /// Appends the records of one fetched partition, skipping those before the fetch
    /// offset and control batches.
    fn emit(&mut self, data: &PartData, out: &mut Vec<ConsumedRecord>) -> Result<(), String> {
        let p = data.partition as usize;
        let mut rest: &[u8] = &data.records;
        while !rest.is_empty() {
            let header = match BatchHeader::parse(rest) {
                Ok(h) => h,
                // A partial batch at the end of a response is normal.
                Err(BatchError::Truncated { .. }) => break,
                Err(e) => return Err(format!("partition {p}: {e}")),
            };
            let batch = &rest[..header.total_bytes()];
            rest = &rest[header.total_bytes()..];
            if header.next_offset() <= data.fetch_offset {
                continue;
            }
            if self.cfg.check_crcs {
                validate_batch(batch).map_err(|e| format!("partition {p}: {e}"))?;
            }
            if !header.is_control() {
                let recs = records(batch).map_err(|e| format!("partition {p}: {e}"))?;
                for rec in recs.iter() {
                    let rec = rec.map_err(|e| format!("partition {p}: {e}"))?;
                    if rec.offset < data.fetch_offset {
                        continue;
                    }
                    let value = rec.value.unwrap_or(&[]);
                    out.push(ConsumedRecord {
                        partition: data.partition,
                        offset: rec.offset,
                        timestamp_ms: rec.timestamp,
                        key_len: rec.key.map_or(0, <[u8]>::len),
                        value_len: value.len(),
                        value_prefix: ConsumedRecord::prefix_of(value),
                    });
                }
            }
            if let Some(pos) = self.position.get_mut(p) {
                *pos = (*pos).max(header.next_offset());
            }
        }
        Ok(())
    }

    fn handle(&mut self, msg: Msg, out: &mut Vec<ConsumedRecord>) -> Result<(), String> {
        match msg {
            Msg::Data(parts) => {
                for d in &parts {
                    self.emit(d, out)?;
                }
            }
            Msg::Lost(p) => {
                if let Some(a) = self.assigned.get_mut(p as usize) {
                    *a = -1;
                }
                self.reassign_at
                    .get_or_insert_with(|| Instant::now() + self.cfg.retry_backoff);
            }
            Msg::Gone(node, _why) => {
                self.fetchers.remove(&node);
                for a in &mut self.assigned {
                    if *a == node {
                        *a = -1;
                    }
                }
                self.reassign_at
                    .get_or_insert_with(|| Instant::now() + self.cfg.retry_backoff);
            }
            Msg::Error(e) => return Err(e),
        }
        Ok(())
    }

    fn poll_inner(
        &mut self,
        out: &mut Vec<ConsumedRecord>,
        timeout: Duration,
    ) -> Result<(), String> {
        if self.topic.is_none() {
            return Err("assign_all was not called".into());
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.reassign_at {
                if Instant::now() >= at {
                    self.reassign()?;
                }
            }
            let now = Instant::now();
            let mut wait = deadline.saturating_duration_since(now);
            if let Some(at) = self.reassign_at {
                wait = wait.min(
                    at.saturating_duration_since(now)
                        .max(Duration::from_millis(1)),
                );
            }
            let first = if wait.is_zero() {
                self.rx.try_recv().ok()
            } else {
                match self.rx.recv_timeout(wait) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return Err("fetchers stopped".into()),
                }
            };
            let before = out.len();
            if let Some(m) = first {
                self.handle(m, out)?;
                // Drain what is already queued, but bounded: a fetcher that keeps up
                // would otherwise keep this loop going forever.
                let mut budget = MAX_DRAIN_PER_POLL;
                while budget > 0 {
                    budget -= 1;
                    match self.rx.try_recv() {
                        Ok(m) => self.handle(m, out)?,
                        Err(_) => break,
                    }
                    if Instant::now() >= deadline {
                        break;
                    }
                }
            }
            if out.len() > before || Instant::now() >= deadline {
                return Ok(());
            }
        }
    }
}

impl Drop for NativeConsumer {
    fn drop(&mut self) {
        for (_, f) in self.fetchers.drain() {
            let _ = f.stream.shutdown(Shutdown::Both);
        }
    }
}

impl crate::engine::Consumer for NativeConsumer {
    fn assign_all(&mut self, topic: &str) -> Result<Vec<i32>, String> {
        self.assign_all_inner(topic)
    }

    fn poll_into(
        &mut self,
        out: &mut Vec<ConsumedRecord>,
        timeout: Duration,
    ) -> Result<(), String> {
        self.poll_inner(out, timeout)
    }
}

fn spawn_fetcher(
    cfg: &std::sync::Arc<ConsumerConfig>,
    addr: &str,
    node: i32,
    topic: &str,
    out: SyncSender<Msg>,
) -> io::Result<FetcherHandle> {
    let conn = super::connect(
        addr,
        &cfg.client_id,
        cfg.request_timeout.min(Duration::from_secs(10)),
        cfg.tls.as_ref(),
    )?;
    // v4+ carries record batch v2; v13+ names topics by id, so stay at or below v12.
    let fetch_version = conn.versions().pick(ApiKey::Fetch, 4, 12)?;
    let list_version = conn.versions().pick(ApiKey::ListOffsets, 1, 10)?;
    let metadata_version = conn.versions().pick(ApiKey::Metadata, 1, 12)?;
    // A fetch can wait max_wait_ms on the broker before answering.
    let read_timeout = cfg.request_timeout + Duration::from_millis(cfg.max_wait_ms.max(0) as u64);
    conn.set_read_timeout(Some(read_timeout))?;
    let stream = connect_handle(&conn)?;
    let (ctl_tx, ctl_rx) = mpsc::channel();
    let mut fetcher = Fetcher {
        cfg: cfg.clone(),
        conn,
        node,
        topic: topic.to_string(),
        fetch_version,
        list_version,
        metadata_version,
        parts: Vec::new(),
        out,
    };
    thread::Builder::new()
        .name(format!("native-fetch{node}"))
        .spawn(move || {
            let why = fetcher.run(&ctl_rx);
            let _ = fetcher.out.send(Msg::Gone(fetcher.node, why));
        })?;
    Ok(FetcherHandle {
        ctl: ctl_tx,
        stream,
    })
}

fn connect_handle(conn: &Connection) -> io::Result<TcpStream> {
    Ok(conn.try_clone_stream()?)
}

struct FetchPart {
    partition: i32,
    offset: i64,
    max_bytes: i32,
    backoff_until: Option<Instant>,
}

struct Fetcher {
    cfg: std::sync::Arc<ConsumerConfig>,
    conn: Connection,
    node: i32,
    topic: String,
    fetch_version: i16,
    list_version: i16,
    metadata_version: i16,
    parts: Vec<FetchPart>,
    out: SyncSender<Msg>,
}

impl Fetcher {
    /// Runs until the connection fails or the consumer goes away; returns why.
    fn run(&mut self, ctl: &Receiver<Ctl>) -> String {
        loop {
            let mut next = if self.parts.is_empty() {
                match ctl.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return "consumer closed".into(),
                }
            } else {
                None
            };
            loop {
                match next.take().map(Ok).unwrap_or_else(|| ctl.try_recv()) {
                    Ok(Ctl::Add(p, offset)) => {
                        self.parts.retain(|x| x.partition != p);
                        self.parts.push(FetchPart {
                            partition: p,
                            offset,
                            max_bytes: self.cfg.partition_max_bytes,
                            backoff_until: None,
                        });
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return "consumer closed".into(),
                }
            }
            if let Err(e) = self.resolve_offsets() {
                return e.to_string();
            }
            match self.fetch_once() {
                Ok(true) => {}
                Ok(false) => return "consumer closed".into(),
                Err(e) => return e.to_string(),
            }
        }
    }

    /// ListOffsets(earliest) for partitions that start at -2.
    fn resolve_offsets(&mut self) -> io::Result<()> {
        let want: Vec<i32> = self
            .parts
            .iter()
            .filter(|p| p.offset < 0)
            .map(|p| p.partition)
            .collect();
        if want.is_empty() {
            return Ok(());
        }
        let req = ListOffsetsRequest {
            replica_id: -1,
            isolation_level: self.cfg.isolation_level,
            topics: vec![ListOffsetsTopic {
                name: self.topic.clone(),
                partitions: want
                    .iter()
                    .map(|&p| ListOffsetsPartition {
                        partition_index: p,
                        current_leader_epoch: -1,
                        timestamp: -2,
                        max_num_offsets: 1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            timeout_ms: self.cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
            ..Default::default()
        };
        let resp: ListOffsetsResponse =
            self.conn
                .request(ApiKey::ListOffsets, self.list_version, &req)?;
        let mut moved = Vec::new();
        for t in &resp.topics {
            for r in &t.partitions {
                let Some(part) = self
                    .parts
                    .iter_mut()
                    .find(|x| x.partition == r.partition_index)
                else {
                    continue;
                };
                if r.error_code == 0 {
                    part.offset = if self.list_version == 0 {
                        r.old_style_offsets.first().copied().unwrap_or(0)
                    } else {
                        r.offset
                    };
                } else if r.error_code == ErrorCode::NotLeaderOrFollower.code() {
                    moved.push(r.partition_index);
                } else if !is_retriable(r.error_code) {
                    let _ = self.out.send(Msg::Error(format!(
                        "ListOffsets {}-{}: {}",
                        self.topic,
                        r.partition_index,
                        error_name(r.error_code)
                    )));
                }
            }
        }
        self.give_up(&moved);
        if self.parts.iter().any(|p| p.offset < 0) {
            thread::sleep(self.cfg.retry_backoff);
        }
        Ok(())
    }

    fn give_up(&mut self, partitions: &[i32]) {
        for &p in partitions {
            self.parts.retain(|x| x.partition != p);
            let _ = self.out.send(Msg::Lost(p));
        }
    }

    /// One Fetch round trip; false once the consumer is gone.
    fn fetch_once(&mut self) -> io::Result<bool> {
        let now = Instant::now();
        let ready: Vec<&FetchPart> = self
            .parts
            .iter()
            .filter(|p| p.offset >= 0 && p.backoff_until.is_none_or(|t| t <= now))
            .collect();
        if ready.is_empty() {
            thread::sleep(self.cfg.retry_backoff.min(Duration::from_millis(50)));
            return Ok(true);
        }
        let req = FetchRequest {
            replica_id: -1,
            max_wait_ms: self.cfg.max_wait_ms,
            min_bytes: self.cfg.min_bytes,
            max_bytes: self.cfg.fetch_max_bytes,
            isolation_level: self.cfg.isolation_level,
            session_id: 0,
            session_epoch: -1,
            topics: vec![FetchTopic {
                topic: self.topic.clone(),
                partitions: ready
                    .iter()
                    .map(|p| FetchPartition {
                        partition: p.partition,
                        current_leader_epoch: -1,
                        fetch_offset: p.offset,
                        last_fetched_epoch: -1,
                        log_start_offset: -1,
                        partition_max_bytes: p.max_bytes,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let resp: FetchResponse = self.conn.request(ApiKey::Fetch, self.fetch_version, &req)?;
        if resp.error_code != 0 {
            if is_retriable(resp.error_code) {
                thread::sleep(self.cfg.retry_backoff);
                return Ok(true);
            }
            return Err(protocol_error(format!(
                "Fetch: {}",
                error_name(resp.error_code)
            )));
        }
        let mut data = Vec::new();
        let mut lost = Vec::new();
        let mut refresh = false;
        for t in resp.responses {
            for pd in t.partitions {
                let Some(part) = self
                    .parts
                    .iter_mut()
                    .find(|x| x.partition == pd.partition_index)
                else {
                    continue;
                };
                match pd.error_code {
                    0 => {
                        let Some(recs) = pd.records.filter(|r| !r.is_empty()) else {
                            continue;
                        };
                        // Next offset from the batch headers alone.
                        let mut pos = 0usize;
                        let mut next = part.offset;
                        while let Ok(h) = BatchHeader::parse(&recs[pos..]) {
                            next = next.max(h.next_offset());
                            pos += h.total_bytes();
                        }
                        if next == part.offset {
                            // Not one whole batch fitted: ask for more next time.
                            part.max_bytes = part
                                .max_bytes
                                .saturating_mul(2)
                                .min(self.cfg.fetch_max_bytes.max(part.max_bytes));
                            continue;
                        }
                        data.push(PartData {
                            partition: part.partition,
                            fetch_offset: part.offset,
                            records: recs.slice(..pos),
                        });
                        part.offset = next;
                    }
                    c if c == ErrorCode::OffsetOutOfRange.code() => {
                        // auto.offset.reset=earliest
                        part.offset = -2;
                    }
                    c if is_retriable(c) => {
                        part.backoff_until = Some(Instant::now() + self.cfg.retry_backoff);
                        refresh = true;
                    }
                    c => {
                        let _ = self.out.send(Msg::Error(format!(
                            "Fetch {}-{}: {}",
                            self.topic,
                            pd.partition_index,
                            error_name(c)
                        )));
                        lost.push(pd.partition_index);
                    }
                }
            }
        }
        if refresh {
            lost.extend(self.moved_partitions()?);
        }
        self.give_up(&lost);
        if !data.is_empty() && self.out.send(Msg::Data(data)).is_err() {
            return Ok(false);
        }
        Ok(true)
    }

    /// Partitions this broker no longer leads, per a fresh Metadata.
    fn moved_partitions(&mut self) -> io::Result<Vec<i32>> {
        let req = MetadataRequest {
            topics: Some(vec![
                wire::generated::metadata_request::MetadataRequestTopic {
                    name: Some(self.topic.clone()),
                    ..Default::default()
                },
            ]),
            allow_auto_topic_creation: false,
            ..Default::default()
        };
        let resp: MetadataResponse =
            self.conn
                .request(ApiKey::Metadata, self.metadata_version, &req)?;
        let mut moved = Vec::new();
        for t in &resp.topics {
            if t.name.as_deref() != Some(self.topic.as_str()) {
                continue;
            }
            for p in &t.partitions {
                if p.leader_id >= 0
                    && p.leader_id != self.node
                    && self.parts.iter().any(|x| x.partition == p.partition_index)
                {
                    moved.push(p.partition_index);
                }
            }
        }
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_are_kafkas() {
        let c = ConsumerConfig::from_props(&[]).unwrap();
        assert_eq!(c.fetch_max_bytes, 52_428_800);
        assert_eq!(c.partition_max_bytes, 1_048_576);
        assert_eq!(c.max_wait_ms, 500);
        assert_eq!(c.min_bytes, 1);
        let c = ConsumerConfig::from_props(&[("fetch.max.bytes".into(), "1000".into())]).unwrap();
        assert_eq!(c.fetch_max_bytes, 1000);
    }
}
