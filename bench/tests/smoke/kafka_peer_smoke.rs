//! Apache Kafka as a peer: `bench compare --b-peer kafka` starts a KRaft Kafka with
//! `scripts/kafka-peer.sh`, measures it beside a null broker, and stops it (no JVM left, the
//! temporary directory removed). Skipped (with a line on stderr) where `java` or `mvn` is
//! missing or Kafka's jars are not in the local Maven cache and cannot be fetched: the
//! script's class path step fails then, and the test says so instead of failing.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::process::Command;

use crate::common::NullBrokerProcess as NullBroker;

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn compare_against_kafka_peer() {
    let _turn = crate::common::turn(module_path!());
    if !have("java") || !have("mvn") || !have("python3") || !have("ss") {
        eprintln!("skipped: needs java, mvn, python3 and ss for scripts/kafka-peer.sh");
        return;
    }
    let a = NullBroker::start();
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("smoke.toml");
    std::fs::write(
        &workload,
        "name = \"smoke\"\nmode = \"produce\"\nrecord_size = 100\nnum_records = 20000\n\n[producer]\nacks = \"all\"\n\"linger.ms\" = \"1\"\n",
    )
    .unwrap();
    let peer_dir = dir.path().join("kafka");
    let output = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "compare", "--a", &a.addr, "--a-name", "null", "--b-peer", "kafka",
        ])
        .args(["--rounds", "1", "--workload"])
        .arg(&workload)
        .arg("--peer-dir")
        .arg(&peer_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && stderr.contains("dependency:build-classpath failed") {
        eprintln!("skipped: Kafka's jars are not available to Maven:\n{stderr}");
        return;
    }
    assert!(
        output.status.success(),
        "compare failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("| metric (produce) | null (median) | kafka (median) | null/kafka |"),
        "{stdout}"
    );
    let cpu = stdout
        .lines()
        .find(|l| l.starts_with("| broker CPU (s/GiB) |"))
        .unwrap();
    let kafka_cpu = cpu.split('|').nth(3).unwrap().trim();
    assert!(
        kafka_cpu.parse::<f64>().is_ok_and(|v| v > 0.0),
        "Kafka's CPU should be read from its JVM's /proc/<pid>/stat: {cpu}"
    );
    // Stopped: the pid file is gone and no JVM of that directory is left.
    assert!(!peer_dir.join("kafka.pid").exists(), "{stderr}");
    let log = std::fs::read_to_string(peer_dir.join("node1/kafka.log")).unwrap();
    assert!(log.contains("Kafka Server started"), "{log}");
}
