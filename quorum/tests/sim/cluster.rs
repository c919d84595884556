//! One seeded run: N voters, each on its own simulated disk, a chaos phase (lossy,
//! duplicating, reordering network; partitions that heal; kill -9 crashes; power losses of
//! one voter or of the whole cluster; restarts from disk; client proposals to whoever leads),
//! then a healed phase that must make progress within a bound, then the final agreement
//! check. The invariants themselves are checked as the run goes (see `World::applied`,
//! `World::saw_leader`, `ChainSm::restore`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use futures::future::{abortable, AbortHandle};
use quorum::QuorumConfig;
use storage::sim::SimRng;
use storage::{Disk, SimClock, SimDisk};

use super::trace_on;
use super::voter::{run_voter, TICK_US};
use super::world::{Shared, Stats, World};

/// Virtual time between the driver's chaos decisions.
const STEP_US: u64 = 5_000;
/// After the network heals and every voter is up, a new proposal must be applied on every
/// voter within this much virtual time.
pub(crate) const PROGRESS_BOUND_US: u64 = 15_000_000;
/// Then every voter must reach the same applied index and state within this much more.
const SETTLE_BOUND_US: u64 = 5_000_000;
/// Proposals the client keeps queued for one voter at most.
const MAX_QUEUED_PROPOSALS: usize = 16;
const MARKER: &[u8] = b"marker:";

struct Cluster {
    rng: SimRng,
    clock: Rc<SimClock>,
    world: Shared,
    disks: BTreeMap<u64, Rc<SimDisk>>,
    running: BTreeMap<u64, AbortHandle>,
    /// Down voters and when they restart (virtual µs).
    down_until: BTreeMap<u64, u64>,
    snapshot_every: u64,
    snapshot_padding: usize,
    next_proposal: u64,
    /// When the current partition heals.
    partition_until: Option<u64>,
    /// Voters to lose power at a set time (the second half of a double fault).
    power_loss_at: BTreeMap<u64, u64>,
}

impl Cluster {
    fn trace(&self, what: std::fmt::Arguments) {
        if trace_on() {
            eprintln!("{:>9} µs: {what}", self.clock.now_us());
        }
    }

    fn start(&mut self, id: u64) {
        let voters = self.world.borrow().voters.clone();
        let config = QuorumConfig {
            election_tick: 10,
            heartbeat_tick: 2,
            snapshot_every: self.snapshot_every,
            max_in_flight_proposals: 64,
            election_seed: self.rng.next_u64(),
            ..QuorumConfig::new(id, voters)
        };
        let (task, handle) = abortable(run_voter(
            self.world.clone(),
            Disk::Sim(self.disks[&id].clone()),
            self.clock.clone(),
            config,
            self.snapshot_padding,
        ));
        self.clock.spawn(async move {
            let _ = task.await;
        });
        self.running.insert(id, handle);
        self.down_until.remove(&id);
        self.trace(format_args!("voter {id} starts"));
    }

    /// kill -9 (the page cache survives) or power loss (unsynced bytes lost or torn).
    fn crash(&mut self, id: u64, power_loss: bool, down_us: u64) {
        if let Some(h) = self.running.remove(&id) {
            h.abort();
        }
        self.world.borrow_mut().voter_down(id);
        if power_loss {
            self.disks[&id].power_loss();
            self.world.borrow_mut().stats.power_losses += 1;
        } else {
            self.disks[&id].crash();
            self.world.borrow_mut().stats.crashes += 1;
        }
        self.down_until.insert(id, self.clock.now_us() + down_us);
        self.trace(format_args!(
            "voter {id} {} for {down_us} µs",
            if power_loss { "loses power" } else { "crashes" }
        ));
    }

    /// Whom the client sends to: the up leader of the highest term, else a hint, else anyone up.
    fn client_target(&mut self) -> Option<u64> {
        let w = self.world.borrow();
        let up: Vec<u64> = w
            .views
            .iter()
            .filter(|(_, v)| v.up)
            .map(|(k, _)| *k)
            .collect();
        if let Some((id, _)) = w
            .views
            .iter()
            .filter(|(_, v)| v.up && v.leader)
            .max_by_key(|(_, v)| v.term)
        {
            return Some(*id);
        }
        let hint = w
            .views
            .values()
            .filter(|v| v.up)
            .find_map(|v| v.leader_hint);
        drop(w);
        if let Some(h) = hint.filter(|h| up.contains(h)) {
            return Some(h);
        }
        (!up.is_empty()).then(|| up[self.rng.below(up.len() as u64) as usize])
    }

    fn propose(&mut self, data: Vec<u8>) {
        if let Some(target) = self.client_target() {
            let mut w = self.world.borrow_mut();
            let q = w.proposals.get_mut(&target).expect("a voter");
            if q.len() < MAX_QUEUED_PROPOSALS {
                q.push_back(data);
            }
            if let Some(waker) = w.wakers.remove(&target) {
                waker.wake();
            }
        }
    }

    fn client_proposal(&mut self) {
        self.next_proposal += 1;
        let mut data = self.next_proposal.to_le_bytes().to_vec();
        let pad = self.rng.below(64) as usize;
        data.resize(8 + pad, 0xab);
        self.propose(data);
    }

    /// Voters whose task ended on an injected disk error restart from disk, as a supervisor
    /// would restart a process that exited.
    fn restart_failed(&mut self) {
        let failed = std::mem::take(&mut self.world.borrow_mut().failed);
        for v in failed {
            if self.running.contains_key(&v) {
                let down = 1_000 + self.rng.below(50_000);
                self.crash(v, false, down);
            }
        }
        let now = self.clock.now_us();
        let due: Vec<u64> = self
            .down_until
            .iter()
            .filter(|(_, &t)| t <= now)
            .map(|(v, _)| *v)
            .collect();
        for v in due {
            self.start(v);
        }
    }

    fn partition(&mut self) {
        let voters = self.world.borrow().voters.clone();
        let mut cut = std::collections::BTreeSet::new();
        match self.rng.below(3) {
            0 => {
                // One voter isolated both ways.
                let x = voters[self.rng.below(voters.len() as u64) as usize];
                for &v in &voters {
                    if v != x {
                        cut.insert((x, v));
                        cut.insert((v, x));
                    }
                }
            }
            1 => {
                // A random split into two sides.
                let side: Vec<bool> = voters.iter().map(|_| self.rng.chance(1, 2)).collect();
                for (i, &a) in voters.iter().enumerate() {
                    for (j, &b) in voters.iter().enumerate() {
                        if side[i] != side[j] {
                            cut.insert((a, b));
                        }
                    }
                }
            }
            _ => {
                // Some directed links only (asymmetric reachability).
                for &a in &voters {
                    for &b in &voters {
                        if a != b && self.rng.chance(1, 4) {
                            cut.insert((a, b));
                        }
                    }
                }
            }
        }
        let until = self.clock.now_us() + 100_000 + self.rng.below(2_000_000);
        self.trace(format_args!("partition {cut:?} until {until}"));
        let mut w = self.world.borrow_mut();
        w.cut = cut;
        w.stats.partitions += 1;
        self.partition_until = Some(until);
    }

    fn heal(&mut self) {
        self.world.borrow_mut().cut.clear();
        self.partition_until = None;
        self.trace(format_args!("partition heals"));
    }

    /// The voters' (applied, hash), for the final checks.
    fn states(&self) -> Vec<(u64, u64, u64)> {
        self.world
            .borrow()
            .views
            .iter()
            .map(|(id, v)| (*id, v.applied, v.hash))
            .collect()
    }

    /// The index of the first committed marker, if any.
    fn marker_index(&self) -> Option<u64> {
        self.world
            .borrow()
            .committed
            .iter()
            .rev()
            .find(|(_, c)| c.data.starts_with(MARKER))
            .map(|(i, _)| *i)
    }
}

/// Runs one seed with `n` voters; panics (with the broken invariant) on failure.
pub(crate) fn run_seed(seed: u64, n: u64) -> Stats {
    let mut rng = SimRng::new(seed);
    let clock = SimClock::new(1_700_000_000_000);
    let voters: Vec<u64> = (1..=n).collect();
    let world = Rc::new(RefCell::new(World::new(
        SimRng::new(rng.next_u64()),
        clock.clone(),
        voters.clone(),
        trace_on(),
    )));
    {
        let mut w = world.borrow_mut();
        w.loss_ppm = if rng.chance(1, 3) {
            0
        } else {
            rng.below(200_000)
        };
        w.dup_ppm = rng.below(50_000);
        w.min_delay_us = 200;
        w.max_delay_us = 1_000 + rng.below(30_000);
        w.lose_down_reports = rng.chance(1, 4);
    }
    let mut disks = BTreeMap::new();
    for &v in &voters {
        let d = SimDisk::new(rng.next_u64());
        d.set_trace(trace_on() && std::env::var_os("QUORUM_SIM_TRACE_DISK").is_some());
        let disk = Disk::Sim(d.clone());
        disk.create_dir_all("/quorum".as_ref()).expect("mkdir");
        clock.block_on(disk.sync_dir("/".as_ref())).expect("sync");
        d.set_sync_latency(&clock, Duration::from_micros(200), Duration::from_millis(3));
        disks.insert(v, d);
    }
    // A third of the seeds inject disk errors (EIO, ENOSPC with a partial write).
    let fault_ppm = if rng.chance(1, 3) {
        500 + rng.below(15_000)
    } else {
        0
    };
    for d in disks.values() {
        d.set_fault_rate(fault_ppm);
    }
    let chaos_us = 3_000_000 + rng.below(5_000_000);
    let crash_per_mille = 2 + rng.below(8);
    let mut c = Cluster {
        snapshot_every: 3 + rng.below(40),
        snapshot_padding: rng.below(4096) as usize,
        rng,
        clock: clock.clone(),
        world: world.clone(),
        disks,
        running: BTreeMap::new(),
        down_until: BTreeMap::new(),
        next_proposal: 0,
        partition_until: None,
        power_loss_at: BTreeMap::new(),
    };
    for &v in &voters {
        c.start(v);
    }

    // Chaos.
    while clock.now_us() < chaos_us {
        clock.run_for(Duration::from_micros(STEP_US));
        let now = clock.now_us();
        c.restart_failed();
        if c.rng.below(1000) < crash_per_mille {
            let up: Vec<u64> = c.running.keys().copied().collect();
            if !up.is_empty() {
                let v = up[c.rng.below(up.len() as u64) as usize];
                let power = c.rng.chance(1, 2);
                let down = 20_000 + c.rng.below(2_000_000);
                c.crash(v, power, down);
            }
        }
        if c.rng.below(300) == 0 {
            // A double fault: kill -9, a quick restart (which reads back what the page cache
            // held and must make it durable before raft acks it), then a power loss soon after.
            let up: Vec<u64> = c.running.keys().copied().collect();
            if !up.is_empty() {
                let v = up[c.rng.below(up.len() as u64) as usize];
                let down = 1_000 + c.rng.below(10_000);
                c.crash(v, false, down);
                let at = now + down + STEP_US + c.rng.below(30_000);
                c.power_loss_at.insert(v, at);
            }
        }
        let due: Vec<u64> = c
            .power_loss_at
            .iter()
            .filter(|(_, &t)| t <= now)
            .map(|(v, _)| *v)
            .collect();
        for v in due {
            c.power_loss_at.remove(&v);
            if c.running.contains_key(&v) {
                let down = 20_000 + c.rng.below(500_000);
                c.crash(v, true, down);
            }
        }
        if c.rng.below(500) == 0 {
            // The whole cluster loses power at once: only what was synced survives anywhere.
            let up: Vec<u64> = c.running.keys().copied().collect();
            for v in up {
                let down = 10_000 + c.rng.below(500_000);
                c.crash(v, true, down);
            }
            world.borrow_mut().stats.cluster_power_losses += 1;
        }
        match c.partition_until {
            Some(t) if t <= now => c.heal(),
            None if c.rng.below(150) == 0 => c.partition(),
            _ => {}
        }
        if c.rng.chance(1, 2) {
            c.client_proposal();
        }
    }

    // Heal: the network is clean, the disks no longer fail, and every voter is up.
    c.heal();
    for d in c.disks.values() {
        d.set_fault_rate(0);
    }
    {
        let mut w = world.borrow_mut();
        w.loss_ppm = 0;
        w.dup_ppm = 0;
    }
    let down: Vec<u64> = c.down_until.keys().copied().collect();
    for v in down {
        c.start(v);
    }
    let healed_at = clock.now_us();
    c.trace(format_args!("healed; a marker must commit everywhere"));
    let before = c.marker_index();
    let mut marker_id = 0u64;
    let mut last_marker_at = 0u64;
    let marker_at = loop {
        clock.run_for(Duration::from_micros(STEP_US));
        c.restart_failed();
        let now = clock.now_us();
        if let Some(m) = c.marker_index().filter(|m| Some(*m) != before) {
            if c.states().iter().all(|(_, applied, _)| *applied >= m) {
                break m;
            }
        }
        assert!(
            now - healed_at <= PROGRESS_BOUND_US,
            "no progress: {} µs after healing, no new proposal is applied on every voter; voters (id, applied, hash): {:?}, leaders by term (last 5): {:?}",
            now - healed_at,
            c.states(),
            world.borrow().leaders.iter().rev().take(5).collect::<Vec<_>>()
        );
        if now - last_marker_at >= 20 * TICK_US {
            marker_id += 1;
            let mut data = MARKER.to_vec();
            data.extend_from_slice(&marker_id.to_le_bytes());
            c.propose(data);
            last_marker_at = now;
        }
    };
    c.trace(format_args!("marker at {marker_at} applied everywhere"));

    // Settle: every voter at the same index with the same state.
    let settle_from = clock.now_us();
    loop {
        clock.run_for(Duration::from_micros(STEP_US));
        c.restart_failed();
        let states = c.states();
        let (_, a0, h0) = states[0];
        // What DescribeQuorum would answer: the leader sees every voter caught up.
        let leader_view = {
            let w = world.borrow();
            w.views
                .values()
                .filter(|v| v.leader)
                .max_by_key(|v| v.term)
                .map(|v| v.progress.clone())
        };
        let described = leader_view.as_ref().is_some_and(|p| {
            p.len() == states.len()
                && p.iter()
                    .all(|v| v.match_index == Some(a0) && v.last_contact_ms.is_some())
        });
        if described && states.iter().all(|&(_, a, h)| a == a0 && h == h0) {
            break;
        }
        assert!(
            clock.now_us() - settle_from <= SETTLE_BOUND_US,
            "voters do not converge: (id, applied, hash) {states:?}, the leader's view {leader_view:?}"
        );
    }

    let mut stats = world.borrow().stats.clone();
    stats.runs = 1;
    // Drop the tasks (they hold the world) so nothing leaks across seeds.
    clock.kill_tasks();
    world.borrow_mut().wakers.clear();
    stats
}
