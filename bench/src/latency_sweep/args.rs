//! `bench latency-sweep`'s flags: modes, rates, targets and their parsing, and the producer
//! properties of a point.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use crate::engine::{self, ClientKind, Props};

/// What a point measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SweepMode {
    /// Fixed-rate produce, acks=1: latency to the acknowledgement.
    Acks1,
    /// Fixed-rate produce, acks=all: latency to the acknowledgement.
    AcksAll,
    /// Fixed-rate produce (acks=1) consumed by a consumer of the same process: latency to
    /// consumption.
    E2e,
}

impl SweepMode {
    pub fn name(self) -> &'static str {
        match self {
            SweepMode::Acks1 => "acks=1",
            SweepMode::AcksAll => "acks=all",
            SweepMode::E2e => "e2e",
        }
    }

    pub(super) fn acks(self) -> &'static str {
        match self {
            SweepMode::AcksAll => "all",
            SweepMode::Acks1 | SweepMode::E2e => "1",
        }
    }
}

/// `bench latency-sweep` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LatencySweepArgs {
    /// Offered rates, records/s, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000,200000")]
    pub rates: Vec<f64>,
    /// Seconds each point runs (records = rate x duration).
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// A point's client stops sending after this many seconds (and waits as long again at
    /// most for acknowledgements): a broker that stalls or falls far behind ends the point
    /// with fewer records, noted. Default: 3 x --duration + 5.
    #[arg(long)]
    pub point_timeout: Option<f64>,
    /// Modes, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "acks1,acks-all,e2e"
    )]
    pub modes: Vec<SweepMode>,
    /// Record value bytes (e2e embeds its 16-byte header in them).
    #[arg(long, default_value_t = 100)]
    pub record_size: usize,
    /// Partitions of each point's topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Producers (connections) per produce point, each at rate/N.
    #[arg(long, default_value_t = 1)]
    pub connections: u32,
    /// Client engine.
    #[arg(long, value_enum, default_value_t = ClientKind::Native)]
    pub client: ClientKind,
    /// Let the client batch (linger.ms=0, default batch size) instead of one record per request.
    #[arg(long)]
    pub batched: bool,
    /// Extra producer properties (Kafka names), KEY=VALUE, repeatable; win over the sweep's.
    #[arg(long = "producer-prop")]
    pub producer_props: Vec<String>,
    /// Start our broker from this binary (default: `broker` beside this `bench`, when no
    /// --broker is given).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// A key=value for every broker the sweep starts (repeatable), e.g. num.shards=1,
    /// log.flush.policy=ack, connection.handoff.enable=false.
    #[arg(long = "broker-config")]
    pub broker_config: Vec<String>,
    /// A broker of ours to start: NAME:key=value[,key=value...] (repeatable), named
    /// `ours-NAME`, with --broker-config then its own keys (later keys win). Without any,
    /// one broker `ours` with --broker-config.
    #[arg(long = "variant")]
    pub variants: Vec<String>,
    /// Our broker already running at this address (nothing is started).
    #[arg(long)]
    pub broker: Option<String>,
    /// Pid of the --broker (default: the process listening on its port).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Do not measure our broker.
    #[arg(long)]
    pub no_ours: bool,
    /// Use the null broker at this address (a `bench null-broker` process) instead of an
    /// in-process one.
    #[arg(long)]
    pub null_broker: Option<String>,
    /// Do not measure the null broker.
    #[arg(long)]
    pub no_null: bool,
    /// Another broker: NAME=ADDR (repeatable), e.g. tansu=127.0.0.1:19192.
    #[arg(long = "other")]
    pub others: Vec<String>,
    /// Start a peer for the run with scripts/kafka-peer.sh (repeatable): kafka (one KRaft
    /// node), kafka3 (three nodes, CPU of node 1); named after it in the table.
    #[arg(long = "peer", value_enum)]
    pub peers: Vec<crate::peer::PeerKind>,
    /// Seconds of idle CPU measurement per target process (0: none).
    #[arg(long, default_value_t = 3.0)]
    pub idle_seconds: f64,
    /// Working directory for the brokers started (default: a temporary one, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write the Markdown table here (it is printed too).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the figure (p99 and broker CPU per request against rate) here (PNG).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Title of the table and figure.
    #[arg(long)]
    pub title: Option<String>,
    /// Progress on stderr.
    #[arg(long)]
    pub verbose: bool,
}

impl Default for LatencySweepArgs {
    fn default() -> Self {
        LatencySweepArgs {
            rates: vec![1000.0, 10_000.0, 50_000.0, 200_000.0],
            duration: 3.0,
            point_timeout: None,
            modes: vec![SweepMode::Acks1, SweepMode::AcksAll, SweepMode::E2e],
            record_size: 100,
            partitions: 1,
            connections: 1,
            client: ClientKind::Native,
            batched: false,
            producer_props: Vec::new(),
            broker_bin: None,
            broker_config: Vec::new(),
            variants: Vec::new(),
            broker: None,
            broker_pid: None,
            no_ours: false,
            null_broker: None,
            no_null: false,
            others: Vec::new(),
            peers: Vec::new(),
            idle_seconds: 3.0,
            dir: None,
            markdown: None,
            json: None,
            plot: None,
            title: None,
            verbose: false,
        }
    }
}

/// `NAME:k=v,k=v` -> (NAME, keys).
pub fn parse_variant(text: &str) -> Result<(String, Vec<String>)> {
    let (name, keys) = text
        .split_once(':')
        .ok_or_else(|| anyhow!("--variant {text}: expected NAME:key=value[,key=value...]"))?;
    let keys: Vec<String> = keys
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    if name.is_empty() || keys.iter().any(|k| !k.contains('=')) {
        bail!("--variant {text}: expected NAME:key=value[,key=value...]");
    }
    Ok((name.to_string(), keys))
}

/// `NAME=ADDR` -> (NAME, ADDR).
pub fn parse_other(text: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((name, addr)) if !name.is_empty() && addr.contains(':') => {
            Ok((name.to_string(), addr.to_string()))
        }
        _ => bail!("--other {text}: expected NAME=HOST:PORT"),
    }
}

/// The producer properties of a point: the sweep's, then `--producer-prop`.
pub fn producer_props(args: &LatencySweepArgs, mode: SweepMode) -> Result<Props> {
    let mut props = Props::new();
    engine::set_prop(&mut props, "acks", mode.acks());
    engine::set_prop(&mut props, "linger.ms", "0");
    if !args.batched {
        match args.client {
            ClientKind::Native => engine::set_prop(&mut props, "batch.size", "1"),
            ClientKind::Librdkafka => engine::set_prop(&mut props, "batch.num.messages", "1"),
        }
    }
    for (k, v) in engine::parse_kv_props(&args.producer_props)? {
        engine::set_prop(&mut props, &k, &v);
    }
    Ok(props)
}
