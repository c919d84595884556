//! Renders the shards' snapshots as one Prometheus scrape (on the scrape thread): the
//! per-shard families with a `shard` label, the per-partition log figures, and consumer
//! group lag, which joins each committed offset (held by its group's coordinator shard) with
//! its partition's log end offset (held by the partition's owner shard).

use std::collections::HashMap;

use wire::generated::api::ApiKey;
use wire::ErrorCode;

use super::exposition::{Exposition, Kind};

use super::snapshot::{Collected, ShardSnapshot};

/// A per-shard counter or gauge: one family, one sample per shard.
struct PerShard {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    value: fn(&ShardSnapshot) -> u64,
}

const PER_SHARD: &[PerShard] = &[
    PerShard {
        name: "broker_connections_open",
        kind: Kind::Gauge,
        help: "Client connections served by the shard now.",
        value: |s| s.connections_open,
    },
    PerShard {
        name: "broker_connections_accepted_total",
        kind: Kind::Counter,
        help: "Client connections accepted by the shard (handed-over ones not included).",
        value: |s| s.connections_accepted,
    },
    PerShard {
        name: "broker_connections_closed_total",
        kind: Kind::Counter,
        help: "Client connections that ended on the shard (handed-over ones not included).",
        value: |s| s.connections_closed,
    },
    PerShard {
        name: "broker_connections_refused_total",
        kind: Kind::Counter,
        help: "Connections closed at accept by max.connections or max.connections.per.ip.",
        value: |s| s.connections_refused,
    },
    PerShard {
        name: "broker_connection_handoffs_in_total",
        kind: Kind::Counter,
        help: "Connections taken over from another shard (connection.handoff.enable).",
        value: |s| s.handoffs_in,
    },
    PerShard {
        name: "broker_connection_handoffs_out_total",
        kind: Kind::Counter,
        help: "Connections handed to the shard owning their partitions.",
        value: |s| s.handoffs_out,
    },
    PerShard {
        name: "broker_forwards_in_total",
        kind: Kind::Counter,
        help: "Requests (parts) other shards forwarded to this shard over the mesh.",
        value: |s| s.forwarded_in,
    },
    PerShard {
        name: "broker_forwards_out_total",
        kind: Kind::Counter,
        help: "Requests (parts) this shard forwarded to the shard owning their partitions.",
        value: |s| s.forwarded_out,
    },
    PerShard {
        name: "broker_produce_batches_total",
        kind: Kind::Counter,
        help: "Record batches appended to partitions this shard owns.",
        value: |s| s.produce_batches,
    },
    PerShard {
        name: "broker_partition_fetches_total",
        kind: Kind::Counter,
        help: "Partition reads served from logs this shard owns.",
        value: |s| s.fetches,
    },
    PerShard {
        name: "broker_fetch_sessions",
        kind: Kind::Gauge,
        help: "Incremental fetch sessions the shard holds (Kafka's NumIncrementalFetchSessions).",
        value: |s| s.fetch_sessions.sessions,
    },
    PerShard {
        name: "broker_fetch_session_partitions",
        kind: Kind::Gauge,
        help: "Partitions cached in the shard's fetch sessions (NumIncrementalFetchPartitionsCached).",
        value: |s| s.fetch_sessions.partitions,
    },
    PerShard {
        name: "broker_fetch_session_evictions_total",
        kind: Kind::Counter,
        help: "Fetch sessions evicted to make room for new ones (IncrementalFetchSessionEvictionsPerSec).",
        value: |s| s.fetch_sessions.evictions,
    },
    PerShard {
        name: "broker_fetch_cold_read_bytes_total",
        kind: Kind::Counter,
        help: "Fetched record bytes that were not in the page cache and were read from disk first.",
        value: |s| s.cold_bytes,
    },
    PerShard {
        name: "broker_fetch_sendfile_bytes_total",
        kind: Kind::Counter,
        help: "Fetched record bytes sent by sendfile (page cache to socket, no copy).",
        value: |s| s.sendfile_bytes,
    },
    PerShard {
        name: "broker_fetch_copied_bytes_total",
        kind: Kind::Counter,
        help: "Fetched record bytes that went through a user-space buffer (TLS, fetch.path=copy, full socket).",
        value: |s| s.copied_bytes,
    },
    PerShard {
        name: "broker_fetch_remote_range_bytes_total",
        kind: Kind::Counter,
        help: "Fetched record bytes sent from partitions owned by another shard (file ranges across the mesh).",
        value: |s| s.remote_range_bytes,
    },
    PerShard {
        name: "broker_fsync_rounds_total",
        kind: Kind::Counter,
        help: "Group-commit rounds (concurrent fdatasyncs of the logs that need one).",
        value: |s| s.fsync_rounds,
    },
];

/// The text of one scrape.
pub fn render(collected: &Collected) -> String {
    let mut text = Exposition::new();
    let shards = &collected.snapshots;
    let labels: Vec<String> = shards.iter().map(|s| s.shard.to_string()).collect();

    text.family(
        "broker_shards",
        Kind::Gauge,
        "Shards (cores) of the broker.",
    );
    text.sample("broker_shards", &[], collected.shards as u64);
    text.family(
        "broker_metrics_stale_shards",
        Kind::Gauge,
        "Shards whose figures in this scrape are from an earlier scrape (they did not answer in time).",
    );
    text.sample(
        "broker_metrics_stale_shards",
        &[],
        collected.stale_shards as u64,
    );

    api_families(&mut text, shards, &labels);

    for family in PER_SHARD {
        text.family(family.name, family.kind, family.help);
        for (snapshot, shard) in shards.iter().zip(&labels) {
            text.sample(
                family.name,
                &[("shard", shard.as_str())],
                (family.value)(snapshot),
            );
        }
    }
    text.family(
        "broker_fetch_ranges_total",
        Kind::Counter,
        "File ranges of fetched records sent, by whether they were in the page cache (hot) or read from disk first (cold).",
    );
    for (snapshot, shard) in shards.iter().zip(&labels) {
        let name = "broker_fetch_ranges_total";
        text.sample(
            name,
            &[("shard", shard.as_str()), ("cache", "hot")],
            snapshot.hot_ranges,
        );
        text.sample(
            name,
            &[("shard", shard.as_str()), ("cache", "cold")],
            snapshot.cold_ranges,
        );
    }
    text.family(
        "broker_fsyncs_total",
        Kind::Counter,
        "fsync and fdatasync calls on partition logs and (shard 0) the metadata log (files and directories), by reason: group_commit (active segments' data: acks=all, flush.messages, flush.ms), segment_roll (rolled segments and the new segment's directory entry), partition_create, log_start_offset (retention, DeleteRecords), open_close (recovery at open, clean close), other (compaction, deletion, the metadata log).",
    );
    for (snapshot, shard) in shards.iter().zip(&labels) {
        for &(reason, count) in &snapshot.fsyncs {
            text.sample(
                "broker_fsyncs_total",
                &[("shard", shard.as_str()), ("reason", reason)],
                count,
            );
        }
    }
    text.family(
        "broker_fsync_round_duration_seconds",
        Kind::Histogram,
        "Duration of one group-commit round's fdatasyncs (all its logs, concurrently).",
    );
    for (snapshot, shard) in shards.iter().zip(&labels) {
        text.histogram(
            "broker_fsync_round_duration_seconds",
            &[("shard", shard.as_str())],
            &snapshot.fsync_round_latency,
        );
    }

    if shards.iter().any(|s| s.heap_allocations.is_some()) {
        text.family(
            "broker_heap_allocations_total",
            Kind::Counter,
            "Heap allocations and reallocations made on the shard's thread (only with BROKER_COUNT_ALLOCATIONS=1 in the broker's environment).",
        );
        for (snapshot, shard) in shards.iter().zip(&labels) {
            if let Some(count) = snapshot.heap_allocations {
                text.sample(
                    "broker_heap_allocations_total",
                    &[("shard", shard.as_str())],
                    count,
                );
            }
        }
    }

    log_families(&mut text, shards);
    group_families(&mut text, shards);

    text.family(
        "broker_metrics_series_dropped",
        Kind::Gauge,
        "Partition or committed-offset series left out of this scrape by the per-shard bound.",
    );
    text.sample(
        "broker_metrics_series_dropped",
        &[],
        shards.iter().map(|s| s.series_dropped).sum(),
    );
    text.finish()
}

/// Per shard and API: requests, errors, bytes in and out, latency.
fn api_families(text: &mut Exposition, shards: &[ShardSnapshot], labels: &[String]) {
    type Field = fn(&super::recorder::ApiSnapshot) -> u64;
    let counters: [(&str, &str, Field); 3] = [
        ("broker_requests_total", "Requests received, by API.", |a| {
            a.requests
        }),
        (
            "broker_request_bytes_total",
            "Bytes of request frames received (size prefix included), by API.",
            |a| a.bytes_in,
        ),
        (
            "broker_response_bytes_total",
            "Bytes of response frames produced (size prefix and fetched records included), by API.",
            |a| a.bytes_out,
        ),
    ];
    for (name, help, field) in counters {
        text.family(name, Kind::Counter, help);
        for (snapshot, shard) in shards.iter().zip(labels) {
            for (key, api) in &snapshot.apis {
                text.sample(
                    name,
                    &[("shard", shard.as_str()), ("api", api_name(*key).as_str())],
                    field(api),
                );
            }
        }
    }
    request_errors(text, shards, labels);
    let name = "broker_request_duration_seconds";
    text.family(
        name,
        Kind::Histogram,
        "From a request handed to its handler to its response encoded, by API (socket writes not included).",
    );
    for (snapshot, shard) in shards.iter().zip(labels) {
        for (key, api) in &snapshot.apis {
            text.histogram(
                name,
                &[("shard", shard.as_str()), ("api", api_name(*key).as_str())],
                &api.latency,
            );
        }
    }
}

/// The `error` label of requests that closed the connection instead of being answered: not
/// a Kafka error name (nothing was sent), so that it cannot be mistaken for one.
pub const CONNECTION_CLOSED: &str = "connection_closed";

/// Per shard, API and error: Kafka's `ErrorsPerSec{request, error}` (every error code of the
/// answered responses, NONE left out), plus the requests that closed the connection.
fn request_errors(text: &mut Exposition, shards: &[ShardSnapshot], labels: &[String]) {
    let name = "broker_request_errors_total";
    text.family(
        name,
        Kind::Counter,
        "Errors by API: error codes in answered responses (error=Kafka's error name, one per top-level, topic or partition code; NONE not counted), and requests that closed the connection instead of being answered (error=\"connection_closed\": undecodable, unsupported version, unencodable response).",
    );
    for (snapshot, shard) in shards.iter().zip(labels) {
        for (key, api) in &snapshot.apis {
            let api_label = api_name(*key);
            text.sample(
                name,
                &[
                    ("shard", shard.as_str()),
                    ("api", api_label.as_str()),
                    ("error", CONNECTION_CLOSED),
                ],
                api.errors,
            );
            for &(code, count) in &api.error_codes {
                let error = error_name(code);
                text.sample(
                    name,
                    &[
                        ("shard", shard.as_str()),
                        ("api", api_label.as_str()),
                        ("error", error.as_str()),
                    ],
                    count,
                );
            }
        }
    }
}

/// Kafka's name of an error code (`MESSAGE_TOO_LARGE`, the Java `Errors` constant), or
/// UNKNOWN_SERVER_ERROR for a code this build does not know.
fn error_name(code: i16) -> String {
    ErrorCode::from_code_or_unknown(code).kafka_name()
}

/// Kafka's name of an API key (`Produce`), or the number of one we do not know.
fn api_name(key: i16) -> String {
    ApiKey::from_i16(key).map_or_else(|| key.to_string(), |key| key.name().to_string())
}

/// Per partition: log size and offsets.
fn log_families(text: &mut Exposition, shards: &[ShardSnapshot]) {
    type Field = fn(&super::snapshot::PartitionFigures) -> i64;
    let families: [(&str, &str, Field); 3] = [
        (
            "broker_log_size_bytes",
            "Bytes of a partition's log segments on disk.",
            |p| p.size_bytes as i64,
        ),
        (
            "broker_log_start_offset",
            "A partition's log start offset.",
            |p| p.log_start_offset,
        ),
        (
            "broker_log_end_offset",
            "A partition's log end offset (the high watermark on one node).",
            |p| p.log_end_offset,
        ),
    ];
    for (name, help, field) in families {
        text.family(name, Kind::Gauge, help);
        for snapshot in shards {
            let shard = snapshot.shard.to_string();
            for p in &snapshot.partitions {
                let partition = p.partition.to_string();
                text.sample_i64(
                    name,
                    &[
                        ("topic", p.topic.as_str()),
                        ("partition", partition.as_str()),
                        ("shard", shard.as_str()),
                    ],
                    field(p),
                );
            }
        }
    }
}

/// Per group, topic and partition: the committed offset and the lag behind the log end.
fn group_families(text: &mut Exposition, shards: &[ShardSnapshot]) {
    let ends: HashMap<(&str, i32), i64> = shards
        .iter()
        .flat_map(|s| &s.partitions)
        .map(|p| ((p.topic.as_str(), p.partition), p.log_end_offset))
        .collect();
    let committed = || shards.iter().flat_map(|s| &s.committed);
    text.family(
        "broker_consumer_group_committed_offset",
        Kind::Gauge,
        "A consumer group's committed offset of a partition.",
    );
    for c in committed() {
        let partition = c.partition.to_string();
        text.sample_i64(
            "broker_consumer_group_committed_offset",
            &[
                ("group", c.group.as_str()),
                ("topic", c.topic.as_str()),
                ("partition", partition.as_str()),
            ],
            c.offset,
        );
    }
    text.family(
        "broker_consumer_group_lag",
        Kind::Gauge,
        "Records between a consumer group's committed offset and the partition's log end offset (partitions of deleted topics left out).",
    );
    for c in committed() {
        let Some(&end) = ends.get(&(c.topic.as_str(), c.partition)) else {
            continue;
        };
        let partition = c.partition.to_string();
        text.sample_i64(
            "broker_consumer_group_lag",
            &[
                ("group", c.group.as_str()),
                ("topic", c.topic.as_str()),
                ("partition", partition.as_str()),
            ],
            (end - c.offset.max(0)).max(0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(10), "MESSAGE_TOO_LARGE");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(56), "KAFKA_STORAGE_ERROR");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(i16::MAX), "UNKNOWN_SERVER_ERROR");
    }
    use crate::metrics::histogram::HistogramSnapshot;
    use crate::metrics::recorder::ApiSnapshot;
    use crate::metrics::snapshot::{CommittedFigures, PartitionFigures};

    fn shard(id: usize) -> ShardSnapshot {
        ShardSnapshot {
            generation: 1,
            shard: id,
            ..Default::default()
        }
    }

    #[test]
    fn renders_apis_logs_and_group_lag_across_shards() {
        let mut zero = shard(0);
        zero.apis.push((
            0,
            ApiSnapshot {
                requests: 3,
                errors: 1,
                error_codes: vec![(-1, 4), (10, 2)],
                bytes_in: 300,
                bytes_out: 90,
                latency: HistogramSnapshot::default(),
            },
        ));
        zero.partitions.push(PartitionFigures {
            topic: "t".into(),
            partition: 1,
            size_bytes: 4096,
            log_start_offset: 2,
            log_end_offset: 10,
        });
        zero.fsyncs = ::shard::fsyncs::counts();
        zero.fsyncs[1].1 = 5;
        let mut one = shard(1);
        one.committed.push(CommittedFigures {
            group: "g".into(),
            topic: "t".into(),
            partition: 1,
            offset: 7,
        });
        one.committed.push(CommittedFigures {
            group: "g".into(),
            topic: "gone".into(),
            partition: 0,
            offset: 7,
        });
        let out = render(&Collected {
            snapshots: vec![zero, one],
            stale_shards: 0,
            shards: 2,
        });
        let has = |line: &str| out.lines().any(|l| l == line);
        assert!(has("broker_shards 2"));
        assert!(has("broker_requests_total{shard=\"0\",api=\"Produce\"} 3"));
        assert!(has(
            "broker_request_errors_total{shard=\"0\",api=\"Produce\",error=\"connection_closed\"} 1"
        ));
        assert!(has(
            "broker_request_errors_total{shard=\"0\",api=\"Produce\",error=\"MESSAGE_TOO_LARGE\"} 2"
        ));
        assert!(has(
            "broker_request_errors_total{shard=\"0\",api=\"Produce\",error=\"UNKNOWN_SERVER_ERROR\"} 4"
        ));
        assert!(has(
            "broker_request_bytes_total{shard=\"0\",api=\"Produce\"} 300"
        ));
        assert!(has(
            "broker_response_bytes_total{shard=\"0\",api=\"Produce\"} 90"
        ));
        assert!(has(
            "broker_request_duration_seconds_count{shard=\"0\",api=\"Produce\"} 0"
        ));
        assert!(has("broker_connections_open{shard=\"1\"} 0"));
        assert!(has(
            "broker_fsyncs_total{shard=\"0\",reason=\"segment_roll\"} 5"
        ));
        assert!(has(
            "broker_log_size_bytes{topic=\"t\",partition=\"1\",shard=\"0\"} 4096"
        ));
        assert!(has(
            "broker_log_end_offset{topic=\"t\",partition=\"1\",shard=\"0\"} 10"
        ));
        assert!(has(
            "broker_consumer_group_committed_offset{group=\"g\",topic=\"t\",partition=\"1\"} 7"
        ));
        assert!(has(
            "broker_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"1\"} 3"
        ));
        assert!(!out.contains("broker_consumer_group_lag{group=\"g\",topic=\"gone\""));
        // Each family's TYPE line appears once, before its samples.
        let types = out.lines().filter(|l| l.starts_with("# TYPE ")).count();
        let mut names: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        names.dedup();
        assert_eq!(names.len(), types);
    }
}
