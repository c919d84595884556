//! Apache Kafka as a peer in the benchmarks: started and stopped by `scripts/kafka-peer.sh`
//! (a KRaft broker + controller from the jars of the local Maven cache), so that `compare`,
//! `latency-sweep` and `fetch-cost` can measure it beside our broker with `--peer kafka`.
//!
//! The script writes the JVM's pids to `DIR/kafka.pid` (node 1 first); the CPU figures are
//! that process's utime + stime from `/proc/<pid>/stat`, as for our broker. With `kafka3`
//! (three nodes, replication factor 3, min.insync.replicas 2) only node 1's CPU is counted:
//! the client's partitions may lead on any node, so its figures are not a broker's total.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use crate::broker_process::free_ports;

/// A peer broker this crate can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerKind {
    /// Apache Kafka 4.x, one KRaft node (broker + controller, node.id=1).
    Kafka,
    /// Apache Kafka 4.x, three KRaft nodes (each broker + controller); CPU of node 1 only.
    Kafka3,
}

impl PeerKind {
    /// The target's default name in tables.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Kafka => "kafka",
            PeerKind::Kafka3 => "kafka3",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            PeerKind::Kafka => "start",
            PeerKind::Kafka3 => "start3",
        }
    }
}

/// `scripts/kafka-peer.sh`: `$KAFKA_PEER_SCRIPT`, else the one of this source tree.
pub fn script() -> PathBuf {
    std::env::var_os("KAFKA_PEER_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("scripts")
                .join("kafka-peer.sh")
        })
}

/// A running peer; stopped (the script's `stop`: SIGTERM, wait) when dropped, and its
/// directory removed unless it was given.
pub struct Peer {
    pub kind: PeerKind,
    pub dir: PathBuf,
    pub bootstrap: String,
    /// Node 1's JVM.
    pub pid: u32,
    remove_dir: bool,
}

impl Peer {
    /// Starts the peer in `dir` (default: a new temporary directory) on a free port.
    pub fn start(kind: PeerKind, dir: Option<&Path>) -> Result<Peer> {
        let (dir, remove_dir) = match dir {
            Some(d) => (d.to_path_buf(), false),
            None => (
                std::env::temp_dir().join(format!(
                    "bench-peer-{}-{}-{}",
                    kind.name(),
                    std::process::id(),
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos())
                )),
                true,
            ),
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let (port, _) = free_ports()?;
        let script = script();
        eprintln!(
            "peer: {} {} {} {port} ...",
            script.display(),
            kind.verb(),
            dir.display()
        );
        let out = Command::new("bash")
            .arg(&script)
            .arg(kind.verb())
            .arg(&dir)
            .arg(port.to_string())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            if remove_dir {
                let _ = std::fs::remove_dir_all(&dir);
            }
            bail!(
                "{} {} failed ({}): {}",
                script.display(),
                kind.verb(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let bootstrap = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_string();
        let pids = std::fs::read_to_string(dir.join("kafka.pid")).unwrap_or_default();
        let pid = pids
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<u32>().ok());
        let peer = Peer {
            kind,
            dir,
            bootstrap,
            pid: pid.unwrap_or(0),
            remove_dir,
        };
        if pid.is_none() || peer.bootstrap.is_empty() {
            // `peer` is dropped here: the script's stop runs.
            bail!("the peer script gave no bootstrap address or pid");
        }
        Ok(peer)
    }

    /// What the peer is, for a report's setup line.
    pub fn describe(&self) -> String {
        let nodes = match self.kind {
            PeerKind::Kafka => "one KRaft node (broker + controller)",
            PeerKind::Kafka3 => "three KRaft nodes (broker + controller each; CPU of node 1)",
        };
        format!(
            "Apache Kafka (scripts/kafka-peer.sh, bench/kafka-peer/pom.xml), {nodes}, at {}, pid {}",
            self.bootstrap, self.pid
        )
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::compare::CompareArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        compare: CompareArgs,
    }

    #[test]
    fn script_is_in_the_tree() {
        let s = script();
        assert!(s.is_file(), "{}", s.display());
        let text = std::fs::read_to_string(&s).unwrap_or_default();
        for verb in [
            "start)",
            "start3)",
            "stop)",
            "kafka.tools.StorageTool",
            "kafka.Kafka",
        ] {
            assert!(text.contains(verb), "{verb}");
        }
        assert_eq!(PeerKind::Kafka.name(), "kafka");
        assert_eq!(PeerKind::Kafka3.verb(), "start3");
    }

    #[test]
    fn compare_takes_b_or_a_peer() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["bench"], args].concat());
        let w = ["--a", "127.0.0.1:1", "--workload", "w.toml"];
        let peer = parse(&[&w[..], &["--b-peer", "kafka"]].concat()).map(|c| c.compare);
        assert!(peer.is_ok_and(|c| c.b.is_none() && c.b_peer == Some(PeerKind::Kafka)));
        assert!(parse(&[&w[..], &["--b", "127.0.0.1:2"]].concat()).is_ok());
        // B is one of the two, and is required.
        assert!(parse(&w).is_err());
        assert!(parse(&[&w[..], &["--b", "127.0.0.1:2", "--b-peer", "kafka"]].concat()).is_err());
    }
}
