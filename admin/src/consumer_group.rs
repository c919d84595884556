//! `broker consume --group G`: membership of a classic consumer group as Kafka's consumer
//! holds it. FindCoordinator names the coordinator; JoinGroup (protocol type "consumer", one
//! protocol "range") and SyncGroup hand out partitions, the leader computing every member's
//! range assignment; Heartbeat keeps the membership alive between fetches and says when to
//! rejoin; OffsetCommit with the generation and member id saves positions every auto-commit
//! interval and before leaving (LeaveGroup), so the next member starts where this one
//! stopped. The protocol is eager: before a rejoin every position is committed and, after
//! it, positions are read back from the committed offsets.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use wire::generated::api::ApiKey;
use wire::generated::join_group_request::JoinGroupRequestProtocol;
use wire::generated::leave_group_request::MemberIdentity;
use wire::generated::sync_group_request::SyncGroupRequestAssignment;
use wire::generated::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use wire::ErrorCode;

use super::consumer_protocol::{
    decode_assignment, encode_assignment, encode_subscription, range_assign,
};
use super::groups::{commit_offsets, committed_offsets};
use super::routing::{kafka_error, leaders, Cluster};
use wire::consumer_protocol::subscribed_topics;

/// Kafka's consumer `session.timeout.ms` default: the coordinator drops a member that did
/// not heartbeat for this long.
pub const SESSION_TIMEOUT_MS: i32 = 45_000;
/// How long the coordinator waits for every member to rejoin (Kafka's consumer uses
/// `max.poll.interval.ms`, 5 minutes; this process polls every few hundred ms, so a minute
/// is plenty and keeps a JoinGroup's wait bounded).
pub const REBALANCE_TIMEOUT_MS: i32 = 60_000;
/// A JoinGroup is answered only when the rebalance completes: wait that long plus a margin
/// for the answer instead of the client's usual response timeout.
const JOIN_RESPONSE_TIMEOUT: Duration = Duration::from_millis(REBALANCE_TIMEOUT_MS as u64 + 10_000);
/// Kafka's consumer `heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
/// Kafka's consumer `auto.commit.interval.ms` default.
pub const AUTO_COMMIT_INTERVAL: Duration = Duration::from_secs(5);
/// JoinGroup/SyncGroup rounds in a row before giving up: a MEMBER_ID_REQUIRED, a rebalance
/// restarting under a SyncGroup, or a moved coordinator each cost one.
const MAX_JOIN_ROUNDS: u32 = 20;
/// Wait between rounds that failed for a retriable reason (Kafka's `retry.backoff.ms`).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
const PROTOCOL_TYPE: &str = "consumer";
const ASSIGNOR: &str = "range";
/// JoinGroup v1 is the first with a rebalance timeout; v4+ answers MEMBER_ID_REQUIRED first.
const JOIN_GROUP_MIN_VERSION: i16 = 1;
/// LeaveGroup v3 (KIP-345) names the members leaving in a list.
const LEAVE_GROUP_BATCH_VERSION: i16 = 3;

/// What a coordinator's answer asks the member to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// Join again with the same member id (a rebalance started).
    Rejoin,
    /// Join again as a new member (the coordinator forgot this one).
    RejoinAsNew,
    /// Find the coordinator again, then retry.
    Rediscover,
}

fn outcome(code: i16) -> Option<Outcome> {
    if code == 0 {
        return Some(Outcome::Ok);
    }
    match ErrorCode::from_code(code) {
        Some(ErrorCode::RebalanceInProgress) | Some(ErrorCode::IllegalGeneration) => {
            Some(Outcome::Rejoin)
        }
        Some(ErrorCode::UnknownMemberId) | Some(ErrorCode::FencedInstanceId) => {
            Some(Outcome::RejoinAsNew)
        }
        Some(
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress,
        ) => Some(Outcome::Rediscover),
        _ => None,
    }
}

/// One member of a classic consumer group subscribed to one topic.
pub struct GroupMember {
    group: String,
    topic: String,
    coordinator: i32,
    member_id: String,
    generation: i32,
    /// The partitions of `topic` this member owns in `generation`.
    assigned: Vec<i32>,
    last_heartbeat: Instant,
    last_commit: Instant,
}

impl GroupMember {
    /// Joins `group` subscribed to `topic` and waits for an assignment.
    pub fn join(cluster: &mut Cluster, group: &str, topic: &str) -> anyhow::Result<GroupMember> {
        let (coordinator, _) = cluster.coordinator(group)?;
        let mut member = GroupMember {
            group: group.to_owned(),
            topic: topic.to_owned(),
            coordinator,
            member_id: String::new(),
            generation: -1,
            assigned: Vec::new(),
            last_heartbeat: Instant::now(),
            last_commit: Instant::now(),
        };
        member.rejoin(cluster)?;
        Ok(member)
    }

    /// The partitions this member owns now.
    pub fn assigned(&self) -> &[i32] {
        &self.assigned
    }

    /// The offsets the group committed for the assigned partitions (those without one are
    /// left out).
    pub fn committed(&self, cluster: &mut Cluster) -> anyhow::Result<BTreeMap<i32, i64>> {
        let client = cluster.node(self.coordinator)?;
        let all = committed_offsets(client, &self.group)?;
        Ok(all
            .into_iter()
            .filter(|((t, p), _)| *t == self.topic && self.assigned.contains(p))
            .map(|((_, p), o)| (p, o))
            .collect())
    }

    /// Heartbeats and commits `positions` when due. `Some(partitions)`: the group
    /// rebalanced and this member now owns `partitions` (positions must be read again).
    pub fn poll(
        &mut self,
        cluster: &mut Cluster,
        positions: &BTreeMap<i32, i64>,
    ) -> anyhow::Result<Option<Vec<i32>>> {
        let mut next = Outcome::Ok;
        if self.last_commit.elapsed() >= AUTO_COMMIT_INTERVAL {
            next = self.commit(cluster, positions)?;
        }
        if next == Outcome::Ok && self.last_heartbeat.elapsed() >= HEARTBEAT_INTERVAL {
            next = self.heartbeat(cluster)?;
            if next == Outcome::Rejoin {
                // Eager rebalance: save what was read before giving the partitions up.
                if self.commit(cluster, positions)? == Outcome::RejoinAsNew {
                    next = Outcome::RejoinAsNew;
                }
            }
        }
        match next {
            Outcome::Ok => return Ok(None),
            Outcome::RejoinAsNew => self.member_id.clear(),
            Outcome::Rediscover => self.coordinator = cluster.coordinator(&self.group)?.0,
            Outcome::Rejoin => {}
        }
        self.rejoin(cluster)?;
        Ok(Some(self.assigned.clone()))
    }

    /// Commits `positions` (the next offset to read of each assigned partition) for the
    /// current generation; a rebalance answer is returned, not an error.
    fn commit(
        &mut self,
        cluster: &mut Cluster,
        positions: &BTreeMap<i32, i64>,
    ) -> anyhow::Result<Outcome> {
        self.last_commit = Instant::now();
        let plan: Vec<(String, i32, i64)> = positions
            .iter()
            .filter(|(p, _)| self.assigned.contains(p))
            .map(|(&p, &o)| (self.topic.clone(), p, o))
            .collect();
        if plan.is_empty() {
            return Ok(Outcome::Ok);
        }
        let client = cluster.node(self.coordinator)?;
        let Some((topic, p, code)) =
            commit_offsets(client, &self.group, self.generation, &self.member_id, &plan)?
        else {
            return Ok(Outcome::Ok);
        };
        outcome(code).ok_or_else(|| {
            kafka_error(format!("group {}, {topic}-{p}", self.group), code, None).into()
        })
    }

    fn heartbeat(&mut self, cluster: &mut Cluster) -> anyhow::Result<Outcome> {
        self.last_heartbeat = Instant::now();
        let client = cluster.node(self.coordinator)?;
        let version = client.version(ApiKey::Heartbeat, 0, i16::MAX)?;
        let request = HeartbeatRequest {
            group_id: self.group.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            ..Default::default()
        };
        let resp: HeartbeatResponse = client.request(ApiKey::Heartbeat, version, &request)?;
        outcome(resp.error_code).ok_or_else(|| {
            kafka_error(
                format!("heartbeat of group {}", self.group),
                resp.error_code,
                None,
            )
            .into()
        })
    }

    /// JoinGroup then SyncGroup until an assignment arrives, at most [`MAX_JOIN_ROUNDS`].
    fn rejoin(&mut self, cluster: &mut Cluster) -> anyhow::Result<()> {
        let mut last_code = 0;
        for _ in 0..MAX_JOIN_ROUNDS {
            let code = match self.join_round(cluster)? {
                Ok(()) => {
                    self.last_heartbeat = Instant::now();
                    self.last_commit = Instant::now();
                    return Ok(());
                }
                Err(code) => code,
            };
            last_code = code;
            match outcome(code) {
                Some(Outcome::RejoinAsNew) => self.member_id.clear(),
                Some(Outcome::Rediscover) => {
                    std::thread::sleep(RETRY_BACKOFF);
                    self.coordinator = cluster.coordinator(&self.group)?.0;
                }
                // MEMBER_ID_REQUIRED: the answer carried the id to join with.
                Some(Outcome::Rejoin) | Some(Outcome::Ok) => {}
                None if code == ErrorCode::MemberIdRequired.code() => {}
                None => return Err(kafka_error(format!("group {}", self.group), code, None).into()),
            }
        }
        Err(kafka_error(
            format!("joining group {}", self.group),
            last_code,
            None,
        ))
        .context(format!(
            "no assignment after {MAX_JOIN_ROUNDS} JoinGroup rounds"
        ))
    }

    /// One JoinGroup and SyncGroup; the error code where one answered an error.
    fn join_round(&mut self, cluster: &mut Cluster) -> anyhow::Result<Result<(), i16>> {
        let client = cluster.node(self.coordinator)?;
        let version = client.version(ApiKey::JoinGroup, JOIN_GROUP_MIN_VERSION, i16::MAX)?;
        let request = JoinGroupRequest {
            group_id: self.group.clone(),
            session_timeout_ms: SESSION_TIMEOUT_MS,
            rebalance_timeout_ms: REBALANCE_TIMEOUT_MS,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            protocol_type: PROTOCOL_TYPE.to_owned(),
            protocols: vec![JoinGroupRequestProtocol {
                name: ASSIGNOR.to_owned(),
                metadata: Bytes::from(encode_subscription(std::slice::from_ref(&self.topic))),
                ..Default::default()
            }],
            reason: None,
            ..Default::default()
        };
        client.set_response_timeout(JOIN_RESPONSE_TIMEOUT)?;
        let joined: kclient::Result<JoinGroupResponse> =
            client.request(ApiKey::JoinGroup, version, &request);
        client.set_response_timeout(super::client::IO_TIMEOUT)?;
        let joined = joined?;
        if !joined.member_id.is_empty() {
            self.member_id = joined.member_id.clone();
        }
        if joined.error_code != 0 {
            return Ok(Err(joined.error_code));
        }
        self.generation = joined.generation_id;
        let assignments = if joined.leader == self.member_id {
            self.assign(cluster, &joined)?
        } else {
            Vec::new()
        };
        let client = cluster.node(self.coordinator)?;
        let version = client.version(ApiKey::SyncGroup, 0, i16::MAX)?;
        let request = SyncGroupRequest {
            group_id: self.group.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            protocol_type: Some(PROTOCOL_TYPE.to_owned()),
            protocol_name: Some(
                joined
                    .protocol_name
                    .clone()
                    .unwrap_or_else(|| ASSIGNOR.to_owned()),
            ),
            assignments,
            ..Default::default()
        };
        let synced: SyncGroupResponse = client.request(ApiKey::SyncGroup, version, &request)?;
        if synced.error_code != 0 {
            return Ok(Err(synced.error_code));
        }
        let Some(assignment) = decode_assignment(&synced.assignment) else {
            bail!(
                "group {}: the leader's assignment is not a consumer protocol assignment",
                self.group
            );
        };
        self.assigned = assignment
            .into_iter()
            .filter(|(t, _)| *t == self.topic)
            .flat_map(|(_, ps)| ps)
            .collect();
        self.assigned.sort_unstable();
        self.assigned.dedup();
        Ok(Ok(()))
    }

    /// As the group's leader: every member's range assignment, from their subscriptions and
    /// the partition counts Metadata gives.
    fn assign(
        &self,
        cluster: &mut Cluster,
        joined: &JoinGroupResponse,
    ) -> anyhow::Result<Vec<SyncGroupRequestAssignment>> {
        let subscriptions: Vec<(String, Vec<String>)> = joined
            .members
            .iter()
            .map(|m| (m.member_id.clone(), subscribed_topics(&m.metadata)))
            .collect();
        let mut topics: Vec<String> = subscriptions
            .iter()
            .flat_map(|(_, ts)| ts.iter().cloned())
            .collect();
        topics.sort_unstable();
        topics.dedup();
        let md = cluster.metadata(Some(&topics))?;
        let counts: BTreeMap<String, i32> = topics
            .iter()
            .filter_map(|t| Some((t.clone(), leaders(&md, t).ok()?.len() as i32)))
            .collect();
        Ok(range_assign(&subscriptions, &counts)
            .into_iter()
            .map(|(member_id, assigned)| SyncGroupRequestAssignment {
                member_id,
                assignment: Bytes::from(encode_assignment(&assigned)),
                ..Default::default()
            })
            .collect())
    }

    /// Commits `positions` a last time and leaves the group, so that its partitions go to
    /// the other members at once (and an only member leaves the group Empty).
    pub fn close(
        mut self,
        cluster: &mut Cluster,
        positions: &BTreeMap<i32, i64>,
        err: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        let committed = self.commit(cluster, positions)?;
        if committed != Outcome::Ok {
            // The group rebalanced under this member: its positions belong to the next owner.
            writeln!(
                err,
                "[broker consume] offsets of group {} not committed: the group is rebalancing",
                self.group
            )?;
        }
        let client = cluster.node(self.coordinator)?;
        let version = client.version(ApiKey::LeaveGroup, 0, i16::MAX)?;
        let request = if version >= LEAVE_GROUP_BATCH_VERSION {
            LeaveGroupRequest {
                group_id: self.group.clone(),
                members: vec![MemberIdentity {
                    member_id: self.member_id.clone(),
                    group_instance_id: None,
                    reason: Some("the consumer is being closed".to_owned()),
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
        let resp: LeaveGroupResponse = client.request(ApiKey::LeaveGroup, version, &request)?;
        let code = if resp.error_code != 0 {
            resp.error_code
        } else {
            resp.members.first().map_or(0, |m| m.error_code)
        };
        // A member the coordinator already dropped has nothing left to leave.
        if code != 0 && code != ErrorCode::UnknownMemberId.code() {
            return Err(kafka_error(format!("leaving group {}", self.group), code, None).into());
        }
        Ok(())
    }
}
