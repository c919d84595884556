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

mod config;
mod encode;
mod reader;
mod routing;
mod state;
mod sweeper;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::HashMap;
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use self::config::{parse_compression, ProducerConfig};
use self::routing::{close_and_dispatch, topic_index};
pub(crate) use self::state::Job;
use self::state::{BrokerConn, Report, Shared, State};
use self::sweeper::sweeper_loop;
use super::batch::{partition_for_key, record_size_upper_bound, OpenBatch};
use super::MetaClient;
use crate::engine::{DeliveryCallback, DeliveryInfo, SendError};

/// Produce requests written by every native producer of this process so far: benches read
/// it before and after a run to report requests/s and records per request for any broker
/// (the null broker counts what it receives, other brokers do not tell).
pub static PRODUCE_REQUESTS_SENT: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

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
