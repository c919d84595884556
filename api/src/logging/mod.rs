//! The run-time side of the broker's logs that requests reach: the process's current logger
//! levels and the tracing filter reading them ([`control`]), and Kafka's BROKER_LOGGER admin
//! resource on them ([`broker_logger`]: DescribeConfigs / IncrementalAlterConfigs). Installing
//! the subscriber is the broker binary's.

pub mod broker_logger;
pub mod control;

pub use control::{control, Control};
