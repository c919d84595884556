//! Our broker as a child process of a bench command: free ports to give it, whether it
//! listens yet, its binary, why it exited, when its start-up work is done, and how it is
//! stopped. Shared by `fetch-cost` and `latency-sweep`, which start brokers of their own.

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cpu;

/// How long a broker may take to exit on SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for a freshly started broker to go idle (log recovery, start-up work)
/// before the consume window opens.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// Two free ports below Linux's default ephemeral range (32768-60999), so that polling
/// them while nothing listens cannot end in a TCP self-connect (a client whose ephemeral
/// source port is the port it dials connects to itself).
pub(crate) fn free_ports() -> Result<(u16, u16)> {
    let mut held = Vec::new();
    let offset = (std::process::id() % 12_000) as u16;
    for i in 0..4_000u16 {
        let port = 20_000 + (offset + i * 7) % 12_000;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(l);
            if held.len() == 2 {
                break;
            }
        }
    }
    while held.len() < 2 {
        held.push(TcpListener::bind("127.0.0.1:0")?);
    }
    Ok((held[0].local_addr()?.port(), held[1].local_addr()?.port()))
}

/// Whether something listens on `addr`: a connection that is not a self-connect.
pub(crate) fn listening(addr: &str) -> bool {
    TcpStream::connect(addr)
        .ok()
        .and_then(|s| Some(s.local_addr().ok()? != s.peer_addr().ok()?))
        .unwrap_or(false)
}

/// `broker` beside the running `bench` (both in target/release), else on PATH.
pub(crate) fn default_broker_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("broker")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("broker"))
}

/// The broker's reason for exiting: its last error line (or last line).
pub(crate) fn exit_reason(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| l.to_ascii_lowercase().contains("error"))
        .or(lines.last())
        .copied()
        .unwrap_or("no output");
    let mut reason: String = line.chars().filter(|c| !c.is_control()).collect();
    if reason.len() > 300 {
        let mut end = 300;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push_str("...");
    }
    reason
}

/// Waits until the broker uses (almost) no CPU for a quarter second: start-up work done.
pub(crate) fn settle(pid: u32) {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let Ok(mut last) = cpu::process_cpu_seconds(pid) else {
        return;
    };
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        let Ok(now) = cpu::process_cpu_seconds(pid) else {
            return;
        };
        if now - last <= 0.011 {
            return;
        }
        last = now;
    }
}

/// Spawns `bin start --override KEY ...` with its stdout and stderr in the file `log`; with
/// `verbose_as`, that command's name, the command line is echoed first. Err: what failed, in
/// the words the caller reports.
pub(crate) fn spawn_broker(
    bin: &Path,
    keys: &[String],
    log: &Path,
    verbose_as: Option<&str>,
) -> Result<Child, String> {
    let log_file = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("start");
    for k in keys {
        cmd.args(["--override", k]);
    }
    if let Some(who) = verbose_as {
        eprintln!(
            "{who}: {} start --override {}",
            bin.display(),
            keys.join(" --override ")
        );
    }
    cmd.stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
        .stderr(log_file)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", bin.display()))
}

/// Stops a broker we started: SIGTERM first (the shards print their counters and close
/// their logs cleanly), SIGKILL when it has not exited within [`STOP_TIMEOUT`].
pub(crate) fn stop(child: &mut Child) {
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Ok(None) = child.try_wait() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_two_and_below_the_ephemeral_range() {
        let (a, b) = free_ports().unwrap();
        assert_ne!(a, b);
        assert!((20_000..32_000).contains(&a) && (20_000..32_000).contains(&b));
        let l = TcpListener::bind(("127.0.0.1", a)).unwrap();
        assert!(listening(&format!("127.0.0.1:{a}")));
        drop(l);
        assert!(!listening(&format!("127.0.0.1:{a}")));
    }

    #[test]
    fn exit_reason_is_the_error_line() {
        let log = "INFO starting\nerror: unknown configuration key `fetch.path`\n\n";
        assert_eq!(
            exit_reason(log),
            "error: unknown configuration key `fetch.path`"
        );
        assert_eq!(exit_reason("last words\n"), "last words");
        assert_eq!(exit_reason(""), "no output");
    }
}
