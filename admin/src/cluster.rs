//! `broker describe-cluster`: the cluster id, the controller and the brokers (id, host, port,
//! rack), from DescribeCluster (API 60, KIP-700) where the broker has it, else from a Metadata
//! request for no topics (which every broker answers).

use std::io::Write;

use anyhow::bail;
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::{DescribeClusterRequest, DescribeClusterResponse};

use super::client::{error_message, error_name, Client};
use super::CommonArgs;

/// KIP-919's endpoint type of brokers.
const ENDPOINT_BROKERS: i8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// `None` from brokers older than Metadata v2.
    pub cluster_id: Option<String>,
    /// -1: unknown.
    pub controller: i32,
    pub brokers: Vec<Broker>,
    /// The API that answered: `DescribeCluster` or `Metadata`.
    pub via: &'static str,
}

/// `broker describe-cluster`.
#[derive(Debug, Clone, clap::Args)]
pub struct DescribeClusterArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn describe(client: &mut Client) -> anyhow::Result<Cluster> {
    let mut cluster = if client.supports(ApiKey::DescribeCluster) {
        let version = client.version(ApiKey::DescribeCluster, 0, i16::MAX)?;
        let request = DescribeClusterRequest {
            include_cluster_authorized_operations: false,
            endpoint_type: ENDPOINT_BROKERS,
            ..Default::default()
        };
        let resp: DescribeClusterResponse =
            client.request(ApiKey::DescribeCluster, version, &request)?;
        if resp.error_code != 0 {
            bail!(
                "{}: {}",
                error_name(resp.error_code),
                resp.error_message
                    .as_deref()
                    .unwrap_or_else(|| error_message(resp.error_code))
            );
        }
        Cluster {
            cluster_id: Some(resp.cluster_id),
            controller: resp.controller_id,
            brokers: resp
                .brokers
                .into_iter()
                .map(|b| Broker {
                    id: b.broker_id,
                    host: b.host,
                    port: b.port,
                    rack: b.rack,
                })
                .collect(),
            via: "DescribeCluster",
        }
    } else {
        let resp = client.metadata(Some(&[]), false)?;
        Cluster {
            cluster_id: resp.cluster_id,
            controller: resp.controller_id,
            brokers: resp
                .brokers
                .into_iter()
                .map(|b| Broker {
                    id: b.node_id,
                    host: b.host,
                    port: b.port,
                    rack: b.rack,
                })
                .collect(),
            via: "Metadata",
        }
    };
    cluster.brokers.sort_by_key(|b| b.id);
    Ok(cluster)
}

pub fn run(args: &DescribeClusterArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut client = Client::connect(&args.common.bootstrap_server)?;
    let cluster = describe(&mut client)?;
    print(&cluster, args.common.json, out)
}

/// Prints `cluster` as a table (kafka-cluster.sh's `Cluster ID:` line first) or one JSON line.
pub fn print(cluster: &Cluster, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let brokers: Vec<_> = cluster
            .brokers
            .iter()
            .map(|b| json!({ "id": b.id, "host": b.host, "port": b.port, "rack": b.rack }))
            .collect();
        writeln!(
            out,
            "{}",
            json!({
                "cluster_id": cluster.cluster_id,
                "controller": cluster.controller,
                "brokers": brokers,
                "via": cluster.via,
            })
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "Cluster ID: {}",
        cluster.cluster_id.as_deref().unwrap_or("(none)")
    )?;
    if cluster.controller < 0 {
        writeln!(out, "Controller: (none)")?;
    } else {
        writeln!(out, "Controller: {}", cluster.controller)?;
    }
    let mut rows = vec![[
        "ID".to_owned(),
        "HOST".to_owned(),
        "PORT".to_owned(),
        "RACK".to_owned(),
    ]];
    rows.extend(cluster.brokers.iter().map(|b| {
        [
            b.id.to_string(),
            b.host.clone(),
            b.port.to_string(),
            b.rack.clone().unwrap_or_else(|| "-".to_owned()),
        ]
    }));
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let line = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster {
            cluster_id: Some("abc".to_owned()),
            controller: 1,
            brokers: vec![
                Broker {
                    id: 1,
                    host: "10.0.0.1".to_owned(),
                    port: 9092,
                    rack: None,
                },
                Broker {
                    id: 12,
                    host: "h".to_owned(),
                    port: 19092,
                    rack: Some("r1".to_owned()),
                },
            ],
            via: "DescribeCluster",
        }
    }

    #[test]
    fn table() {
        let mut out = Vec::new();
        print(&cluster(), false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Cluster ID: abc\nController: 1\n\
             ID  HOST      PORT   RACK\n\
             1   10.0.0.1  9092   -\n\
             12  h         19092  r1\n"
        );
    }

    #[test]
    fn json_line() {
        let mut out = Vec::new();
        print(&cluster(), true, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["cluster_id"], "abc");
        assert_eq!(v["controller"], 1);
        assert_eq!(v["brokers"][1]["rack"], "r1");
        assert_eq!(v["brokers"][0]["rack"], serde_json::Value::Null);
        assert_eq!(v["via"], "DescribeCluster");
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
    }
}
