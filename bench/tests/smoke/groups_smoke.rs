//! Smoke test of `bench groups` (stabilize, commits, memory) against the real broker.
//!
//! The broker binary is found as in `common/mod.rs`: `$BROKER_BIN` (relative to the workspace
//! root), else the newer of `target/release/broker` and `target/debug/broker`, else the test
//! builds it. Each test starts a broker on a free port with a temporary data dir, runs
//! `bench groups MODE` with tiny sizes as a subprocess, parses its result line and checks it
//! against the `--json` report and against what the test set up (the broker's initial
//! rebalance delay, its pid).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::process::{Command, Stdio};

use crate::common::Broker;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use regex::Regex;

/// One broker at a time: the machine may have 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

const STABILIZE: &str = r"^stabilize: (\d+) members stable at generation (\d+) in ([\d.]+) ms \(group\.initial\.rebalance\.delay\.ms=(\d+), ([\d.]+) ms without it; (\d+) JoinGroup, (\d+) SyncGroup requests\)$";
const COMMITS: &str = r"^commits: (\d+) OffsetCommit requests in ([\d.]+) s, ([\d.]+) commits/s \((\d+) offsets/s\), latency p50 ([\d.]+) ms, p99 ([\d.]+) ms, p99\.9 ([\d.]+) ms, max ([\d.]+) ms \((\d+) partitions each, (\d+) in flight, broker CPU ([\d.]+) us/commit, log\.flush\.policy=(\w+), __consumer_offsets flush\.policy=(\w+)\)$";
const MEMORY: &str = r"^memory: (\d+) groups \((members stay|members left)\), broker RSS ([\d.]+) MiB -> ([\d.]+) MiB, (-?\d+) bytes/group \((-?\d+) anonymous\) \(created in ([\d.]+) s, (\d+) groups/s\)$";

/// Few __consumer_offsets partitions: quick to create on a small machine.
const OFFSETS_PARTITIONS: &str = "offsets.topic.num.partitions=4";

impl Broker {
    /// Runs `bench groups ARGS --bootstrap-server ADDR --json FILE`: the result line's
    /// captures and the JSON report.
    fn bench(&self, name: &str, pattern: &str, args: &[&str]) -> (Vec<String>, serde_json::Value) {
        let json = self.dir.path().join(format!("{name}.json"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
            .arg("groups")
            .args(args)
            .args(["--bootstrap-server", &self.addr])
            .args(["--json", json.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("bench groups {name} did not finish in 120 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        eprintln!("$ bench groups {}\n{stdout}{stderr}", args.join(" "));
        assert!(
            out.status.success(),
            "bench groups {name} failed: {stderr}\nbroker log:\n{}",
            self.log()
        );
        let re = Regex::new(pattern).unwrap();
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "one result line expected: {stdout}");
        let caps = re
            .captures(lines[0])
            .unwrap_or_else(|| panic!("line does not match {pattern}:\n{}", lines[0]));
        let caps = caps
            .iter()
            .skip(1)
            .map(|c| c.unwrap().as_str().to_string())
            .collect();
        let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (caps, report)
    }
}

fn f(s: &str) -> f64 {
    s.parse().unwrap()
}

fn u(s: &str) -> u64 {
    s.parse().unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.051 + b.abs() * 1e-3
}

#[test]
fn stabilize_reports_generation_time_and_the_initial_delay() {
    let _turn = crate::common::turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for delay_ms in [0u64, 400] {
        let broker = Broker::start(&[
            OFFSETS_PARTITIONS,
            &format!("group.initial.rebalance.delay.ms={delay_ms}"),
        ]);
        let (c, json) = broker.bench(
            &format!("stabilize-{delay_ms}"),
            STABILIZE,
            &["stabilize", "--members", "5", "--initial-delay-aware"],
        );
        let (members, generation, wall) = (u(&c[0]), u(&c[1]), f(&c[2]));
        assert_eq!(members, 5);
        assert!(generation >= 1, "generation {generation}");
        assert_eq!(
            u(&c[3]),
            delay_ms,
            "the broker's delay as DescribeConfigs tells it"
        );
        // The group waits for the delay before its first generation.
        assert!(wall >= delay_ms as f64, "{wall} ms < {delay_ms} ms delay");
        assert!(close(f(&c[4]), wall - delay_ms as f64));
        // KIP-394: every member's first JoinGroup is answered MEMBER_ID_REQUIRED.
        assert!(u(&c[5]) >= 2 * members, "JoinGroup requests {}", c[5]);
        assert!(u(&c[6]) >= members, "SyncGroup requests {}", c[6]);
        assert_eq!(json["members"], 5);
        assert_eq!(json["generation"].as_u64(), Some(generation));
        assert!(close(wall, json["wall_ms"].as_f64().unwrap()));
        assert_eq!(json["initial_rebalance_delay_ms"].as_u64(), Some(delay_ms));
    }
}

#[test]
fn commits_reports_rate_and_latency() {
    let _turn = crate::common::turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let broker = Broker::start(&[OFFSETS_PARTITIONS]);
    let (c, json) = broker.bench(
        "commits",
        COMMITS,
        &["commits", "--seconds", "1", "--partitions", "4"],
    );
    let (commits, seconds, rate) = (u(&c[0]), f(&c[1]), f(&c[2]));
    assert!(commits > 0);
    assert!(seconds >= 1.0, "measured {seconds} s of a 1 s run");
    // The line rounds the seconds; the report has them exact.
    let exact_s = json["seconds"].as_f64().unwrap();
    assert!(close(seconds, exact_s));
    assert!(close(rate, commits as f64 / exact_s), "{rate} commits/s");
    let (p50, p99, p999, max) = (f(&c[4]), f(&c[5]), f(&c[6]), f(&c[7]));
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999 && p999 <= max);
    assert_eq!(u(&c[8]), 4);
    assert_eq!(u(&c[9]), 4, "default in flight");
    assert_eq!(c[11], "ack", "the broker's default flush policy");
    assert_eq!(c[12], "ack", "__consumer_offsets inherits it");
    assert_eq!(json["commits"].as_u64(), Some(commits));
    assert!(close(p99, json["latency_p99_ms"].as_f64().unwrap()));
    assert_eq!(json["log_flush_policy"], "ack");
}

#[test]
fn memory_reports_rss_of_the_broker_per_group() {
    let _turn = crate::common::turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let broker = Broker::start(&[OFFSETS_PARTITIONS, "group.initial.rebalance.delay.ms=0"]);
    for (name, stay) in [("memory-left", false), ("memory-stay", true)] {
        let mut args = vec!["memory", "--groups", "100", "--concurrency", "4"];
        if stay {
            args.push("--stay");
        }
        let (c, json) = broker.bench(name, MEMORY, &args);
        assert_eq!(u(&c[0]), 100);
        assert_eq!(c[1] == "members stay", stay);
        assert!(f(&c[2]) > 0.0 && f(&c[3]) > 0.0);
        // The process found by its port is the broker this test started.
        assert_eq!(json["pid"].as_u64(), Some(u64::from(broker.child.id())));
        let before = json["rss_before_bytes"].as_f64().unwrap();
        let after = json["rss_after_bytes"].as_f64().unwrap();
        let per_group = json["bytes_per_group"].as_f64().unwrap();
        assert!(close(per_group, (after - before) / 100.0));
        assert!((f(&c[4]) - per_group).abs() <= 1.0);
        let anon = json["anon_bytes_per_group"].as_f64().unwrap();
        assert!((f(&c[5]) - anon).abs() <= 1.0);
    }
}
