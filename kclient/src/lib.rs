//! Our Kafka client: the admin commands use it today, and replication fetchers are meant to.
//! Blocking and outside glommio on purpose: it runs in short-lived processes and helper
//! threads, never inside a shard. `client` is one connection; `routing` reaches a whole
//! cluster from one bootstrap address.

pub mod client;
pub mod routing;
