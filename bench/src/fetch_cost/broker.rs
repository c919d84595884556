//! The broker `bench fetch-cost` measures: one it starts (restarted per path, on one data
//! directory, with that path's keys) or one given by address; and the fetch-path byte
//! counters it logs at exit.

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use super::{Certs, PathKind};
use crate::broker_process::{exit_reason, listening, spawn_broker, stop};

/// How long a started broker may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the SSL listener may lag the PLAINTEXT one at start-up.
const SSL_AFTER_PLAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the broker comes from.
pub(super) enum Source {
    Started(Launcher),
    Given {
        bootstrap: String,
        ssl_bootstrap: Option<String>,
        ssl_ca: Option<PathBuf>,
        pid: Option<u32>,
    },
}

/// Starts our broker on one data directory with one set of keys at a time.
pub(super) struct Launcher {
    pub(super) bin: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) plain_port: u16,
    pub(super) ssl_port: u16,
    pub(super) overrides: Vec<String>,
    pub(super) certs: Result<Certs, String>,
    pub(super) verbose: bool,
    pub(super) starts: u32,
}

/// A running broker of ours.
pub(super) struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Why the broker is gone, if it is.
    pub(super) fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        Some(format!(
            "the broker exited ({status}) after it started: {}",
            exit_reason(&text)
        ))
    }

    /// Stops the broker; returns its log.
    pub(super) fn stop(mut self) -> String {
        // SIGTERM first, so that the broker closes its logs cleanly for the next start.
        stop(&mut self.child);
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The byte counters of the broker's per-shard "fetch path:" lines (logged at exit:
/// `sendfile_bytes=`, `copied_bytes=`, `cold_bytes=`...), summed over the shards: which path
/// the record bytes really took. None when the broker logs no such line.
pub fn fetch_path_counters(log: &str) -> Option<Vec<(String, u64)>> {
    let mut sums: Vec<(String, u64)> = Vec::new();
    for line in log.lines().filter(|l| l.contains("fetch path:")) {
        let rest = &line[line.find("fetch path:")? + "fetch path:".len()..];
        for item in rest.split_whitespace() {
            let Some((k, v)) = item.split_once('=') else {
                continue;
            };
            let (Ok(v), true) = (v.parse::<u64>(), k.ends_with("_bytes")) else {
                continue;
            };
            match sums.iter_mut().find(|(name, _)| name == k) {
                Some((_, sum)) => *sum += v,
                None => sums.push((k.to_string(), v)),
            }
        }
    }
    (!sums.is_empty()).then_some(sums)
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Launcher {
    pub(super) fn plain_addr(&self) -> String {
        format!("127.0.0.1:{}", self.plain_port)
    }

    pub(super) fn ssl_addr(&self) -> String {
        format!("127.0.0.1:{}", self.ssl_port)
    }

    /// The keys of a broker serving `path` (None: the broker's defaults, plaintext only).
    pub(super) fn keys(
        &self,
        path: Option<PathKind>,
        with_path_keys: bool,
    ) -> Result<Vec<String>, String> {
        let mut keys = vec![format!("log.dirs={}", self.dir.join("data").display())];
        match path {
            Some(p) if p.is_tls() => {
                let certs = self.certs.as_ref().map_err(Clone::clone)?;
                let listeners = format!(
                    "PLAINTEXT://{},SSL://{}",
                    self.plain_addr(),
                    self.ssl_addr()
                );
                keys.push(format!("listeners={listeners}"));
                keys.push(format!("advertised.listeners={listeners}"));
                keys.push("ssl.keystore.type=PEM".into());
                keys.push(format!(
                    "ssl.keystore.location={}",
                    certs.keystore.display()
                ));
                keys.push("ssl.truststore.type=PEM".into());
                keys.push(format!("ssl.truststore.location={}", certs.ca.display()));
            }
            _ => keys.push(format!("listeners=PLAINTEXT://{}", self.plain_addr())),
        }
        if let (Some(p), true) = (path, with_path_keys) {
            keys.extend(p.keys().iter().map(|k| k.to_string()));
        }
        keys.extend(self.overrides.iter().cloned());
        Ok(keys)
    }

    /// Starts a broker with `keys`; Err(reason) when it exits or does not listen.
    pub(super) fn start(&mut self, keys: &[String], wait_ssl: bool) -> Result<Running, String> {
        self.starts += 1;
        let log = self.dir.join(format!("broker-{}.log", self.starts));
        let child = spawn_broker(&self.bin, keys, &log, self.verbose.then_some("fetch-cost"))?;
        let mut running = Running { child, log };
        let deadline = Instant::now() + START_TIMEOUT;
        let plain = self.plain_addr();
        let ssl = self.ssl_addr();
        let mut plain_since: Option<Instant> = None;
        loop {
            if let Ok(Some(status)) = running.child.try_wait() {
                let text = std::fs::read_to_string(&running.log).unwrap_or_default();
                return Err(format!(
                    "refused by the broker (it exited, {status}): {}",
                    exit_reason(&text)
                ));
            }
            if plain_since.is_none() && listening(&plain) {
                plain_since = Some(Instant::now());
            }
            if let Some(since) = plain_since {
                if !wait_ssl || listening(&ssl) {
                    return Ok(running);
                }
                if since.elapsed() > SSL_AFTER_PLAIN_TIMEOUT {
                    return Err(format!(
                        "the broker took the SSL keys but opened no SSL listener on {ssl} \
                         within {SSL_AFTER_PLAIN_TIMEOUT:?} of its PLAINTEXT one"
                    ));
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the broker did not listen on {plain} within {START_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
