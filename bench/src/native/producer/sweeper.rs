//! The sweeper thread: closes batches past `linger.ms`, re-routes due retries after a
//! metadata refresh and `retry.backoff.ms`, and sleeps when nothing is open.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::routing::{close_and_dispatch, dispatch};
use super::state::{BrokerConn, Report, Shared, State};

/// Whether the leader of partition `p` of topic `ti` can take a batch now (one with no
/// connection yet can: the connection opens on dispatch).
pub(super) fn leader_can_send(st: &State, ti: usize, p: usize) -> bool {
    let leader = st.topics[ti].leaders[p];
    st.conns.get(&leader).is_none_or(BrokerConn::can_send)
}

/// Closes batches past `linger.ms` and re-routes due retries.
pub(super) fn sweeper_loop(shared: &Arc<Shared>) {
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

pub(super) fn refresh_metadata(st: &mut State) {
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
