//! The `native` engine: the workspace's own Kafka client (`crate::native`), built on the
//! `wire` crate with plain threads and blocking sockets.

use super::{Consumer, Producer, Props};
use crate::native::consumer::NativeConsumer;
use crate::native::producer::NativeProducer;

/// A producer connected to `bootstrap` (which wins over any `bootstrap.servers` in props).
pub fn producer(bootstrap: &str, props: &Props) -> anyhow::Result<Box<dyn Producer>> {
    Ok(Box::new(NativeProducer::new(bootstrap, props)?))
}

/// A consumer connected to `bootstrap`; call `assign_all` before polling.
pub fn consumer(bootstrap: &str, props: &Props) -> anyhow::Result<Box<dyn Consumer>> {
    Ok(Box::new(NativeConsumer::new(bootstrap, props)?))
}
