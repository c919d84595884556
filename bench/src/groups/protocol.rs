//! The Kafka requests the modes share: finding the coordinator, the broker's configs, the
//! consumer-protocol blobs and OffsetCommit.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Result};
use bytes::Bytes;
use wire::generated::api::ApiKey;
use wire::generated::describe_configs_request::DescribeConfigsResource;
use wire::generated::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use wire::generated::{
    DescribeConfigsRequest, DescribeConfigsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, OffsetCommitRequest, OffsetCommitResponse,
};
use wire::ErrorCode;

use super::{
    COORDINATOR_BACKOFF, INITIAL_DELAY_KEY, MAX_COORDINATOR_RETRIES, RESOURCE_BROKER,
    SUBSCRIBED_TOPIC,
};
use crate::native::{error_name, parse_bootstrap};
use kclient::conn::Connection;

pub(super) fn first_bootstrap(bootstrap: &str) -> Result<String> {
    parse_bootstrap(bootstrap)
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no bootstrap server in {bootstrap:?}"))
}

pub(super) fn code_of(code: i16) -> Option<ErrorCode> {
    ErrorCode::from_code(code)
}

/// Errors that mean "ask again shortly" (the coordinator is loading or being created).
pub(super) fn coordinator_busy(code: i16) -> bool {
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
pub(super) fn subscription() -> Bytes {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&(SUBSCRIBED_TOPIC.len() as i16).to_be_bytes());
    out.extend_from_slice(SUBSCRIBED_TOPIC.as_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

/// ConsumerProtocolAssignment v0 with no partitions and no user data.
pub(super) fn empty_assignment() -> Bytes {
    let mut out = Vec::with_capacity(10);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

/// The coordinator of `group` (node id and address), waiting while it is being created.
pub fn find_coordinator(conn: &mut Connection, group: &str) -> Result<(i32, String)> {
    let version = conn.versions().pick(ApiKey::FindCoordinator, 0, 4)?;
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
pub(super) fn describe_configs(
    conn: &mut Connection,
    resource_type: i8,
    name: &str,
    keys: &[&str],
) -> HashMap<String, Option<String>> {
    let Ok(version) = conn.versions().pick(ApiKey::DescribeConfigs, 1, 4) else {
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

pub(super) fn config_value(
    conn: &mut Connection,
    resource_type: i8,
    name: &str,
    key: &str,
) -> Option<String> {
    describe_configs(conn, resource_type, name, &[key])
        .remove(key)
        .flatten()
}

/// The broker's `group.initial.rebalance.delay.ms` (None: it does not tell), which every new
/// group's first join waits.
pub(super) fn initial_rebalance_delay_ms(conn: &mut Connection, node: i32) -> Option<u64> {
    config_value(conn, RESOURCE_BROKER, &node.to_string(), INITIAL_DELAY_KEY)
        .and_then(|v| v.parse::<u64>().ok())
}

/// An OffsetCommit of `offset` for partitions 0..partitions of `topic`.
pub(super) fn commit_request(
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

pub(super) fn check_commit(resp: &OffsetCommitResponse) -> Result<()> {
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
