//! Where a batch goes: its topic's metadata, its leader's connection (opened on first use,
//! with its writer and reader threads), or the retry list while no leader can take it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use wire::generated::api::ApiKey;

use super::reader::Reader;
use super::state::{BrokerConn, Shared, State, TopicState};
use super::writer::{InFlight, Slots, Writer};
use super::{now_ms, Job};
use crate::native::batch::OpenBatch;
use kclient::conn::Parts;

use crate::native::protocol_error;

/// The index of `topic` in the state, fetching its metadata on first use.
pub(super) fn topic_index(st: &mut State, topic: &str) -> Result<usize, String> {
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
pub(super) fn close_and_dispatch(st: &mut State, shared: &Arc<Shared>, ti: usize, p: usize) {
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
pub(super) fn dispatch(st: &mut State, shared: &Arc<Shared>, job: Job) {
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

pub(super) fn park(st: &mut State, mut job: Job) {
    job.retry_at = Instant::now() + st.cfg.retry_backoff;
    st.metadata_stale = true;
    st.retries.push(job);
}

pub(super) fn connect_broker(
    st: &mut State,
    shared: &Arc<Shared>,
    node: i32,
) -> io::Result<BrokerConn> {
    let addr = st
        .brokers
        .get(&node)
        .cloned()
        .ok_or_else(|| protocol_error(format!("unknown broker {node}")))?;
    let cfg = st.cfg.clone();
    let conn = crate::native::connect(
        &addr,
        &cfg.client_id,
        cfg.request_timeout.min(Duration::from_secs(10)),
        None,
    )?;
    let version = conn.versions().pick(ApiKey::Produce, 3, 11)?;
    let Parts {
        writer: stream,
        reader,
        client_id,
        max_response_bytes,
        ..
    } = conn.into_parts()?;
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
            max_frame: max_response_bytes,
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
