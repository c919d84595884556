//! The Prometheus endpoint (`metrics.listener=http://host:port`, off by default).
//!
//! Shards record per-request figures in their own `Cell`s ([`recorder`]); a scrape, on its
//! own std thread ([`http`]), asks every shard for a snapshot of those and of what the shard
//! owns (partition logs, committed offsets, send and group-commit counters) through the
//! [`snapshot::Board`], and renders them ([`render`]) in the text format ([`exposition`]).
//! No shard ever takes a lock or allocates per request for this; with the key unset, shards
//! do not even read the clock for it and no publisher task runs.

pub mod exposition;
pub mod http;
pub mod render;
pub mod snapshot;

use std::net::TcpListener;
use std::sync::Arc;

use anyhow::Context;

pub use api::metrics::{histogram, recorder, ShardRecorder};
pub use snapshot::Board;

/// The config key.
pub const LISTENER_KEY: &str = "metrics.listener";

pub use config::parse_http_listener as parse_listener;

/// Binds the endpoint (before any shard starts, so that a port in use fails start-up with
/// the key named) and serves it from its own thread. `None` when the key is unset.
pub fn start(listener: Option<&str>, shards: usize) -> anyhow::Result<Option<Arc<Board>>> {
    let Some(address) = listener else {
        return Ok(None);
    };
    let socket = TcpListener::bind(address)
        .with_context(|| format!("{LISTENER_KEY}: cannot listen on {address}"))?;
    let local = socket.local_addr().ok();
    let board = Board::new(shards);
    http::spawn(socket, board.clone()).context("starting the metrics endpoint thread")?;
    tracing::info!(
        address = %local.map_or_else(|| address.to_string(), |a| a.to_string()),
        "metrics endpoint listening (GET /metrics, Prometheus text format)"
    );
    Ok(Some(board))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_values() {
        assert_eq!(
            parse_listener("http://127.0.0.1:9644").unwrap(),
            "127.0.0.1:9644"
        );
        assert_eq!(
            parse_listener("http://0.0.0.0:9644/").unwrap(),
            "0.0.0.0:9644"
        );
        assert_eq!(parse_listener("http://localhost:1").unwrap(), "localhost:1");
        assert_eq!(parse_listener("http://[::1]:9644").unwrap(), "[::1]:9644");
        for bad in [
            "127.0.0.1:9644",
            "https://127.0.0.1:9644",
            "http://127.0.0.1",
            "http://127.0.0.1:99999",
            "http://:9644",
            "http://::1:9644",
            "http://host:9644/metrics",
            "http://host:port",
        ] {
            assert!(parse_listener(bad).is_err(), "{bad} accepted");
        }
    }
}
