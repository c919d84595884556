//! What a connection needs below the Kafka APIs: TLS with rustls and the kernel's kTLS
//! (`tls`), transports that write responses and send file ranges from the page cache
//! (`transport`), the bounds on connections, queued requests and response bytes (`limits`),
//! moving a connection to the shard its requests touch (`handoff`), and the busy-poll
//! heuristic (`busy_poll`), and the links between controllers that carry the metadata
//! quorum's messages (`peer`). No Kafka API is decoded here: the broker's connection loop calls
//! its handlers and hands their encoded responses to these pieces.

pub mod busy_poll;
pub mod handoff;
pub mod limits;
pub mod peer;
pub mod tls;
pub mod transport;

/// What a request's task produces: `Ok(Some(frame))` to write (bytes, and for a fetch file
/// ranges: see `transport`), `Ok(None)` for a request that gets no response (acks=0 produce),
/// `Err(reason)` when the connection must be closed (a response that cannot be encoded:
/// writing nothing would silently desynchronise the client's correlation ids, as if it were
/// acks=0).
pub type Response = Result<Option<transport::Frame>, String>;
