//! Admin commands of the `broker` binary, one module per command family, each writing to a
//! caller-supplied `Write` so that tests can read what a command printed.

pub mod client;
pub mod cluster;
pub mod configs;
pub mod dump_log;
pub mod log_level;
pub mod offsets;
pub mod progress;
pub mod topic_filter;
pub mod topics;
