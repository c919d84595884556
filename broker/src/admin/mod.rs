//! Admin commands of the `broker` binary, one module per command family, each writing to a
//! caller-supplied `Write` so that tests can read what a command printed.

pub mod client;
pub mod cluster;
pub mod configs;
pub mod consume;
pub mod dump_log;
#[cfg(test)]
pub mod fake_broker;
pub mod group_time;
pub mod groups;
pub mod log_level;
pub mod offsets;
pub mod produce;
pub mod progress;
pub mod record_progress;
pub mod routing;
pub mod topic_filter;
pub mod topics;
