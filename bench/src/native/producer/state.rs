//! What the caller's thread, the sweeper and the connection threads share: batches on their
//! way (`Job`), delivery reports, per-topic open batches, and the connections, under one
//! mutex.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::writer::Slots;
use super::ProducerConfig;
use crate::engine::DeliveryCallback;
use crate::native::batch::OpenBatch;
use crate::native::MetaClient;

/// A batch on its way to a broker (or back, for a retry).
pub(crate) struct Job {
    pub(super) topic: Arc<str>,
    pub(super) partition: i32,
    /// Records (after header room) until `finished`; then the whole batch.
    pub(super) buf: Vec<u8>,
    pub(super) finished: bool,
    pub(super) count: i32,
    pub(super) base_timestamp: i64,
    pub(super) max_timestamp: i64,
    pub(super) callbacks: Vec<DeliveryCallback>,
    /// Bytes charged against the caller's buffer limit.
    pub(super) bytes: usize,
    pub(super) created: Instant,
    pub(super) retry_at: Instant,
}

/// A delivery report for one batch, sent to the caller's thread.
pub(super) struct Report {
    pub(super) partition: i32,
    pub(super) base_offset: i64,
    pub(super) error: Option<String>,
    pub(super) callbacks: Vec<DeliveryCallback>,
    pub(super) count: usize,
    pub(super) bytes: usize,
}

impl Report {
    pub(super) fn of(job: Job, base_offset: i64, error: Option<String>) -> Report {
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

pub(super) struct TopicState {
    pub(super) name: Arc<str>,
    pub(super) leaders: Vec<i32>,
    pub(super) open: Vec<Option<(OpenBatch, usize)>>,
    pub(super) sticky: usize,
    /// Records in the last batch closed (to size the next one's callback list).
    pub(super) last_count: usize,
}

pub(super) struct BrokerConn {
    pub(super) tx: Sender<Job>,
    /// Batches handed to the writer and not yet written to the socket.
    pub(super) queued: Arc<AtomicUsize>,
    pub(super) slots: Arc<Slots>,
    pub(super) dead: Arc<AtomicBool>,
    pub(super) stream: TcpStream,
}

pub(super) struct State {
    pub(super) cfg: Arc<ProducerConfig>,
    pub(super) meta: MetaClient,
    pub(super) brokers: HashMap<i32, String>,
    pub(super) topics: Vec<TopicState>,
    pub(super) last_topic: usize,
    pub(super) conns: HashMap<i32, BrokerConn>,
    pub(super) retries: Vec<Job>,
    pub(super) metadata_stale: bool,
    pub(super) open_batches: usize,
    /// The sweeper is waiting with no timeout: the next new batch must wake it.
    pub(super) sweeper_idle: bool,
    pub(super) closed: bool,
    pub(super) events: Sender<Report>,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) wake: Condvar,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands batches that failed with a retriable error back for re-routing, or fails them
    /// once their delivery timeout has passed.
    pub(super) fn retry(&self, jobs: impl IntoIterator<Item = Job>, why: &str) {
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

impl BrokerConn {
    /// Nothing is waiting for the writer and a request slot is free (or the connection
    /// is dead, so that the batch gets re-routed now).
    pub(super) fn can_send(&self) -> bool {
        self.dead.load(Ordering::Acquire)
            || (self.queued.load(Ordering::Acquire) == 0
                && self.slots.available.load(Ordering::Acquire) > 0)
    }
}
