//! CPU accounting for a benchmark run: the broker's CPU seconds (another process, read from
//! `/proc/<pid>/stat`, or an in-process responder such as the null broker) and the client's
//! own (`getrusage(RUSAGE_SELF)` less any in-process broker), sampled before and after.
//!
//! Definitions used in every report of this crate:
//! - **broker CPU s/GiB**: broker CPU seconds (user + system) over the run divided by the
//!   GiB of record payload moved (records x record size, 2^30 bytes a GiB).
//! - **broker CPU µs/request**: broker CPU microseconds divided by the Kafka requests the
//!   client sent (Produce requests for producer runs, Fetch requests for consumer runs) when
//!   the engine counts them, else by the records sent. With one record per request (the
//!   fixed-rate workloads at linger.ms=0) both are the same, which is what the "CPU per
//!   single-record request" target is about.
//!
//! The broker process is named by `--broker-pid` or found by its listening port:
//! `/proc/net/tcp{,6}` gives the LISTEN socket's inode and `/proc/*/fd` the process holding
//! it.

use std::fs;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

/// Bytes of a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Clock ticks a second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// utime + stime of a process in seconds, from `/proc/<pid>/stat` (all its threads, the
/// ones that have ended included).
pub fn process_cpu_seconds(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_stat_cpu_ticks(&stat)
        .map(|ticks| ticks as f64 / clock_ticks())
        .ok_or_else(|| anyhow!("unexpected format of {path}"))
}

/// utime + stime in clock ticks from the text of a `/proc/<pid>/stat` file. The command
/// name in parentheses may hold spaces and parentheses, so fields are counted from the last
/// `)`: after it come state (field 3), ..., utime (14) and stime (15).
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// This process's user + system CPU seconds, every thread included.
pub fn self_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call's duration.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The calling thread's CPU seconds (`CLOCK_THREAD_CPUTIME_ID`, nanosecond resolution).
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The pid of the process listening on `port` (TCP, any address, IPv4 or IPv6).
pub fn pid_listening_on(port: u16) -> Result<u32> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = fs::read_to_string(table) {
            inodes.extend(listen_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        bail!("no process listens on TCP port {port}");
    }
    let wanted: Vec<String> = inodes
        .iter()
        .map(|inode| format!("socket:[{inode}]"))
        .collect();
    for entry in fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = fs::read_link(fd.path()) {
                if wanted.iter().any(|w| target.as_os_str() == w.as_str()) {
                    return Ok(pid);
                }
            }
        }
    }
    bail!("found the LISTEN socket of port {port} but no process holding it (not root?)")
}

/// Inodes of the LISTEN (state 0A) sockets on `port` in the text of `/proc/net/tcp{,6}`.
pub fn listen_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let local_port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            (local_port == port && *fields.get(3)? == "0A").then(|| fields.get(9)?.parse().ok())?
        })
        .collect()
}

/// The broker pid: the one given, else the one listening on `addr`'s port (None when not
/// found, with a warning: the run then reports no broker CPU).
pub fn resolve_broker_pid(given: Option<u32>, addr: &str) -> Option<u32> {
    if given.is_some() {
        return given;
    }
    let port = addr
        .parse::<SocketAddr>()
        .ok()
        .map(|a| a.port())
        .or_else(|| addr.rsplit(':').next()?.parse().ok())?;
    match pid_listening_on(port) {
        Ok(pid) if pid == std::process::id() => None,
        Ok(pid) => Some(pid),
        Err(error) => {
            eprintln!("warning: broker CPU not measured: {error:#}");
            None
        }
    }
}

/// Where the broker's CPU seconds come from.
#[derive(Clone, Default)]
pub enum BrokerCpu {
    /// Not measured.
    #[default]
    None,
    /// Another process.
    Pid(u32),
    /// A responder running inside this process (its threads' CPU seconds so far); it is
    /// subtracted from this process's own to give the client's.
    InProcess(Arc<dyn Fn() -> f64 + Send + Sync>),
}

impl From<u32> for BrokerCpu {
    fn from(pid: u32) -> Self {
        BrokerCpu::Pid(pid)
    }
}

impl From<Option<u32>> for BrokerCpu {
    fn from(pid: Option<u32>) -> Self {
        pid.map_or(BrokerCpu::None, BrokerCpu::Pid)
    }
}

impl BrokerCpu {
    fn seconds(&self) -> Option<f64> {
        match self {
            BrokerCpu::None => None,
            BrokerCpu::Pid(pid) => process_cpu_seconds(*pid).ok(),
            BrokerCpu::InProcess(f) => Some(f()),
        }
    }
}

/// CPU used over a run.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct CpuUsage {
    /// Broker CPU seconds (user + system); None when not measured.
    pub broker_cpu_s: Option<f64>,
    /// This process's CPU seconds, less an in-process broker's.
    pub client_cpu_s: f64,
    pub wall_s: f64,
}

impl CpuUsage {
    /// Broker CPU seconds per GiB of `bytes`.
    pub fn broker_cpu_s_per_gib(&self, bytes: u64) -> Option<f64> {
        per_gib(self.broker_cpu_s?, bytes)
    }

    /// Client CPU seconds per GiB of `bytes`.
    pub fn client_cpu_s_per_gib(&self, bytes: u64) -> Option<f64> {
        per_gib(self.client_cpu_s, bytes)
    }

    /// Broker CPU microseconds per request (see the module doc for what a request is).
    pub fn broker_cpu_us_per_request(&self, requests: u64) -> Option<f64> {
        (requests > 0).then(|| self.broker_cpu_s.map(|s| s * 1e6 / requests as f64))?
    }

    /// Broker cores busy on average (CPU seconds / wall seconds).
    pub fn broker_cores(&self) -> Option<f64> {
        (self.wall_s > 0.0).then(|| self.broker_cpu_s.map(|s| s / self.wall_s))?
    }
}

fn per_gib(seconds: f64, bytes: u64) -> Option<f64> {
    (bytes > 0).then(|| seconds / (bytes as f64 / GIB))
}

/// Samples the broker's and this process's CPU at `start` and `stop`.
pub struct CpuSampler {
    broker: BrokerCpu,
    broker_start: Option<f64>,
    self_start: f64,
    wall_start: Instant,
}

impl CpuSampler {
    /// Starts sampling; `broker` is a pid, `Option<u32>` or a [`BrokerCpu`].
    pub fn start(broker: impl Into<BrokerCpu>) -> CpuSampler {
        let broker = broker.into();
        let broker_start = broker.seconds();
        CpuSampler {
            broker,
            broker_start,
            self_start: self_cpu_seconds(),
            wall_start: Instant::now(),
        }
    }

    /// CPU used since `start`.
    pub fn stop(&self) -> CpuUsage {
        let wall_s = self.wall_start.elapsed().as_secs_f64();
        let self_s = self_cpu_seconds() - self.self_start;
        let broker_cpu_s = match (self.broker_start, self.broker.seconds()) {
            (Some(start), Some(end)) => Some((end - start).max(0.0)),
            _ => None,
        };
        let client_cpu_s = match (&self.broker, broker_cpu_s) {
            (BrokerCpu::InProcess(_), Some(broker)) => (self_s - broker).max(0.0),
            _ => self_s,
        };
        CpuUsage {
            broker_cpu_s,
            client_cpu_s,
            wall_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let stat =
            "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0 1 2 3";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_process_stat_is_readable() {
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed().as_millis() < 50 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(process_cpu_seconds(std::process::id()).unwrap() >= 0.0);
        assert!(self_cpu_seconds() > 0.0);
        assert!(thread_cpu_seconds() > 0.0);
    }

    #[test]
    fn finds_listener_by_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(pid_listening_on(port).unwrap(), std::process::id());
    }

    #[test]
    fn listen_table_parsing() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:4A94 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 55555 1 0 100 0 0 10 0\n   1: 0100007F:4A94 0100007F:9999 01 00000000:00000000 00:00000000 00000000     0        0 66666 1 0 100 0 0 10 0\n";
        assert_eq!(listen_inodes(table, 19092), vec![55555]);
        assert!(listen_inodes(table, 9092).is_empty());
    }

    #[test]
    fn ratios() {
        let usage = CpuUsage {
            broker_cpu_s: Some(2.0),
            client_cpu_s: 1.0,
            wall_s: 4.0,
        };
        assert_eq!(usage.broker_cpu_s_per_gib(1 << 30), Some(2.0));
        assert_eq!(usage.broker_cpu_us_per_request(2_000_000), Some(1.0));
        assert_eq!(usage.broker_cores(), Some(0.5));
        assert_eq!(usage.broker_cpu_us_per_request(0), None);
    }
}
