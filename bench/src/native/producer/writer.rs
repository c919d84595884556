//! A connection's writer thread: closes queued batches, packs them into Produce requests
//! (one batch per partition per request) and writes them, pipelining up to the in-flight
//! limit.

use std::collections::{HashSet, VecDeque};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::encode::{encode_produce, Piece};
use super::state::{Report, Shared};
use super::{Job, ProducerConfig, PRODUCE_REQUESTS_SENT};
use crate::native::batch::finish_batch;
use kclient::conn::write_all_vectored;

/// Batches already represented in a request that the writer looks past, at most, for
/// batches of other partitions to add to it.
const GATHER_SCAN_LIMIT: usize = 256;

/// Counting semaphore for in-flight requests.
pub(super) struct Slots {
    pub(super) free: Mutex<usize>,
    /// A lock-free copy of `free`, for senders deciding whether to send now.
    pub(super) available: AtomicUsize,
    pub(super) cv: Condvar,
}

impl Slots {
    pub(super) fn new(n: usize) -> Slots {
        Slots {
            free: Mutex::new(n),
            available: AtomicUsize::new(n),
            cv: Condvar::new(),
        }
    }

    /// Takes a slot; false if the connection died while waiting.
    pub(super) fn acquire(&self, dead: &AtomicBool) -> bool {
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

    pub(super) fn release(&self) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        *free += 1;
        self.available.store(*free, Ordering::Release);
        drop(free);
        self.cv.notify_one();
    }
}

pub(super) struct InFlight {
    pub(super) correlation: i32,
    pub(super) jobs: Vec<Job>,
}

pub(super) struct Writer {
    pub(super) stream: TcpStream,
    pub(super) cfg: Arc<ProducerConfig>,
    pub(super) version: i16,
    pub(super) client_id: String,
    pub(super) dead: Arc<AtomicBool>,
    pub(super) shared: Arc<Shared>,
    pub(super) events: Sender<Report>,
    pub(super) slots: Arc<Slots>,
    pub(super) inflight: Sender<InFlight>,
    pub(super) queued: Arc<AtomicUsize>,
    pub(super) correlation: i32,
}

impl Writer {
    pub(super) fn run(mut self, rx: Receiver<Job>) {
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
