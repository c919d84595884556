//! The brokers a sweep measures while it runs: ours, started as child processes on a
//! directory of the run (removed afterwards unless `--dir` names it), and the CPU source of
//! every target.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use super::TargetInfo;
use crate::broker_process::{exit_reason, free_ports, listening, spawn_broker, stop};
use crate::cpu::BrokerCpu;

/// How long our broker may take to listen after start.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Our broker, started by the sweep; stopped (SIGTERM, then SIGKILL) when dropped.
pub(super) struct Started {
    pub(super) child: Child,
    pub(super) log: PathBuf,
}

impl Started {
    pub(super) fn start(
        bin: &Path,
        dir: &Path,
        name: &str,
        keys: &[String],
        verbose: bool,
    ) -> Result<(Started, String)> {
        let (port, _) = free_ports()?;
        let addr = format!("127.0.0.1:{port}");
        let data = dir.join(format!("{name}-data"));
        let log = dir.join(format!("{name}.log"));
        let mut all = vec![
            format!("listeners=PLAINTEXT://{addr}"),
            format!("log.dirs={}", data.display()),
        ];
        all.extend(keys.iter().cloned());
        let child = spawn_broker(bin, &all, &log, verbose.then_some("latency-sweep"))
            .map_err(anyhow::Error::msg)?;
        let mut started = Started { child, log };
        let deadline = Instant::now() + START_TIMEOUT;
        while !listening(&addr) {
            if let Some(status) = started.child.try_wait()? {
                let text = std::fs::read_to_string(&started.log).unwrap_or_default();
                bail!(
                    "{name}: the broker exited ({status}): {}",
                    exit_reason(&text)
                );
            }
            if Instant::now() > deadline {
                bail!("{name}: the broker did not listen on {addr} within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok((started, addr))
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        // SIGTERM first: the shards print their counters and close their logs.
        stop(&mut self.child);
    }
}

/// A target during the run.
pub(super) struct Target {
    pub(super) info: TargetInfo,
    pub(super) cpu: BrokerCpu,
}

/// A directory removed when dropped (the brokers' data and logs of a run without --dir).
pub(super) struct TempDir {
    pub(super) path: PathBuf,
}

impl TempDir {
    pub(super) fn new() -> Result<TempDir> {
        let path = std::env::temp_dir().join(format!(
            "bench-latency-sweep-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
