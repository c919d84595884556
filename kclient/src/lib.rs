//! Our Kafka client, shared by the admin commands, the bench's native client and (next) the
//! replication fetchers. Blocking and outside glommio on purpose: it runs in short-lived
//! processes and helper threads, never inside a shard.
//!
//! - `conn`: one connection (framing, headers, correlation ids, ApiVersions, pipelining,
//!   optional TLS with the `tls` feature), and the frame helpers for callers that split it;
//! - `client`: the admin commands' connection and the requests they share;
//! - `routing`: a whole cluster from one bootstrap address (leaders, coordinators);
//! - `error`: the typed errors of all three.

pub mod client;
pub mod conn;
pub mod error;
pub mod routing;
#[cfg(feature = "tls")]
pub mod tls;

pub use client::Client;
pub use conn::{Connection, Options, Versions};
pub use error::{Error, Result};
