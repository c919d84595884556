//! Smoke test of the perf tools against the real broker, for both client engines.
//!
//! The broker binary: `$BROKER_BIN` if set (relative to the workspace root), else the newer of `target/release/broker` and
//! `target/debug/broker` (under `$CARGO_TARGET_DIR` or the workspace's `target/`), else the
//! test runs `cargo build -p broker` first (slow the first time). A stale binary tests old
//! broker code: set BROKER_BIN or rebuild the broker to be sure.
//!
//! Each test starts a broker on a free port with a temporary data dir and one shard, runs
//! `bench producer-perf`, `consumer-perf` and `e2e-latency` as subprocesses with tiny sizes,
//! and parses their output with the regular expressions one would use on Kafka's own tools'
//! output, then checks the figures agree (N records sent, N consumed) and with the --json
//! reports. The broker is killed when the test ends (Drop guard).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::Broker;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use regex::Regex;

/// The tests run one at a time: each starts a broker, and the machine may have 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

const NATIVE_NOT_BUILT: &str = "native engine not built yet";

// Kafka's tools' lines, as the Kafka world parses them.
const PRODUCER_WINDOW: &str = r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency\.$";
const PRODUCER_TOTAL: &str = r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th\.$";
// Our line after Kafka's.
const PRODUCER_EXTRA: &str = r"^([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th, ([\d.]+) ms 99.99th, ([\d.]+) ms max\.$";
const CONSUMER_HEADER: &str = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec";
const CONSUMER_DETAILED_HEADER: &str = "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec";
const DATE: &str = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}:\d{3}";
const E2E_AVG: &str = r"^Avg latency: (\d+\.\d{4}) ms$";
const E2E_PERCENTILES: &str = r"^Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)$";

/// A rate as Kafka's ConsumerPerformance prints it: Java's double division, so a run whose
/// fetch took 0 ms (a fast machine) prints `Infinity` (and 0/0 `NaN`).
const RATE: &str = r"\d+\.\d{4}|Infinity|NaN";

fn consumer_summary_re() -> Regex {
    Regex::new(&format!(
        r"^({DATE}), ({DATE}), (\d+\.\d{{4}}), ({RATE}), (\d+), ({RATE}), (\d+), (\d+), ({RATE}), ({RATE})$"
    ))
    .unwrap()
}

fn consumer_detailed_re() -> Regex {
    Regex::new(&format!(
        r"^({DATE}), (\d+), (\d+\.\d{{4}}), (\d+\.\d{{4}}), (\d+), (\d+\.\d{{4}}), (\d+), (-?\d+), (\d+\.\d{{4}}), (\d+\.\d{{4}})$"
    ))
    .unwrap()
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `bench ARGS` with a time limit, capturing its output.
fn bench(dir: &Path, name: &str, args: &[&str]) -> Run {
    let out_path = dir.join(format!("{name}.out"));
    let err_path = dir.join(format!("{name}.err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = Run {
        ok: status.is_some_and(|s| s.success()),
        stdout: std::fs::read_to_string(&out_path).unwrap(),
        stderr: std::fs::read_to_string(&err_path).unwrap(),
    };
    eprintln!("$ bench {}\n{}{}", args.join(" "), run.stdout, run.stderr);
    assert!(status.is_some(), "bench {name} did not finish in 120 s");
    run
}

fn f(s: &str) -> f64 {
    s.parse().unwrap()
}

fn u(s: &str) -> u64 {
    s.parse().unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn lines_matching<'a>(re: &Regex, text: &'a str) -> Vec<regex::Captures<'a>> {
    text.lines().filter_map(|l| re.captures(l)).collect()
}

fn smoke(client: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let broker = Broker::start(&["num.shards=1"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let addr = broker.addr.as_str();
    let topic = format!("smoke-{client}");
    let records = 2000u64;
    let size = 100u64;

    // 1. producer-perf, unthrottled, into a fresh 3-partition topic.
    let pjson = dir.join("producer.json");
    let run = bench(
        dir,
        "producer",
        &[
            "producer-perf",
            "--topic",
            &topic,
            "--num-records",
            "2000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            "acks=1",
            "linger.ms=1",
            "--bootstrap-server",
            addr,
            "--create-topic-partitions",
            "3",
            "--client",
            client,
            "--json",
            pjson.to_str().unwrap(),
        ],
    );
    if client == "native" && !run.ok && run.stderr.contains(NATIVE_NOT_BUILT) {
        eprintln!("SKIPPED: {NATIVE_NOT_BUILT}");
        return;
    }
    assert!(
        run.ok,
        "producer-perf failed:\n{}\nbroker log:\n{}",
        run.stderr,
        broker.log()
    );
    let total = lines_matching(&Regex::new(PRODUCER_TOTAL).unwrap(), &run.stdout);
    assert_eq!(total.len(), 1, "one final line:\n{}", run.stdout);
    let t = &total[0];
    assert_eq!(u(&t[1]), records, "records sent");
    let (rps, mbps, avg, max) = (f(&t[2]), f(&t[3]), f(&t[4]), f(&t[5]));
    assert!(rps > 0.0 && mbps > 0.0);
    assert!(
        (mbps - rps * size as f64 / 1048576.0).abs() <= 0.01,
        "MB/sec {mbps} vs records/sec {rps}"
    );
    assert!(avg <= max);
    let (p50, p95, p99, p999) = (u(&t[6]), u(&t[7]), u(&t[8]), u(&t[9]));
    assert!(
        p50 <= p95 && p95 <= p99 && p99 <= p999 && p999 as f64 <= max,
        "{}",
        &t[0]
    );
    let extra = lines_matching(&Regex::new(PRODUCER_EXTRA).unwrap(), &run.stdout);
    assert_eq!(extra.len(), 1, "our percentile line:\n{}", run.stdout);
    let e = &extra[0];
    let ours: Vec<f64> = (1..=6).map(|i| f(&e[i])).collect();
    assert!(ours.windows(2).all(|w| w[0] <= w[1]), "{}", &e[0]);
    assert_eq!(ours[0] as u64, p50, "Kafka's 50th is ours truncated");
    assert!((ours[5] - max).abs() < 0.01, "max in both lines");
    let report = json(&pjson);
    assert_eq!(report["records_sent"], records);
    assert_eq!(report["errors"], 0);
    assert_eq!(report["bytes"], records * size);
    assert_eq!(report["client"], client);
    assert!((report["latency_ms"]["max"].as_f64().unwrap() - max).abs() < 0.01);
    assert_eq!(report["latency_ms"]["count"], records);
    let series_total: u64 = report["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["records"].as_u64().unwrap())
        .sum();
    assert_eq!(series_total, records, "per-second series adds up");

    // 2. producer-perf, throttled to 2000 records/s with 200 ms progress windows.
    let tjson = dir.join("throttled.json");
    let throttled_topic = format!("{topic}-throttled");
    let run = bench(
        dir,
        "throttled",
        &[
            "producer-perf",
            "--topic",
            &throttled_topic,
            "--num-records",
            "1000",
            "--record-size",
            "100",
            "--throughput",
            "2000",
            "--producer-props",
            "acks=1",
            &format!("bootstrap.servers={addr}"),
            "--create-topic-partitions",
            "1",
            "--client",
            client,
            "--reporting-interval",
            "200",
            "--json",
            tjson.to_str().unwrap(),
        ],
    );
    assert!(run.ok, "throttled producer-perf failed:\n{}", run.stderr);
    let windows = lines_matching(&Regex::new(PRODUCER_WINDOW).unwrap(), &run.stdout);
    assert!(
        !windows.is_empty(),
        "progress lines every 200 ms:\n{}",
        run.stdout
    );
    let total = lines_matching(&Regex::new(PRODUCER_TOTAL).unwrap(), &run.stdout);
    assert_eq!(u(&total[0][1]), 1000);
    let report = json(&tjson);
    let elapsed = report["elapsed_s"].as_f64().unwrap();
    assert!(
        elapsed >= 0.49,
        "1000 records at 2000/s take at least ~0.5 s, took {elapsed}"
    );
    assert!(
        f(&total[0][2]) <= 2000.0 * 1.05,
        "rate honoured: {}",
        &total[0][0]
    );
    let windowed: u64 = windows.iter().map(|w| u(&w[1])).sum();
    assert!(windowed <= 1000);

    // 3. consumer-perf reads the 2000 records back.
    let cjson = dir.join("consumer.json");
    let run = bench(
        dir,
        "consumer",
        &[
            "consumer-perf",
            "--bootstrap-server",
            addr,
            "--topic",
            &topic,
            "--messages",
            "2000",
            "--timeout",
            "20000",
            "--client",
            client,
            "--json",
            cjson.to_str().unwrap(),
        ],
    );
    assert!(run.ok, "consumer-perf failed:\n{}", run.stderr);
    let mut lines = run.stdout.lines();
    assert_eq!(lines.next(), Some(CONSUMER_HEADER));
    let summary = lines_matching(&consumer_summary_re(), &run.stdout);
    assert_eq!(summary.len(), 1, "one summary line:\n{}", run.stdout);
    let s = &summary[0];
    assert_eq!(u(&s[5]), records, "data.consumed.in.nMsg");
    assert_eq!(
        &s[3], "0.1907",
        "data.consumed.in.MB = 200000 / 2^20 at 4 decimals"
    );
    let (rebalance, fetch) = (u(&s[7]), u(&s[8]));
    let report = json(&cjson);
    assert_eq!(report["messages"], records);
    assert_eq!(report["bytes"], records * size);
    assert_eq!(report["timed_out"], false);
    assert_eq!(report["partitions"].as_array().unwrap().len(), 3);
    assert_eq!(report["rebalance_time_ms"], rebalance);
    assert_eq!(report["fetch_time_ms"], fetch);

    // 3b. --show-detailed-stats: Kafka's other header, progress lines, no summary.
    let run = bench(
        dir,
        "consumer-detailed",
        &[
            "consumer-perf",
            "--bootstrap-server",
            addr,
            "--topic",
            &topic,
            "--messages",
            "2000",
            "--timeout",
            "20000",
            "--client",
            client,
            "--show-detailed-stats",
            "--reporting-interval",
            "1",
        ],
    );
    assert!(
        run.ok,
        "consumer-perf --show-detailed-stats failed:\n{}",
        run.stderr
    );
    assert_eq!(run.stdout.lines().next(), Some(CONSUMER_DETAILED_HEADER));
    assert!(lines_matching(&consumer_summary_re(), &run.stdout).is_empty());
    let detailed = consumer_detailed_re();
    for line in run.stdout.lines().skip(1) {
        let c = detailed
            .captures(line)
            .unwrap_or_else(|| panic!("unexpected line {line:?}"));
        assert!(u(&c[5]) <= records);
    }

    // 4. e2e-latency at 500 records/s.
    let ejson = dir.join("e2e.json");
    let e2e_topic = format!("{topic}-e2e");
    let run = bench(
        dir,
        "e2e",
        &[
            "e2e-latency",
            "--bootstrap-server",
            addr,
            "--topic",
            &e2e_topic,
            "--num-records",
            "500",
            "--record-size",
            "100",
            "--throughput",
            "500",
            "--producer-props",
            "acks=1",
            "linger.ms=0",
            "--client",
            client,
            "--json",
            ejson.to_str().unwrap(),
        ],
    );
    assert!(run.ok, "e2e-latency failed:\n{}", run.stderr);
    let avg = lines_matching(&Regex::new(E2E_AVG).unwrap(), &run.stdout);
    assert_eq!(avg.len(), 1, "{}", run.stdout);
    let pct = lines_matching(&Regex::new(E2E_PERCENTILES).unwrap(), &run.stdout);
    assert_eq!(pct.len(), 1, "{}", run.stdout);
    let (p50, p99, p999) = (u(&pct[0][1]), u(&pct[0][2]), u(&pct[0][3]));
    assert!(p50 <= p99 && p99 <= p999);
    let report = json(&ejson);
    assert_eq!(report["records_sent"], 500);
    assert_eq!(report["records_received"], 500);
    assert_eq!(report["duplicates"], 0);
    assert_eq!(report["timed_out"], false);
    let avg_ms = f(&avg[0][1]);
    assert!((report["latency_ms"]["avg"].as_f64().unwrap() - avg_ms).abs() < 0.001);
    assert_eq!(report["latency_ms"]["p50"].as_f64().unwrap() as u64, p50);
}

#[test]
fn perf_tools_with_librdkafka() {
    let _turn = crate::common::turn(module_path!());
    smoke("librdkafka");
}

#[test]
fn perf_tools_with_native_client() {
    let _turn = crate::common::turn(module_path!());
    smoke("native");
}
