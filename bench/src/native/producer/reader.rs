//! A connection's reader thread: matches Produce responses to the requests in flight, in
//! order, and reports deliveries or hands batches back for a retry.

use std::io::BufReader;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use wire::generated::api::ApiKey;
use wire::generated::ProduceResponse;

use super::state::{Report, Shared};
use super::writer::{InFlight, Slots};
use super::Job;
use crate::native::{error_name, is_retriable};
use kclient::conn::{decode_response, read_frame};

pub(super) struct Reader {
    pub(super) reader: BufReader<TcpStream>,
    pub(super) stream: TcpStream,
    pub(super) version: i16,
    /// The bound on a response frame's size.
    pub(super) max_frame: usize,
    pub(super) dead: Arc<AtomicBool>,
    pub(super) shared: Arc<Shared>,
    pub(super) events: Sender<Report>,
    pub(super) slots: Arc<Slots>,
    /// linger.ms=0: wake the sweeper when a request slot frees up.
    pub(super) linger_zero: bool,
}

impl Reader {
    pub(super) fn run(mut self, inflight: Receiver<InFlight>) {
        while let Ok(entry) = inflight.recv() {
            let result = read_frame(&mut self.reader, self.max_frame).and_then(|frame| {
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

    pub(super) fn complete(&self, jobs: Vec<Job>, resp: &ProduceResponse) {
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
