//! `bench groups memory`: the broker's resident memory before and after creating G groups.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::member::Member;
use super::protocol::{find_coordinator, first_bootstrap, initial_rebalance_delay_ms};
use super::{unique_name, MemoryArgs, CLIENT_ID, INITIAL_DELAY_KEY, IO_TIMEOUT};
use crate::cpu::resolve_broker_pid;
use crate::native::MetaClient;
use kclient::conn::Connection;

#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    pub groups: usize,
    pub stay: bool,
    pub pid: u32,
    pub rss_before_bytes: u64,
    pub rss_after_bytes: u64,
    /// (after - before) / groups; negative when the broker gave memory back.
    pub bytes_per_group: f64,
    /// The anonymous part of the RSS (heap, without mapped files such as log indexes).
    pub rss_anon_before_bytes: Option<u64>,
    pub rss_anon_after_bytes: Option<u64>,
    pub anon_bytes_per_group: Option<f64>,
    /// VmData (heap address space, touched or not) per group: memory a group pins that
    /// RSS does not show until it is written.
    pub vm_data_bytes_per_group: Option<f64>,
    pub seconds: f64,
    pub groups_per_s: f64,
    pub initial_rebalance_delay_ms: Option<u64>,
    pub group_prefix: String,
}

impl MemoryReport {
    pub fn line(&self) -> String {
        const MIB: f64 = 1024.0 * 1024.0;
        let anon = self
            .anon_bytes_per_group
            .map_or(String::new(), |a| format!(" ({a:.0} anonymous)"));
        format!(
            "memory: {} groups ({}), broker RSS {:.1} MiB -> {:.1} MiB, {:.0} bytes/group{anon} (created in {:.2} s, {:.0} groups/s)",
            self.groups,
            if self.stay { "members stay" } else { "members left" },
            self.rss_before_bytes as f64 / MIB,
            self.rss_after_bytes as f64 / MIB,
            self.bytes_per_group,
            self.seconds,
            self.groups_per_s,
        )
    }
}

/// VmRSS, RssAnon (Linux 4.5+) and VmData of a process, in bytes (`/proc/<pid>/status`).
pub fn rss_bytes(pid: u32) -> Result<(u64, Option<u64>, Option<u64>)> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let rss = status_kb(&status, "VmRSS:").ok_or_else(|| anyhow!("no VmRSS line in {path}"))?;
    Ok((
        rss,
        status_kb(&status, "RssAnon:"),
        status_kb(&status, "VmData:"),
    ))
}

/// (after - before) / n, when both are known.
pub(super) fn per(before: Option<u64>, after: Option<u64>, n: usize) -> Option<f64> {
    Some((after? as f64 - before? as f64) / n as f64)
}

/// A `KEY: N kB` line of a `/proc/<pid>/status` text, in bytes.
pub fn status_kb(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// One group: FindCoordinator, join, sync, one commit, then leave unless `stay`.
pub(super) fn create_group(
    conns: &mut HashMap<String, Connection>,
    bootstrap: &str,
    group: &str,
    a: &MemoryArgs,
) -> Result<()> {
    let (_, coordinator) = find_coordinator(
        conns.get_mut(bootstrap).expect("the bootstrap connection"),
        group,
    )?;
    if !conns.contains_key(&coordinator) {
        let conn = crate::native::connect(&coordinator, CLIENT_ID, IO_TIMEOUT, None)?;
        conns.insert(coordinator.clone(), conn);
    }
    let conn = conns.get_mut(&coordinator).expect("inserted above");
    let mut member = Member::new(conn, group, a.session_timeout_ms, 60_000)?;
    loop {
        let (leader, members) = member.join()?;
        let assigned: &[String] = if leader { &members } else { &[] };
        if member.sync(assigned)? {
            break;
        }
    }
    member.commit(&a.topic, 1)?;
    if !a.stay {
        member.leave()?;
    }
    Ok(())
}

pub fn run_memory(a: &MemoryArgs) -> Result<MemoryReport> {
    if a.groups == 0 || a.concurrency == 0 {
        bail!("--groups and --concurrency must be positive");
    }
    let bootstrap = first_bootstrap(&a.common.bootstrap_server)?;
    let pid = resolve_broker_pid(a.pid, &bootstrap)
        .ok_or_else(|| anyhow!("broker pid not found: give --pid"))?;
    let prefix = a
        .common
        .group
        .clone()
        .unwrap_or_else(|| unique_name("bench-memory"));
    let mut meta = MetaClient::new(&a.common.bootstrap_server, CLIENT_ID, IO_TIMEOUT);
    meta.create_topic(&a.topic, 1, 1, &[])
        .with_context(|| format!("creating topic {}", a.topic))?;
    // The offsets topic exists (and its partitions are loaded) before the first sample.
    let mut boot = crate::native::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT, None)?;
    let (node, _) = find_coordinator(&mut boot, &format!("{prefix}-warmup"))?;
    let delay = initial_rebalance_delay_ms(&mut boot, node);
    if let Some(d) = delay.filter(|d| *d > 0) {
        eprintln!(
            "warning: {INITIAL_DELAY_KEY}={d}: every group's first join waits {d} ms \
             (start the broker with --override {INITIAL_DELAY_KEY}=0)"
        );
    }
    drop(boot);

    let (rss_before, anon_before, data_before) = rss_bytes(pid)?;
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let threads: Vec<_> = (0..a.concurrency.min(a.groups))
        .map(|_| {
            let (next, failed, prefix, bootstrap, a) = (
                next.clone(),
                failed.clone(),
                prefix.clone(),
                bootstrap.clone(),
                a.clone(),
            );
            std::thread::spawn(move || -> Result<()> {
                let mut conns = HashMap::new();
                conns.insert(
                    bootstrap.clone(),
                    crate::native::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT, None)?,
                );
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= a.groups || failed.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    let group = format!("{prefix}-{i}");
                    if let Err(e) = create_group(&mut conns, &bootstrap, &group, &a) {
                        failed.store(true, Ordering::Relaxed);
                        return Err(e.context(format!("group {group}")));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| anyhow!("a worker panicked"))??;
    }
    let seconds = start.elapsed().as_secs_f64();
    let (rss_after, anon_after, data_after) = rss_bytes(pid)?;
    Ok(MemoryReport {
        groups: a.groups,
        stay: a.stay,
        pid,
        rss_before_bytes: rss_before,
        rss_after_bytes: rss_after,
        bytes_per_group: (rss_after as f64 - rss_before as f64) / a.groups as f64,
        rss_anon_before_bytes: anon_before,
        rss_anon_after_bytes: anon_after,
        anon_bytes_per_group: per(anon_before, anon_after, a.groups),
        vm_data_bytes_per_group: per(data_before, data_after, a.groups),
        seconds,
        groups_per_s: a.groups as f64 / seconds,
        initial_rebalance_delay_ms: delay,
        group_prefix: prefix,
    })
}
