//! A group's committed offsets: reading them all (OffsetFetch) and committing some
//! (OffsetCommit), shared by `describe`, `reset-offsets` and the consumer-group commands.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use wire::generated::api::ApiKey;
use wire::generated::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use wire::generated::offset_fetch_request::OffsetFetchRequestGroup;
use wire::generated::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};

use crate::client::Client;
use crate::routing::kafka_error;

/// OffsetFetch v2 is the first where a null topic list means "every committed offset".
const OFFSET_FETCH_MIN_VERSION: i16 = 2;
/// OffsetCommit v2 is the first without the v1 per-partition timestamp and with retention.
const OFFSET_COMMIT_MIN_VERSION: i16 = 2;

/// Every offset `group` committed (OffsetFetch with all topics).
pub fn committed_offsets(
    client: &mut Client,
    group: &str,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let version = client.version(ApiKey::OffsetFetch, OFFSET_FETCH_MIN_VERSION, i16::MAX)?;
    // v8 (KIP-709) asks for groups in a batch.
    let request = if version >= 8 {
        OffsetFetchRequest {
            groups: vec![OffsetFetchRequestGroup {
                group_id: group.to_owned(),
                member_id: None,
                member_epoch: -1,
                topics: None,
                ..Default::default()
            }],
            ..Default::default()
        }
    } else {
        OffsetFetchRequest {
            group_id: group.to_owned(),
            topics: None,
            ..Default::default()
        }
    };
    let resp: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, version, &request)?;
    let mut committed = BTreeMap::new();
    let check = |code: i16, what: String| -> anyhow::Result<()> {
        if code != 0 {
            return Err(kafka_error(what, code, None).into());
        }
        Ok(())
    };
    if version >= 8 {
        let Some(g) = resp.groups.iter().find(|g| g.group_id == group) else {
            bail!("OffsetFetch answered nothing for group {group}");
        };
        check(g.error_code, format!("group {group}"))?;
        for t in &g.topics {
            for p in &t.partitions {
                check(p.error_code, format!("{}-{}", t.name, p.partition_index))?;
                if p.committed_offset >= 0 {
                    committed.insert((t.name.clone(), p.partition_index), p.committed_offset);
                }
            }
        }
    } else {
        check(resp.error_code, format!("group {group}"))?;
        for t in &resp.topics {
            for p in &t.partitions {
                check(p.error_code, format!("{}-{}", t.name, p.partition_index))?;
                if p.committed_offset >= 0 {
                    committed.insert((t.name.clone(), p.partition_index), p.committed_offset);
                }
            }
        }
    }
    Ok(committed)
}

/// OffsetCommit of `plan` (topic, partition, offset) for `group` as member `member_id` of
/// `generation`; the first partition the coordinator refused, with its error code.
pub fn commit_offsets(
    client: &mut Client,
    group: &str,
    generation: i32,
    member_id: &str,
    plan: &[(String, i32, i64)],
) -> anyhow::Result<Option<(String, i32, i16)>> {
    let version = client.version(ApiKey::OffsetCommit, OFFSET_COMMIT_MIN_VERSION, i16::MAX)?;
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (topic, p, offset) in plan {
        by_topic
            .entry(topic.as_str())
            .or_default()
            .push(OffsetCommitRequestPartition {
                partition_index: *p,
                committed_offset: *offset,
                committed_leader_epoch: -1,
                commit_timestamp: -1,
                committed_metadata: Some(String::new()),
                ..Default::default()
            });
    }
    let request = OffsetCommitRequest {
        group_id: group.to_owned(),
        generation_id_or_member_epoch: generation,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: by_topic
            .into_iter()
            .map(|(name, partitions)| OffsetCommitRequestTopic {
                name: name.to_owned(),
                partitions,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let resp: OffsetCommitResponse = client
        .request(ApiKey::OffsetCommit, version, &request)
        .with_context(|| format!("committing offsets of group {group}"))?;
    for t in &resp.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                return Ok(Some((t.name.clone(), p.partition_index, p.error_code)));
            }
        }
    }
    Ok(None)
}
