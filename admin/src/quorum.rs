//! `broker metadata-quorum describe --status | --replication`: the metadata quorum from
//! DescribeQuorum (API 55), printed as `kafka-metadata-quorum.sh` prints it (the same field
//! names, the same columns, the same lag arithmetic), or as JSON lines.

use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::describe_quorum_request::{PartitionData, TopicData};
use wire::generated::describe_quorum_response::ReplicaState;
use wire::generated::{DescribeQuorumRequest, DescribeQuorumResponse};
use wire::primitives::Uuid;

use super::client::Client;
use super::CommonArgs;

/// The metadata log's topic and its one partition.
const METADATA_TOPIC: &str = "__cluster_metadata";
const METADATA_PARTITION: i32 = 0;

/// `broker metadata-quorum`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum MetadataQuorumCommand {
    /// Describes the quorum: its leader and epoch (`--status`) or each replica's lag
    /// (`--replication`).
    Describe(DescribeArgs),
}

#[derive(Debug, Clone, clap::Args)]
#[group(required = true, multiple = false)]
pub struct What {
    /// The leader, its epoch, the high watermark, the voters and the observers.
    #[arg(long)]
    pub status: bool,
    /// One line per replica: log end offset, lag, last fetch and caught-up times.
    #[arg(long)]
    pub replication: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub what: What,
}

/// One replica of the metadata log, as DescribeQuorum reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub id: i32,
    /// `None` when the answer has none (before v2, or the zero id).
    pub directory_id: Option<String>,
    pub log_end_offset: i64,
    /// -1 when unknown (and for the leader, as Kafka reports it).
    pub last_fetch_timestamp: i64,
    pub last_caught_up_timestamp: i64,
}

/// What DescribeQuorum said about `__cluster_metadata-0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quorum {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<Replica>,
    pub observers: Vec<Replica>,
    /// Each voter's endpoints (`NAME://host:port`), from v2's `Nodes`.
    pub endpoints: Vec<(i32, Vec<String>)>,
}

impl Quorum {
    fn leader(&self) -> Option<&Replica> {
        self.voters.iter().find(|v| v.id == self.leader_id)
    }

    /// kafka-metadata-quorum.sh's MaxFollowerLag: the largest distance of a voter's log end
    /// behind the leader's.
    pub fn max_follower_lag(&self) -> i64 {
        let Some(leader) = self.leader() else {
            return -1;
        };
        self.voters
            .iter()
            .map(|v| leader.log_end_offset - v.log_end_offset)
            .max()
            .unwrap_or(0)
    }

    /// kafka-metadata-quorum.sh's MaxFollowerLagTimeMs: how long ago the voter furthest
    /// behind last caught up, by the leader's clock (0 when the leader is the only voter or
    /// the furthest behind, -1 when a time is unknown).
    pub fn max_follower_lag_time_ms(&self) -> i64 {
        let Some(leader) = self.leader() else {
            return -1;
        };
        let Some(furthest) = self
            .voters
            .iter()
            .max_by_key(|v| leader.log_end_offset - v.log_end_offset)
        else {
            return 0;
        };
        if furthest.id == leader.id {
            0
        } else if leader.last_caught_up_timestamp >= 0 && furthest.last_caught_up_timestamp >= 0 {
            leader.last_caught_up_timestamp - furthest.last_caught_up_timestamp
        } else {
            -1
        }
    }
}

pub fn describe(client: &mut Client) -> anyhow::Result<Quorum> {
    if !client.supports(ApiKey::DescribeQuorum) {
        bail!("the broker does not serve DescribeQuorum (API 55): it has no metadata quorum");
    }
    let version = client.version(ApiKey::DescribeQuorum, 0, 2)?;
    let request = DescribeQuorumRequest {
        topics: vec![TopicData {
            topic_name: METADATA_TOPIC.to_owned(),
            partitions: vec![PartitionData {
                partition_index: METADATA_PARTITION,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp: DescribeQuorumResponse = client.request(ApiKey::DescribeQuorum, version, &request)?;
    check(resp.error_code, resp.error_message.as_deref())?;
    let topic = resp
        .topics
        .into_iter()
        .find(|t| t.topic_name == METADATA_TOPIC)
        .context("DescribeQuorum answered without __cluster_metadata")?;
    let partition = topic
        .partitions
        .into_iter()
        .find(|p| p.partition_index == METADATA_PARTITION)
        .context("DescribeQuorum answered without __cluster_metadata-0")?;
    check(partition.error_code, partition.error_message.as_deref())?;
    Ok(Quorum {
        leader_id: partition.leader_id,
        leader_epoch: partition.leader_epoch,
        high_watermark: partition.high_watermark,
        voters: partition.current_voters.iter().map(replica).collect(),
        observers: partition.observers.iter().map(replica).collect(),
        endpoints: resp
            .nodes
            .iter()
            .map(|n| {
                let listeners = n
                    .listeners
                    .iter()
                    .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
                    .collect();
                (n.node_id, listeners)
            })
            .collect(),
    })
}

fn check(code: i16, message: Option<&str>) -> anyhow::Result<()> {
    if code != 0 {
        bail!("{}", kclient::error::refusal(code, message));
    }
    Ok(())
}

fn replica(state: &ReplicaState) -> Replica {
    let dir = state.replica_directory_id;
    Replica {
        id: state.replica_id,
        directory_id: (dir != Uuid::ZERO).then(|| dir.to_string()),
        log_end_offset: state.log_end_offset,
        last_fetch_timestamp: state.last_fetch_timestamp,
        last_caught_up_timestamp: state.last_caught_up_timestamp,
    }
}

pub fn run(command: &MetadataQuorumCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let MetadataQuorumCommand::Describe(args) = command;
    let mut client = Client::connect(&args.common.bootstrap_server)?;
    let quorum = describe(&mut client)?;
    if args.what.status {
        let cluster = super::cluster::describe(&mut client)?;
        print_status(
            &quorum,
            cluster.cluster_id.as_deref(),
            args.common.json,
            out,
        )
    } else {
        print_replication(&quorum, args.common.json, out)
    }
}

/// `--status`, with kafka-metadata-quorum.sh's labels.
pub fn print_status(
    quorum: &Quorum,
    cluster_id: Option<&str>,
    as_json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let endpoints = |id: i32| -> Vec<String> {
        quorum
            .endpoints
            .iter()
            .find(|(node, _)| *node == id)
            .map(|(_, e)| e.clone())
            .unwrap_or_default()
    };
    let describe = |r: &Replica, with_endpoints: bool| {
        let mut v = json!({ "id": r.id });
        if let Some(dir) = &r.directory_id {
            v["directoryId"] = json!(dir);
        }
        if with_endpoints {
            v["endpoints"] = json!(endpoints(r.id));
        }
        v
    };
    let voters: Vec<_> = quorum.voters.iter().map(|r| describe(r, true)).collect();
    let observers: Vec<_> = quorum
        .observers
        .iter()
        .map(|r| describe(r, false))
        .collect();
    if as_json {
        writeln!(
            out,
            "{}",
            json!({
                "cluster_id": cluster_id,
                "leader_id": quorum.leader_id,
                "leader_epoch": quorum.leader_epoch,
                "high_watermark": quorum.high_watermark,
                "max_follower_lag": quorum.max_follower_lag(),
                "max_follower_lag_time_ms": quorum.max_follower_lag_time_ms(),
                "current_voters": voters,
                "current_observers": observers,
            })
        )?;
        return Ok(());
    }
    let list = |items: &[serde_json::Value]| {
        let parts: Vec<String> = items.iter().map(|v| v.to_string()).collect();
        format!("[{}]", parts.join(", "))
    };
    writeln!(out, "ClusterId:              {}", cluster_id.unwrap_or(""))?;
    writeln!(out, "LeaderId:               {}", quorum.leader_id)?;
    writeln!(out, "LeaderEpoch:            {}", quorum.leader_epoch)?;
    writeln!(out, "HighWatermark:          {}", quorum.high_watermark)?;
    writeln!(out, "MaxFollowerLag:         {}", quorum.max_follower_lag())?;
    writeln!(
        out,
        "MaxFollowerLagTimeMs:   {}",
        quorum.max_follower_lag_time_ms()
    )?;
    writeln!(out, "CurrentVoters:          {}", list(&voters))?;
    writeln!(out, "CurrentObservers:       {}", list(&observers))?;
    Ok(())
}

/// `--replication`: one row per replica, the leader first, then the other voters, then the
/// observers, with Kafka's columns (Lag against the leader's log end).
pub fn print_replication(
    quorum: &Quorum,
    as_json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let leader_end = quorum
        .leader()
        .map_or(quorum.high_watermark, |l| l.log_end_offset);
    let mut rows: Vec<(&Replica, &str)> = Vec::new();
    rows.extend(quorum.leader().map(|l| (l, "Leader")));
    rows.extend(
        quorum
            .voters
            .iter()
            .filter(|v| v.id != quorum.leader_id)
            .map(|v| (v, "Follower")),
    );
    rows.extend(quorum.observers.iter().map(|o| (o, "Observer")));
    if as_json {
        for (r, status) in rows {
            writeln!(
                out,
                "{}",
                json!({
                    "node_id": r.id,
                    "directory_id": r.directory_id,
                    "log_end_offset": r.log_end_offset,
                    "lag": leader_end - r.log_end_offset,
                    "last_fetch_timestamp": r.last_fetch_timestamp,
                    "last_caught_up_timestamp": r.last_caught_up_timestamp,
                    "status": status,
                })
            )?;
        }
        return Ok(());
    }
    let header = [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for (r, status) in rows {
        table.push(vec![
            r.id.to_string(),
            r.directory_id
                .clone()
                .unwrap_or_else(|| Uuid::ZERO.to_string()),
            r.log_end_offset.to_string(),
            (leader_end - r.log_end_offset).to_string(),
            r.last_fetch_timestamp.to_string(),
            r.last_caught_up_timestamp.to_string(),
            status.to_owned(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| table.iter().map(|row| row[c].len()).max().unwrap_or(0))
        .collect();
    for row in table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: i32, end: i64, caught_up: i64) -> Replica {
        Replica {
            id,
            directory_id: None,
            log_end_offset: end,
            last_fetch_timestamp: -1,
            last_caught_up_timestamp: caught_up,
        }
    }

    fn three_voters() -> Quorum {
        Quorum {
            leader_id: 2,
            leader_epoch: 7,
            high_watermark: 100,
            voters: vec![
                replica(1, 90, 4_000),
                replica(2, 100, 5_000),
                replica(3, 100, 5_000),
            ],
            observers: vec![replica(4, 80, 3_000)],
            endpoints: vec![(2, vec!["CONTROLLER://h2:9093".to_owned()])],
        }
    }

    #[test]
    fn lag_is_the_furthest_voter_behind_the_leader() {
        let q = three_voters();
        assert_eq!(q.max_follower_lag(), 10);
        assert_eq!(q.max_follower_lag_time_ms(), 1_000);
        let alone = Quorum {
            voters: vec![replica(2, 100, 5_000)],
            observers: vec![],
            ..q
        };
        assert_eq!(
            (alone.max_follower_lag(), alone.max_follower_lag_time_ms()),
            (0, 0)
        );
    }

    #[test]
    fn status_prints_kafkas_labels() {
        let mut out = Vec::new();
        print_status(&three_voters(), Some("abc"), false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("ClusterId:              abc\n"), "{text}");
        assert!(text.contains("LeaderId:               2\n"), "{text}");
        assert!(text.contains("MaxFollowerLag:         10\n"), "{text}");
        assert!(
            text.contains(r#"{"endpoints":["CONTROLLER://h2:9093"],"id":2}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"CurrentObservers:       [{"id":4}]"#),
            "{text}"
        );
    }

    #[test]
    fn replication_lists_leader_then_followers_then_observers() {
        let mut out = Vec::new();
        print_replication(&three_voters(), false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let statuses: Vec<(&str, &str)> = text
            .lines()
            .skip(1)
            .map(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                (cells[0], cells[cells.len() - 1])
            })
            .collect();
        assert_eq!(
            statuses,
            [
                ("2", "Leader"),
                ("1", "Follower"),
                ("3", "Follower"),
                ("4", "Observer")
            ]
        );
        let follower: Vec<&str> = text.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(follower[2..4], ["90", "10"], "{text}");
    }
}
