//! `bench groups`: the classic group coordinator under load, over plain Kafka requests.
//!
//! * `stabilize`: N members, each on its own connection, join one new group (JoinGroup v5+,
//!   retrying once with the member id handed out by MEMBER_ID_REQUIRED, KIP-394) and sync
//!   (the leader sends every member an empty assignment). Members that were answered keep
//!   heartbeating and rejoin when told REBALANCE_IN_PROGRESS, as consumers do. The figure is
//!   the wall time from the first JoinGroup to the SyncGroup answer that completes the first
//!   generation in which every member got its assignment, and that generation's number.
//!   The broker's `group.initial.rebalance.delay.ms` (Kafka's default 3000) is part of it.
//! * `commits`: OffsetCommit requests of P partitions each to one group (so one coordinator
//!   shard), generation -1 and no member ("simple" commits to an Empty group), a few in
//!   flight on one connection: commits/s and the latency of each commit.
//! * `memory`: creates G groups (one member joins and syncs, commits one offset, then leaves
//!   unless `--stay`) and reports the broker's resident memory before and after.
//!
//! Only standard protocol behaviour is used, so every mode runs against any Kafka broker.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use clap::{Args, Subcommand};
use serde::Serialize;
use wire::generated::api::ApiKey;
use wire::generated::describe_configs_request::DescribeConfigsResource;
use wire::generated::join_group_request::JoinGroupRequestProtocol;
use wire::generated::leave_group_request::MemberIdentity;
use wire::generated::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use wire::generated::sync_group_request::SyncGroupRequestAssignment;
use wire::generated::{
    DescribeConfigsRequest, DescribeConfigsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest,
    OffsetCommitResponse, SyncGroupRequest, SyncGroupResponse,
};
use wire::ErrorCode;

use crate::cpu::{resolve_broker_pid, CpuSampler};
use crate::native::connection::Connection;
use crate::native::{error_name, parse_bootstrap, MetaClient};
use crate::perf::output::write_json;
use crate::perf::LatencyHistogram;

const CLIENT_ID: &str = "bench-groups";
const PROTOCOL_TYPE: &str = "consumer";
const PROTOCOL_NAME: &str = "range";
/// The topic every member subscribes to (only named in the subscription metadata).
const SUBSCRIBED_TOPIC: &str = "bench-groups";
/// Connect and plain-request timeout.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// A JoinGroup or SyncGroup may wait this much longer than the rebalance timeout.
const WAIT_SLACK: Duration = Duration::from_secs(15);
/// Retries of a retriable coordinator error (loading, not available) per request.
const MAX_COORDINATOR_RETRIES: u32 = 200;
const COORDINATOR_BACKOFF: Duration = Duration::from_millis(50);
/// JoinGroup requests one member may send before the run is declared stuck.
const MAX_JOINS_PER_MEMBER: u64 = 10_000;
/// Kafka's broker config resource type (DescribeConfigs).
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_TOPIC: i8 = 2;
const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Broker keys read for the reports (Kafka's name; ours for the flush policy).
const INITIAL_DELAY_KEY: &str = "group.initial.rebalance.delay.ms";
const FLUSH_POLICY_KEY: &str = "log.flush.policy";
const TOPIC_FLUSH_POLICY_KEY: &str = "flush.policy";

#[derive(Args, Debug)]
pub struct GroupsArgs {
    #[command(subcommand)]
    pub mode: GroupsMode,
}

#[derive(Subcommand, Debug)]
pub enum GroupsMode {
    /// Time for a new classic group of N members to reach a generation every member synced.
    Stabilize(StabilizeArgs),
    /// OffsetCommit requests per second to one group (one coordinator), and their latency.
    Commits(CommitsArgs),
    /// Broker resident memory per group, for N groups of one member.
    Memory(MemoryArgs),
}

/// Options of every mode.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap_server: String,
    /// Group id (a prefix in `memory`); default: unique per run.
    #[arg(long)]
    pub group: Option<String>,
    /// Writes the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct StabilizeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long, default_value_t = 50)]
    pub members: usize,
    #[arg(long, default_value_t = 45_000)]
    pub session_timeout_ms: i32,
    #[arg(long, default_value_t = 60_000)]
    pub rebalance_timeout_ms: i32,
    /// How often a synced member heartbeats (how soon it learns of the next rebalance).
    #[arg(long, default_value_t = 100)]
    pub heartbeat_interval_ms: u64,
    /// Reads the broker's group.initial.rebalance.delay.ms (DescribeConfigs) and reports
    /// the time without it too; fails when the broker does not tell it.
    #[arg(long)]
    pub initial_delay_aware: bool,
    /// Member i sends its first JoinGroup i x this many ms after the first member (0: all
    /// at once). Members arriving one by one rebalance the group more often.
    #[arg(long, default_value_t = 0)]
    pub join_interval_ms: u64,
    /// Gives up after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_s: u64,
}

#[derive(Args, Debug, Clone)]
pub struct CommitsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Partitions per OffsetCommit request (the topic is created with this many).
    #[arg(long, default_value_t = 16)]
    pub partitions: i32,
    /// OffsetCommit requests in flight on the connection.
    #[arg(long, default_value_t = 4)]
    pub in_flight: usize,
    #[arg(long, default_value = "bench-commits")]
    pub topic: String,
    /// The broker's pid (else the process listening on the coordinator's port).
    #[arg(long)]
    pub pid: Option<u32>,
}

#[derive(Args, Debug, Clone)]
pub struct MemoryArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long, default_value_t = 10_000)]
    pub groups: usize,
    /// Members stay in their groups (Stable groups) instead of leaving (Empty groups with
    /// one committed offset).
    #[arg(long)]
    pub stay: bool,
    /// Threads creating groups, each with its own connection.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Session timeout of the members (with --stay they must outlive the measurement; they
    /// do not heartbeat).
    #[arg(long, default_value_t = 600_000)]
    pub session_timeout_ms: i32,
    #[arg(long, default_value = "bench-memory")]
    pub topic: String,
    /// The broker's pid (else the process listening on the bootstrap port).
    #[arg(long)]
    pub pid: Option<u32>,
}

pub fn run(args: &GroupsArgs) -> Result<()> {
    match &args.mode {
        GroupsMode::Stabilize(a) => {
            let report = run_stabilize(a)?;
            println!("{}", report.line());
            write_report(&a.common, &report)
        }
        GroupsMode::Commits(a) => {
            let report = run_commits(a)?;
            println!("{}", report.line());
            write_report(&a.common, &report)
        }
        GroupsMode::Memory(a) => {
            let report = run_memory(a)?;
            println!("{}", report.line());
            write_report(&a.common, &report)
        }
    }
}

fn write_report<T: Serialize>(common: &CommonArgs, report: &T) -> Result<()> {
    match &common.json {
        Some(path) => write_json(path, report),
        None => Ok(()),
    }
}

fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn first_bootstrap(bootstrap: &str) -> Result<String> {
    parse_bootstrap(bootstrap)
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no bootstrap server in {bootstrap:?}"))
}

fn code_of(code: i16) -> Option<ErrorCode> {
    ErrorCode::from_code(code)
}

/// Errors that mean "ask again shortly" (the coordinator is loading or being created).
fn coordinator_busy(code: i16) -> bool {
    matches!(
        code_of(code),
        Some(
            ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::NotCoordinator
        )
    )
}

/// ConsumerProtocolSubscription v0: one topic, no user data.
fn subscription() -> Bytes {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&(SUBSCRIBED_TOPIC.len() as i16).to_be_bytes());
    out.extend_from_slice(SUBSCRIBED_TOPIC.as_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

/// ConsumerProtocolAssignment v0 with no partitions and no user data.
fn empty_assignment() -> Bytes {
    let mut out = Vec::with_capacity(10);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

/// The coordinator of `group` (node id and address), waiting while it is being created.
pub fn find_coordinator(conn: &mut Connection, group: &str) -> Result<(i32, String)> {
    let version = conn.versions.pick(ApiKey::FindCoordinator, 0, 4)?;
    for _ in 0..MAX_COORDINATOR_RETRIES {
        // v4+ (KIP-699) carry a list of keys instead of one.
        let request = if version >= 4 {
            FindCoordinatorRequest {
                coordinator_keys: vec![group.to_string()],
                ..Default::default()
            }
        } else {
            FindCoordinatorRequest {
                key: group.to_string(),
                ..Default::default()
            }
        };
        let resp: FindCoordinatorResponse =
            conn.request(ApiKey::FindCoordinator, version, &request)?;
        let (code, node, host, port) = if version >= 4 {
            let c = resp
                .coordinators
                .first()
                .ok_or_else(|| anyhow!("FindCoordinator: no coordinator in the answer"))?;
            (c.error_code, c.node_id, c.host.clone(), c.port)
        } else {
            (resp.error_code, resp.node_id, resp.host, resp.port)
        };
        if code == 0 {
            return Ok((node, format!("{host}:{port}")));
        }
        if !coordinator_busy(code) {
            bail!("FindCoordinator {group}: {}", error_name(code));
        }
        std::thread::sleep(COORDINATOR_BACKOFF);
    }
    bail!("FindCoordinator {group}: no coordinator after {MAX_COORDINATOR_RETRIES} tries")
}

/// Config values of one resource (None for keys the broker does not know or will not tell).
fn describe_configs(
    conn: &mut Connection,
    resource_type: i8,
    name: &str,
    keys: &[&str],
) -> HashMap<String, Option<String>> {
    let Ok(version) = conn.versions.pick(ApiKey::DescribeConfigs, 1, 4) else {
        return HashMap::new();
    };
    let request = DescribeConfigsRequest {
        resources: vec![DescribeConfigsResource {
            resource_type,
            resource_name: name.to_string(),
            configuration_keys: Some(keys.iter().map(|k| k.to_string()).collect()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let Ok(resp) =
        conn.request::<_, DescribeConfigsResponse>(ApiKey::DescribeConfigs, version, &request)
    else {
        return HashMap::new();
    };
    resp.results
        .into_iter()
        .filter(|r| r.error_code == 0)
        .flat_map(|r| r.configs)
        .map(|c| (c.name, c.value))
        .collect()
}

fn config_value(conn: &mut Connection, resource_type: i8, name: &str, key: &str) -> Option<String> {
    describe_configs(conn, resource_type, name, &[key])
        .remove(key)
        .flatten()
}

/// One member of a classic group, on a connection it borrows.
struct Member<'c> {
    conn: &'c mut Connection,
    group: String,
    member_id: String,
    generation: i32,
    protocol: Option<String>,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    joins: u64,
    syncs: u64,
}

/// What a JoinGroup answer asks of the member.
enum Joined {
    /// A generation: whether this member leads it, and (for the leader) the member ids.
    Generation { leader: bool, members: Vec<String> },
    /// Join again (with the member id now known, or without one).
    Again,
}

impl<'c> Member<'c> {
    fn new(
        conn: &'c mut Connection,
        group: &str,
        session_timeout_ms: i32,
        rebalance_timeout_ms: i32,
    ) -> Result<Member<'c>> {
        // A JoinGroup or SyncGroup waits for the rest of the group up to the rebalance timeout.
        let wait = Duration::from_millis(rebalance_timeout_ms.max(0) as u64) + WAIT_SLACK;
        conn.set_read_timeout(Some(wait))?;
        Ok(Member {
            conn,
            group: group.to_string(),
            member_id: String::new(),
            generation: -1,
            protocol: None,
            session_timeout_ms,
            rebalance_timeout_ms,
            joins: 0,
            syncs: 0,
        })
    }

    fn join_once(&mut self) -> Result<Joined> {
        // v5+: group instance ids; v4+ answer MEMBER_ID_REQUIRED (KIP-394).
        let version = self.conn.versions.pick(ApiKey::JoinGroup, 5, 9)?;
        let request = JoinGroupRequest {
            group_id: self.group.clone(),
            session_timeout_ms: self.session_timeout_ms,
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            protocol_type: PROTOCOL_TYPE.into(),
            protocols: vec![JoinGroupRequestProtocol {
                name: PROTOCOL_NAME.into(),
                metadata: subscription(),
                ..Default::default()
            }],
            reason: None,
            ..Default::default()
        };
        self.joins += 1;
        let resp: JoinGroupResponse = self.conn.request(ApiKey::JoinGroup, version, &request)?;
        match code_of(resp.error_code) {
            Some(ErrorCode::None) => {
                self.member_id = resp.member_id;
                self.generation = resp.generation_id;
                self.protocol = resp.protocol_name;
                Ok(Joined::Generation {
                    leader: resp.leader == self.member_id,
                    members: resp.members.into_iter().map(|m| m.member_id).collect(),
                })
            }
            Some(ErrorCode::MemberIdRequired) => {
                self.member_id = resp.member_id;
                Ok(Joined::Again)
            }
            Some(ErrorCode::UnknownMemberId) => {
                self.member_id.clear();
                Ok(Joined::Again)
            }
            Some(ErrorCode::RebalanceInProgress) => Ok(Joined::Again),
            _ if coordinator_busy(resp.error_code) => {
                std::thread::sleep(COORDINATOR_BACKOFF);
                Ok(Joined::Again)
            }
            _ => bail!(
                "JoinGroup {} v{version}: {}",
                self.group,
                error_name(resp.error_code)
            ),
        }
    }

    /// Joins until a generation is handed out.
    fn join(&mut self) -> Result<(bool, Vec<String>)> {
        let first = self.joins;
        loop {
            if self.joins - first >= MAX_JOINS_PER_MEMBER {
                bail!(
                    "JoinGroup {}: no generation after {MAX_JOINS_PER_MEMBER} tries",
                    self.group
                );
            }
            if let Joined::Generation { leader, members } = self.join_once()? {
                return Ok((leader, members));
            }
        }
    }

    /// SyncGroup; `Ok(false)` when the member must join again.
    fn sync(&mut self, members: &[String]) -> Result<bool> {
        // v3+ carry group instance ids, as JoinGroup v5 does.
        let version = self.conn.versions.pick(ApiKey::SyncGroup, 3, 5)?;
        let assignment = empty_assignment();
        let request = SyncGroupRequest {
            group_id: self.group.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            // v5+ repeat the protocol for the broker to check.
            protocol_type: (version >= 5).then(|| PROTOCOL_TYPE.into()),
            protocol_name: self.protocol.clone().filter(|_| version >= 5),
            assignments: members
                .iter()
                .map(|m| SyncGroupRequestAssignment {
                    member_id: m.clone(),
                    assignment: assignment.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        self.syncs += 1;
        let resp: SyncGroupResponse = self.conn.request(ApiKey::SyncGroup, version, &request)?;
        self.rejoin_or_fail("SyncGroup", resp.error_code)
    }

    /// Heartbeat; `Ok(false)` when the member must join again.
    fn heartbeat(&mut self) -> Result<bool> {
        let version = self.conn.versions.pick(ApiKey::Heartbeat, 0, 4)?;
        let request = HeartbeatRequest {
            group_id: self.group.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            ..Default::default()
        };
        let resp: HeartbeatResponse = self.conn.request(ApiKey::Heartbeat, version, &request)?;
        self.rejoin_or_fail("Heartbeat", resp.error_code)
    }

    /// Success, a code that sends the member back to JoinGroup, or an error.
    fn rejoin_or_fail(&mut self, what: &str, code: i16) -> Result<bool> {
        match code_of(code) {
            Some(ErrorCode::None) => Ok(true),
            Some(ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration) => Ok(false),
            Some(ErrorCode::UnknownMemberId) => {
                self.member_id.clear();
                Ok(false)
            }
            _ if coordinator_busy(code) => {
                std::thread::sleep(COORDINATOR_BACKOFF);
                Ok(false)
            }
            _ => bail!("{what} {}: {}", self.group, error_name(code)),
        }
    }

    /// Commits `offset` for partition 0 of `topic` in this member's generation.
    fn commit(&mut self, topic: &str, offset: i64) -> Result<()> {
        let request = commit_request(
            &self.group,
            self.generation,
            &self.member_id,
            topic,
            1,
            offset,
        );
        let version = self.conn.versions.pick(ApiKey::OffsetCommit, 2, 9)?;
        let resp: OffsetCommitResponse =
            self.conn.request(ApiKey::OffsetCommit, version, &request)?;
        check_commit(&resp)
    }

    fn leave(&mut self) -> Result<()> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let version = self.conn.versions.pick(ApiKey::LeaveGroup, 0, 5)?;
        // v3+ (KIP-345) name the leaving members in a list.
        let request = if version >= 3 {
            LeaveGroupRequest {
                group_id: self.group.clone(),
                members: vec![MemberIdentity {
                    member_id: self.member_id.clone(),
                    ..Default::default()
                }],
                ..Default::default()
            }
        } else {
            LeaveGroupRequest {
                group_id: self.group.clone(),
                member_id: self.member_id.clone(),
                ..Default::default()
            }
        };
        let resp: LeaveGroupResponse = self.conn.request(ApiKey::LeaveGroup, version, &request)?;
        let member_code = resp.members.first().map_or(0, |m| m.error_code);
        for code in [resp.error_code, member_code] {
            if code != 0 && code_of(code) != Some(ErrorCode::UnknownMemberId) {
                bail!("LeaveGroup {}: {}", self.group, error_name(code));
            }
        }
        Ok(())
    }
}

/// An OffsetCommit of `offset` for partitions 0..partitions of `topic`.
fn commit_request(
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    partitions: i32,
    offset: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.to_string(),
        generation_id_or_member_epoch: generation,
        member_id: member_id.to_string(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![OffsetCommitRequestTopic {
            name: topic.to_string(),
            partitions: (0..partitions)
                .map(|p| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: offset,
                    committed_leader_epoch: -1,
                    commit_timestamp: -1,
                    committed_metadata: Some(String::new()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn check_commit(resp: &OffsetCommitResponse) -> Result<()> {
    for t in &resp.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                bail!(
                    "OffsetCommit {}-{}: {}",
                    t.name,
                    p.partition_index,
                    error_name(p.error_code)
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// stabilize

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

enum Event {
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
    let mut boot = Connection::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT)
        .with_context(|| format!("connecting to {bootstrap}"))?;
    let (node, coordinator) = find_coordinator(&mut boot, &group)?;
    let delay = config_value(
        &mut boot,
        RESOURCE_BROKER,
        &node.to_string(),
        INITIAL_DELAY_KEY,
    )
    .and_then(|v| v.parse::<u64>().ok());
    if a.initial_delay_aware && delay.is_none() {
        bail!("--initial-delay-aware: the broker does not tell its {INITIAL_DELAY_KEY}");
    }
    drop(boot);

    // Every member connects first; the clock starts at the first JoinGroup.
    let mut conns = Vec::with_capacity(a.members);
    for _ in 0..a.members {
        conns.push(
            Connection::connect(&coordinator, CLIENT_ID, IO_TIMEOUT)
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

// ---------------------------------------------------------------------------------------
// commits

#[derive(Debug, Clone, Serialize)]
pub struct CommitsReport {
    pub commits: u64,
    pub partitions_per_commit: i32,
    pub in_flight: usize,
    pub seconds: f64,
    pub commits_per_s: f64,
    pub offsets_per_s: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_p999_ms: f64,
    pub latency_max_ms: f64,
    /// Broker CPU per OffsetCommit request, when its pid is known.
    pub broker_cpu_us_per_commit: Option<f64>,
    /// The broker's log.flush.policy and __consumer_offsets' flush.policy (our broker's keys).
    pub log_flush_policy: Option<String>,
    pub offsets_topic_flush_policy: Option<String>,
    pub group: String,
}

impl CommitsReport {
    pub fn line(&self) -> String {
        let cpu = self
            .broker_cpu_us_per_commit
            .map_or(String::new(), |c| format!(", broker CPU {c:.1} us/commit"));
        let flush = match (&self.log_flush_policy, &self.offsets_topic_flush_policy) {
            (Some(b), Some(t)) => {
                format!(", log.flush.policy={b}, {OFFSETS_TOPIC} flush.policy={t}")
            }
            (Some(b), None) => format!(", log.flush.policy={b}"),
            _ => String::new(),
        };
        format!(
            "commits: {} OffsetCommit requests in {:.2} s, {:.1} commits/s ({:.0} offsets/s), latency p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms ({} partitions each, {} in flight{cpu}{flush})",
            self.commits,
            self.seconds,
            self.commits_per_s,
            self.offsets_per_s,
            self.latency_p50_ms,
            self.latency_p99_ms,
            self.latency_p999_ms,
            self.latency_max_ms,
            self.partitions_per_commit,
            self.in_flight,
        )
    }
}

pub fn run_commits(a: &CommitsArgs) -> Result<CommitsReport> {
    if a.partitions < 1 || a.in_flight == 0 || a.seconds <= 0.0 {
        bail!("--partitions, --in-flight and --seconds must be positive");
    }
    let group = a
        .common
        .group
        .clone()
        .unwrap_or_else(|| unique_name("bench-commits"));
    let mut meta = MetaClient::new(&a.common.bootstrap_server, CLIENT_ID, IO_TIMEOUT);
    meta.create_topic(&a.topic, a.partitions, 1, &[])
        .with_context(|| format!("creating topic {}", a.topic))?;
    let bootstrap = first_bootstrap(&a.common.bootstrap_server)?;
    let mut boot = Connection::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT)?;
    let (node, coordinator) = find_coordinator(&mut boot, &group)?;
    let log_flush_policy = config_value(
        &mut boot,
        RESOURCE_BROKER,
        &node.to_string(),
        FLUSH_POLICY_KEY,
    );
    let offsets_topic_flush_policy = config_value(
        &mut boot,
        RESOURCE_TOPIC,
        OFFSETS_TOPIC,
        TOPIC_FLUSH_POLICY_KEY,
    );
    drop(boot);

    let mut conn = Connection::connect(&coordinator, CLIENT_ID, IO_TIMEOUT)?;
    let version = conn.versions.pick(ApiKey::OffsetCommit, 2, 9)?;
    // One commit first: the group exists (Empty) before the clock starts.
    let warmup = commit_request(&group, -1, "", &a.topic, a.partitions, 0);
    check_commit(&conn.request(ApiKey::OffsetCommit, version, &warmup)?)?;

    let pid = resolve_broker_pid(a.pid, &coordinator);
    let mut hist = LatencyHistogram::new();
    let mut pending: VecDeque<(i32, Instant)> = VecDeque::with_capacity(a.in_flight);
    let mut offset = 0i64;
    let cpu = CpuSampler::start(pid);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(a.seconds);
    loop {
        let sending = Instant::now() < deadline;
        if sending && pending.len() < a.in_flight {
            offset += 1;
            let request = commit_request(&group, -1, "", &a.topic, a.partitions, offset);
            let corr = conn.send(ApiKey::OffsetCommit, version, &request)?;
            pending.push_back((corr, Instant::now()));
            continue;
        }
        let Some((corr, sent)) = pending.pop_front() else {
            break;
        };
        let resp: OffsetCommitResponse = conn.recv(ApiKey::OffsetCommit, version, corr)?;
        hist.record(sent.elapsed());
        check_commit(&resp)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let usage = cpu.stop();
    let commits = hist.count();
    Ok(CommitsReport {
        commits,
        partitions_per_commit: a.partitions,
        in_flight: a.in_flight,
        seconds,
        commits_per_s: commits as f64 / seconds,
        offsets_per_s: (commits * a.partitions as u64) as f64 / seconds,
        latency_p50_ms: hist.percentile_ms(50.0),
        latency_p99_ms: hist.percentile_ms(99.0),
        latency_p999_ms: hist.percentile_ms(99.9),
        latency_max_ms: hist.max_us() as f64 / 1e3,
        broker_cpu_us_per_commit: usage.broker_cpu_us_per_request(commits),
        log_flush_policy,
        offsets_topic_flush_policy,
        group,
    })
}

// ---------------------------------------------------------------------------------------
// memory

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
fn per(before: Option<u64>, after: Option<u64>, n: usize) -> Option<f64> {
    Some((after? as f64 - before? as f64) / n as f64)
}

/// A `KEY: N kB` line of a `/proc/<pid>/status` text, in bytes.
pub fn status_kb(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// One group: FindCoordinator, join, sync, one commit, then leave unless `stay`.
fn create_group(
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
        let conn = Connection::connect(&coordinator, CLIENT_ID, IO_TIMEOUT)?;
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
    let mut boot = Connection::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT)?;
    let (node, _) = find_coordinator(&mut boot, &format!("{prefix}-warmup"))?;
    let delay = config_value(
        &mut boot,
        RESOURCE_BROKER,
        &node.to_string(),
        INITIAL_DELAY_KEY,
    )
    .and_then(|v| v.parse::<u64>().ok());
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
                    Connection::connect(&bootstrap, CLIENT_ID, IO_TIMEOUT)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_bytes() {
        let status = "Name:\tbroker\nVmPeak:\t  200 kB\nVmRSS:\t   1234 kB\nThreads:\t3\n";
        assert_eq!(status_kb(status, "VmRSS:"), Some(1234 * 1024));
        assert_eq!(status_kb("Name:\tx\n", "VmRSS:"), None);
    }

    #[test]
    fn consumer_protocol_blobs() {
        // version 0, one topic "bench-groups", null user data
        let s = subscription();
        assert_eq!(&s[..6], &[0, 0, 0, 0, 0, 1]);
        assert_eq!(&s[6..8], &(SUBSCRIBED_TOPIC.len() as i16).to_be_bytes());
        assert_eq!(&s[s.len() - 4..], &[0xff; 4]);
        assert_eq!(
            &empty_assignment()[..],
            &[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
    }
}
