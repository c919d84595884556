//! The start-up lines that say how this broker runs, one event each: every listener (name,
//! security protocol, bind and advertised addresses, TLS path), the shard-to-core map, the
//! I/O path (writes, flush policy, group commit, preallocation) and the fetch path (sendfile
//! or copy, the page-cache residency check). `host_checks` adds the tuning that falls short.

use std::os::fd::AsRawFd;

use crate::config::{BrokerConfig, FlushPolicy};

/// Kafka's `Long.MAX_VALUE` default of `log.flush.interval.messages`: never.
const NEVER_MESSAGES: u64 = i64::MAX as u64;

/// One line per listener, then the TLS path when no listener uses TLS.
pub fn listeners(config: &BrokerConfig, acceptor: Option<&crate::tls::Acceptor>) {
    for listener in &config.listeners {
        let path = match (acceptor, listener.protocol) {
            (Some(acceptor), protocol) if protocol.is_tls() => acceptor.path_description(),
            _ if config.fetch_copy => "plaintext (copy)".to_string(),
            _ => "plaintext (sendfile)".to_string(),
        };
        tracing::info!(
            listener = %listener.name,
            protocol = listener.protocol.name(),
            bind = %listener.addr(),
            advertised = %config.advertised_for(&listener.name).addr(),
            "listener {} uses {path}",
            listener.name
        );
    }
    if !config.listeners.iter().any(|l| l.protocol.is_tls()) {
        tracing::info!(tls = "not in use (no SSL listener)", "TLS path");
    }
}

/// `shard -> core` for every shard.
pub fn shard_cores(shards: usize, cpus: usize, core_of: impl Fn(usize, usize) -> usize) {
    let map = (0..shards)
        .map(|id| format!("{id}->{}", core_of(id, cpus)))
        .collect::<Vec<_>>()
        .join(",");
    let shared = shards > cpus;
    tracing::info!(
        shards,
        cpus,
        map = %map,
        shared_cores = shared,
        "shard-to-core map (shard->cpu)"
    );
}

/// How produced bytes reach the disk.
pub fn io_path(config: &BrokerConfig) {
    let (policy, flush) = match config.log_flush_policy {
        FlushPolicy::Ack => (
            "ack",
            "fdatasync before answering acks=all (group commit: one round syncs every log written since the last)",
        ),
        FlushPolicy::Replication => (
            "replication",
            "no fsync on the produce path (flush.messages / flush.ms and clean shutdown only)",
        ),
    };
    let flush_messages = match config.log_flush_interval_messages {
        NEVER_MESSAGES => "never".to_string(),
        n => n.to_string(),
    };
    let flush_ms = config
        .log_flush_interval_ms
        .map_or_else(|| "never".to_string(), |ms| ms.to_string());
    tracing::info!(
        writes = "page cache (one pwritev per batch, no O_DIRECT)",
        flush_policy = policy,
        flush = flush,
        group_commit_rounds_in_flight = shard::flush::MAX_ROUNDS_IN_FLIGHT,
        flush_interval_messages = %flush_messages,
        flush_interval_ms = %flush_ms,
        preallocate = %format!(
            "active segment reserves as much again as it holds, {}..{} KiB",
            shard::log::PREALLOCATE_MIN_BYTES >> 10,
            shard::log::PREALLOCATE_MAX_BYTES >> 10
        ),
        "I/O path"
    );
}

/// How fetched bytes reach the socket; `probe` is any open regular file (the residency
/// check is tried on it once).
pub fn fetch_path(config: &BrokerConfig, probe: &std::fs::File) {
    let send = if config.fetch_copy {
        "copy (read into a buffer, then write; fetch.path=copy)"
    } else {
        "zerocopy (sendfile from the page cache; kernel TLS keeps it, user-space TLS copies)"
    };
    tracing::info!(
        send = send,
        residency = crate::transport::residency_method(probe.as_raw_fd()),
        cold_reads = "io_uring read before the send, so a shard never waits for the disk",
        "fetch path"
    );
}
