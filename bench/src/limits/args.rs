//! `bench limits`' flags.

use std::path::PathBuf;

use crate::engine::ClientKind;

/// `bench limits` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitsArgs {
    /// Directory for the disk measurements (put it on the broker's log filesystem).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Tiny budgets (a second or two in all): for smoke tests, figures are rough.
    #[arg(long)]
    pub quick: bool,
    /// Client engine of the null-broker runs (native falls back to librdkafka if unavailable).
    #[arg(long, value_enum, default_value_t = ClientKind::Native)]
    pub client: ClientKind,
    /// Skip the null-broker runs.
    #[arg(long)]
    pub no_null_broker: bool,
    /// Client engine of the fixed-rate null-broker run (default: --client).
    #[arg(long, value_enum)]
    pub latency_client: Option<ClientKind>,
    /// Fixed rate of the null-broker latency run (records/s).
    #[arg(long, default_value_t = 50_000.0)]
    pub fixed_rate: f64,
}

impl Default for LimitsArgs {
    fn default() -> Self {
        LimitsArgs {
            dir: ".".into(),
            json: None,
            quick: false,
            client: ClientKind::Native,
            no_null_broker: false,
            latency_client: None,
            fixed_rate: 50_000.0,
        }
    }
}
