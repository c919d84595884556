//! One member of a classic group: join (with the member id KIP-394 hands out), sync,
//! heartbeat and leave, on a connection it borrows.

use std::time::Duration;

use anyhow::{bail, Result};
use wire::generated::api::ApiKey;
use wire::generated::join_group_request::JoinGroupRequestProtocol;
use wire::generated::leave_group_request::MemberIdentity;
use wire::generated::sync_group_request::SyncGroupRequestAssignment;
use wire::generated::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, OffsetCommitResponse, SyncGroupRequest, SyncGroupResponse,
};
use wire::ErrorCode;

use super::protocol::{
    check_commit, code_of, commit_request, coordinator_busy, empty_assignment, subscription,
};
use super::{COORDINATOR_BACKOFF, MAX_JOINS_PER_MEMBER, PROTOCOL_NAME, PROTOCOL_TYPE, WAIT_SLACK};
use crate::native::error_name;
use kclient::conn::Connection;

/// One member of a classic group, on a connection it borrows.
pub(super) struct Member<'c> {
    pub(super) conn: &'c mut Connection,
    pub(super) group: String,
    pub(super) member_id: String,
    pub(super) generation: i32,
    pub(super) protocol: Option<String>,
    pub(super) session_timeout_ms: i32,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) joins: u64,
    pub(super) syncs: u64,
}

/// What a JoinGroup answer asks of the member.
pub(super) enum Joined {
    /// A generation: whether this member leads it, and (for the leader) the member ids.
    Generation { leader: bool, members: Vec<String> },
    /// Join again (with the member id now known, or without one).
    Again,
}

impl<'c> Member<'c> {
    pub(super) fn new(
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

    pub(super) fn join_once(&mut self) -> Result<Joined> {
        // v5+: group instance ids; v4+ answer MEMBER_ID_REQUIRED (KIP-394).
        let version = self.conn.versions().pick(ApiKey::JoinGroup, 5, 9)?;
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
    pub(super) fn join(&mut self) -> Result<(bool, Vec<String>)> {
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
    pub(super) fn sync(&mut self, members: &[String]) -> Result<bool> {
        // v3+ carry group instance ids, as JoinGroup v5 does.
        let version = self.conn.versions().pick(ApiKey::SyncGroup, 3, 5)?;
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
    pub(super) fn heartbeat(&mut self) -> Result<bool> {
        let version = self.conn.versions().pick(ApiKey::Heartbeat, 0, 4)?;
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
    pub(super) fn rejoin_or_fail(&mut self, what: &str, code: i16) -> Result<bool> {
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
    pub(super) fn commit(&mut self, topic: &str, offset: i64) -> Result<()> {
        let request = commit_request(
            &self.group,
            self.generation,
            &self.member_id,
            topic,
            1,
            offset,
        );
        let version = self.conn.versions().pick(ApiKey::OffsetCommit, 2, 9)?;
        let resp: OffsetCommitResponse =
            self.conn.request(ApiKey::OffsetCommit, version, &request)?;
        check_commit(&resp)
    }

    pub(super) fn leave(&mut self) -> Result<()> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let version = self.conn.versions().pick(ApiKey::LeaveGroup, 0, 5)?;
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
