//! `bench fetch-cost`'s flags: the fetch paths and the sizes.

use std::path::PathBuf;

use serde::Serialize;

use super::MIB;
use crate::cpu;

/// A fetch path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PathKind {
    /// Plaintext, sendfile/splice from the page cache (`fetch.path=zerocopy`).
    Zerocopy,
    /// Plaintext, read into a buffer then written (`fetch.path=copy`).
    Copy,
    /// TLS in user space (rustls).
    Tls,
    /// Kernel TLS (rustls handshake, kernel record encryption).
    Ktls,
}

impl PathKind {
    pub const ALL: [PathKind; 4] = [
        PathKind::Zerocopy,
        PathKind::Copy,
        PathKind::Tls,
        PathKind::Ktls,
    ];

    pub fn label(self) -> &'static str {
        match self {
            PathKind::Zerocopy => "plaintext zero-copy",
            PathKind::Copy => "plaintext copy",
            PathKind::Tls => "TLS (user space)",
            PathKind::Ktls => "kTLS",
        }
    }

    pub(super) fn is_tls(self) -> bool {
        matches!(self, PathKind::Tls | PathKind::Ktls)
    }

    /// This path's broker keys (besides listeners and the keystore).
    pub(super) fn keys(self) -> &'static [&'static str] {
        match self {
            PathKind::Zerocopy => &["fetch.path=zerocopy"],
            PathKind::Copy => &["fetch.path=copy"],
            PathKind::Tls => &["ssl.ktls.enable=false"],
            PathKind::Ktls => &["ssl.ktls.enable=true"],
        }
    }
}

pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.parse().map_err(|_| format!("bad size {text:?}"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" | "kb" => 1024.0,
        "m" | "mib" | "mb" => MIB,
        "g" | "gib" | "gb" => cpu::GIB,
        _ => return Err(format!("bad size unit in {text:?} (B, KiB, MiB, GiB)")),
    };
    Ok((num * mult) as u64)
}

/// `bench fetch-cost` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct FetchCostArgs {
    /// Record payload to produce, then fetch on each path (B, KiB, MiB, GiB).
    #[arg(long, default_value = "2GiB", value_parser = parse_size)]
    pub bytes: u64,
    /// Value bytes of each record.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Paths to measure, in order (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub paths: Vec<PathKind>,
    /// Consumes per path; the table has each figure's median.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// The broker binary to start (default: `broker` beside this `bench`, else on PATH).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// A `key=value` for every broker this command starts (repeatable): num.shards=1
    #[arg(long = "broker-override")]
    pub broker_overrides: Vec<String>,
    /// Where the started broker keeps its data, and the certificates (default: a new
    /// directory under the system's temporary one, removed at the end).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the broker's data, logs and certificates.
    #[arg(long)]
    pub keep: bool,
    /// Take a running broker instead of starting one: its PLAINTEXT bootstrap address.
    /// Only its configured path (and TLS with --ssl-bootstrap) can be measured then.
    #[arg(long)]
    pub bootstrap: Option<String>,
    /// With --bootstrap: the broker's SSL listener.
    #[arg(long, requires = "ssl_ca")]
    pub ssl_bootstrap: Option<String>,
    /// With --ssl-bootstrap: PEM file of the CA that signed the broker's certificate.
    #[arg(long)]
    pub ssl_ca: Option<PathBuf>,
    /// With --bootstrap: the broker's pid (default: the process listening on its port).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Measure a peer started for the run with scripts/kafka-peer.sh instead of our broker
    /// (as --bootstrap with its pid: its configured plaintext path only).
    #[arg(long, value_enum, conflicts_with = "bootstrap")]
    pub peer: Option<crate::peer::PeerKind>,
    /// Unmeasured consumes before a given broker's measured rounds (--bootstrap, --peer):
    /// a JVM's JIT warms up over the first GiB or so. Default: 2 with --peer, else 0.
    #[arg(long)]
    pub warmup_rounds: Option<u32>,
    /// A consumer property (repeatable): max.partition.fetch.bytes=4194304
    #[arg(long = "consumer-prop")]
    pub consumer_props: Vec<String>,
    /// Write every figure as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw CPU/GiB and throughput per path to this PNG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Also write the Markdown tables to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Print the broker start/stop steps.
    #[arg(long)]
    pub verbose: bool,
}

impl Default for FetchCostArgs {
    fn default() -> Self {
        FetchCostArgs {
            bytes: 2 << 30,
            record_size: 1024,
            partitions: 1,
            paths: Vec::new(),
            rounds: 3,
            broker_bin: None,
            broker_overrides: Vec::new(),
            dir: None,
            keep: false,
            bootstrap: None,
            ssl_bootstrap: None,
            ssl_ca: None,
            broker_pid: None,
            peer: None,
            warmup_rounds: None,
            consumer_props: Vec::new(),
            json: None,
            plot: None,
            markdown: None,
            verbose: false,
        }
    }
}
