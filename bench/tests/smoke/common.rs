//! What the bench tests share: the broker they start (found and started the same way by
//! each test file) and a `bench null-broker` process.
//!
//! The binary: `$BROKER_BIN` if set (relative to the workspace root), else the newer of
//! `target/release/broker` and `target/debug/broker` (under `$CARGO_TARGET_DIR` or the
//! workspace's `target/`), else `cargo build -p broker` first. A stale binary tests old broker
//! code: set BROKER_BIN or rebuild the broker to be sure.

// Each test module uses a part of this one.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn broker_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("BROKER_BIN") {
        // Tests run in bench/: a relative path is taken from the workspace root.
        let bin = PathBuf::from(bin);
        return if bin.is_relative() {
            workspace_root().join(bin)
        } else {
            bin
        };
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let newest = ["release", "debug"]
        .iter()
        .map(|profile| target.join(profile).join("broker"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max();
    if let Some((_, path)) = newest {
        return path;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-p", "broker"])
        .current_dir(workspace_root())
        .status()
        .expect("running cargo build -p broker");
    assert!(status.success(), "cargo build -p broker failed");
    target.join("debug").join("broker")
}

/// A broker on a free port with a temporary data dir, killed when dropped.
pub struct Broker {
    pub child: Child,
    pub addr: String,
    pub dir: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Broker {
    /// Starts the broker with `--override` pairs and waits until it listens.
    pub fn start(overrides: &[&str]) -> Broker {
        let bin = broker_bin();
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.path().join("broker.log")).unwrap();
        let data = dir.path().join("data");
        let mut cmd = Command::new(&bin);
        cmd.arg("start")
            .args(["--override", &format!("listeners=PLAINTEXT://{addr}")])
            .args(["--override", &format!("log.dirs={}", data.display())]);
        for o in overrides {
            cmd.args(["--override", o]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let mut broker = Broker { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(&broker.addr).is_err() {
            if let Some(status) = broker.child.try_wait().unwrap() {
                panic!(
                    "broker {} exited with {status}:\n{}",
                    bin.display(),
                    broker.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "broker not listening on {} after 30 s:\n{}",
                broker.addr,
                broker.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("broker {} listening on {}", bin.display(), broker.addr);
        broker
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }
}

/// A `bench null-broker` process on a free port (its address read from the line it prints),
/// killed when dropped.
pub struct NullBrokerProcess {
    pub child: Child,
    pub addr: String,
}

impl NullBrokerProcess {
    pub fn start() -> NullBrokerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
            .args([
                "null-broker",
                "--listen",
                "127.0.0.1:0",
                "--record-size",
                "100",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.trim().rsplit(' ').next().unwrap().to_string();
        assert!(addr.starts_with("127.0.0.1:"), "{line}");
        NullBrokerProcess { child, addr }
    }
}

impl Drop for NullBrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Tests of one module run beside each other, never beside another module's: each module was
/// its own test binary (run one after another), and the timing ones (latency sweep, fetch
/// cost, compare) measure CPU that another module's brokers would take. Held for the test.
pub struct ModuleTurn {
    module: &'static str,
}

static TURN: std::sync::Mutex<(Option<&'static str>, usize)> = std::sync::Mutex::new((None, 0));
static TURN_CHANGED: std::sync::Condvar = std::sync::Condvar::new();

/// Waits until no other module's test runs; call as `let _turn = common::turn(module_path!());`.
pub fn turn(module: &'static str) -> ModuleTurn {
    let mut state = TURN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        match state.0 {
            Some(running) if running != module => {
                state = TURN_CHANGED.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            _ => break,
        }
    }
    state.0 = Some(module);
    state.1 += 1;
    ModuleTurn { module }
}

impl Drop for ModuleTurn {
    fn drop(&mut self) {
        let mut state = TURN.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert_eq!(state.0, Some(self.module));
        state.1 -= 1;
        if state.1 == 0 {
            state.0 = None;
            TURN_CHANGED.notify_all();
        }
    }
}
