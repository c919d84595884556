//! Admin commands of the `broker` binary, one module per command family, each writing to a
//! caller-supplied `Write` so that tests can read what a command printed.

pub mod acls;
pub mod cluster;
pub use kclient::{client, routing};
pub use wire::consumer_protocol;
pub mod configs;
pub mod consume;
pub mod consumer_group;
pub mod dump_log;
#[cfg(test)]
pub mod fake_broker;
pub mod group_delete;
pub mod group_time;
pub mod groups;
pub mod log_level;
pub mod offsets;
pub mod produce;
pub mod progress;
pub mod quorum;
pub mod quotas;
pub mod reset_plan;
pub mod scram;
pub mod topic_filter;
pub mod topics;
pub mod transactions;
pub mod txn_filter;

/// The flags every admin command that talks to a broker takes, spelled as Kafka's scripts
/// spell them.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// A broker to talk to, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// JSON (one object per line) instead of tables or text.
    #[arg(long)]
    pub json: bool,
}

/// [`CommonArgs`] and `--progress`, for the commands whose work can take long.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonProgressArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Show progress on stderr even when it is not a terminal.
    #[arg(long)]
    pub progress: bool,
}

impl CommonProgressArgs {
    pub fn bootstrap_server(&self) -> &str {
        &self.common.bootstrap_server
    }

    pub fn json(&self) -> bool {
        self.common.json
    }
}
