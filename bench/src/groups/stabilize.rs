//! `bench groups stabilize`: N members join one new group; the time until every member of one
//! generation has its assignment.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::member::Member;
use super::protocol::{find_coordinator, first_bootstrap, initial_rebalance_delay_ms};
use super::{unique_name, StabilizeArgs, CLIENT_ID, INITIAL_DELAY_KEY, IO_TIMEOUT};

#[derive(Debug, Clone, Serialize)]
pub struct StabilizeReport {
    pub members: usize,
    /// The first generation in which every member got its SyncGroup answer.
    pub generation: i32,
    /// First JoinGroup sent to the last SyncGroup answer of that generation.
    pub wall_ms: f64,
    /// The broker's group.initial.rebalance.delay.ms, when it tells it.
    pub initial_rebalance_delay_ms: Option<u64>,
    /// wall_ms less that delay (with --initial-delay-aware).
    pub wall_less_delay_ms: Option<f64>,
    pub join_requests: u64,
    pub sync_requests: u64,
    pub heartbeat_interval_ms: u64,
    pub join_interval_ms: u64,
    pub group: String,
}

impl StabilizeReport {
    pub fn line(&self) -> String {
        let delay = match (self.initial_rebalance_delay_ms, self.wall_less_delay_ms) {
            (Some(d), Some(less)) => {
                format!("group.initial.rebalance.delay.ms={d}, {less:.1} ms without it")
            }
            (Some(d), None) => format!("group.initial.rebalance.delay.ms={d}"),
            _ => "group.initial.rebalance.delay.ms unknown".into(),
        };
        format!(
            "stabilize: {} members stable at generation {} in {:.1} ms ({delay}; {} JoinGroup, {} SyncGroup requests)",
            self.members, self.generation, self.wall_ms, self.join_requests, self.sync_requests
        )
    }
}

pub(super) enum Event {
    /// A member sent its first JoinGroup.
    Started(Instant),
    /// A member got its assignment in a generation.
    Synced {
        member: usize,
        generation: i32,
        at: Instant,
    },
    /// A member's final counts (after the stop).
    Done {
        joins: u64,
        syncs: u64,
    },
    Failed(String),
}

pub fn run_stabilize(a: &StabilizeArgs) -> Result<StabilizeReport> {
    if a.members == 0 {
        bail!("--members must be at least 1");
    }
    let group = a
        .common
        .group
        .clone()
        .unwrap_or_else(|| unique_name("bench-stabilize"));
    let bootstrap = first_bootstrap(&a.common.bootstrap_server)?;
    let mut boot = crate::native::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT, None)
        .with_context(|| format!("connecting to {bootstrap}"))?;
    let (node, coordinator) = find_coordinator(&mut boot, &group)?;
    let delay = initial_rebalance_delay_ms(&mut boot, node);
    if a.initial_delay_aware && delay.is_none() {
        bail!("--initial-delay-aware: the broker does not tell its {INITIAL_DELAY_KEY}");
    }
    drop(boot);

    // Every member connects first; the clock starts at the first JoinGroup.
    let mut conns = Vec::with_capacity(a.members);
    for _ in 0..a.members {
        conns.push(
            crate::native::connect(&coordinator, CLIENT_ID, IO_TIMEOUT, None)
                .with_context(|| format!("connecting to the coordinator {coordinator}"))?,
        );
    }
    let barrier = Arc::new(Barrier::new(a.members));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Event>();
    let mut threads = Vec::with_capacity(a.members);
    for (index, mut conn) in conns.into_iter().enumerate() {
        let (barrier, stop, tx, group) = (barrier.clone(), stop.clone(), tx.clone(), group.clone());
        let a = a.clone();
        threads.push(std::thread::spawn(move || {
            let result = (|| -> Result<(u64, u64)> {
                let mut member = Member::new(
                    &mut conn,
                    &group,
                    a.session_timeout_ms,
                    a.rebalance_timeout_ms,
                )?;
                barrier.wait();
                std::thread::sleep(Duration::from_millis(a.join_interval_ms * index as u64));
                let _ = tx.send(Event::Started(Instant::now()));
                'rejoin: while !stop.load(Ordering::Relaxed) {
                    let (leader, members) = member.join()?;
                    let assigned: &[String] = if leader { &members } else { &[] };
                    if !member.sync(assigned)? {
                        continue;
                    }
                    let _ = tx.send(Event::Synced {
                        member: index,
                        generation: member.generation,
                        at: Instant::now(),
                    });
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(a.heartbeat_interval_ms));
                        if !member.heartbeat()? {
                            continue 'rejoin;
                        }
                    }
                }
                member.leave()?;
                Ok((member.joins, member.syncs))
            })();
            let _ = tx.send(match result {
                Ok((joins, syncs)) => Event::Done { joins, syncs },
                Err(e) => Event::Failed(format!("member {index}: {e:#}")),
            });
        }));
    }
    drop(tx);

    let deadline = Instant::now() + Duration::from_secs(a.timeout_s);
    let mut start: Option<Instant> = None;
    let mut synced: HashMap<i32, HashSet<usize>> = HashMap::new();
    let (generation, end) = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = match rx.recv_timeout(left) {
            Ok(e) => e,
            Err(_) => bail!(
                "no generation with all {} members synced within {} s",
                a.members,
                a.timeout_s
            ),
        };
        match event {
            Event::Started(at) => start = Some(start.map_or(at, |s| s.min(at))),
            Event::Synced {
                member,
                generation,
                at,
            } => {
                let set = synced.entry(generation).or_default();
                set.insert(member);
                if set.len() == a.members {
                    break (generation, at);
                }
            }
            Event::Done { .. } => bail!("a member stopped before the group was stable"),
            Event::Failed(why) => bail!("{why}"),
        }
    };
    stop.store(true, Ordering::Relaxed);
    let (mut joins, mut syncs) = (0, 0);
    for event in rx.iter() {
        match event {
            Event::Done { joins: j, syncs: s } => {
                joins += j;
                syncs += s;
            }
            Event::Failed(why) => eprintln!("warning: after the measurement: {why}"),
            _ => {}
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let start = start.ok_or_else(|| anyhow!("no member started"))?;
    let wall_ms = end.duration_since(start).as_secs_f64() * 1e3;
    Ok(StabilizeReport {
        members: a.members,
        generation,
        wall_ms,
        initial_rebalance_delay_ms: delay,
        wall_less_delay_ms: delay
            .filter(|_| a.initial_delay_aware)
            .map(|d| (wall_ms - d as f64).max(0.0)),
        join_requests: joins,
        sync_requests: syncs,
        heartbeat_interval_ms: a.heartbeat_interval_ms,
        join_interval_ms: a.join_interval_ms,
        group,
    })
}
