//! `bench latency-sweep` at tiny rates: against our broker (started by the sweep from the
//! binary `common/mod.rs` finds) and the in-process null broker, every (target, mode, rate)
//! has a row, measured rows carry finite positive figures that agree with the JSON report,
//! the null broker's e2e rows are skipped with a reason, idle CPU is reported, and the
//! figure is a PNG; then against a broker given by address (a `bench null-broker` process,
//! its pid found by port). No timing assertions.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::process::Command;

use crate::common::NullBrokerProcess;

const RATES: [&str; 2] = ["200", "500"];
const MODES: [&str; 3] = ["acks=1", "acks=all", "e2e"];

/// The points table's rows: cells of each `| target | mode | ...` line.
fn rows(text: &str) -> Vec<Vec<String>> {
    let mut in_points = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("| target | mode |") {
            in_points = true;
            continue;
        }
        if !line.starts_with('|') {
            in_points = false;
            continue;
        }
        if in_points && !line.starts_with("|---") {
            out.push(
                line.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect(),
            );
        }
    }
    out
}

fn num(cell: &str) -> f64 {
    cell.parse()
        .unwrap_or_else(|_| panic!("{cell:?} is not a number"))
}

fn sweep(args: &[&str], dir: &std::path::Path) -> (String, serde_json::Value) {
    let json = dir.join("sweep.json");
    let md = dir.join("sweep.md");
    let png = dir.join("sweep.png");
    let output = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("latency-sweep")
        .args(args)
        .args(["--rates", &RATES.join(","), "--duration", "0.5"])
        .arg("--json")
        .arg(&json)
        .arg("--markdown")
        .arg(&md)
        .arg("--plot")
        .arg(&png)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench latency-sweep failed:\n{stdout}\n{stderr}"
    );
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(
        stdout.contains(&table),
        "the table printed is the one written"
    );
    let png = std::fs::read(&png).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (table, report)
}

/// A measured row: achieved rate, latencies, CPU and requests finite and positive (broker
/// CPU may be 0 for a process: /proc counts 10 ms ticks), and the same as the JSON point.
fn check_measured(row: &[String], point: &serde_json::Value, cpu_exact: bool) {
    let achieved = num(&row[3]);
    let (p50, p99, p999) = (num(&row[4]), num(&row[5]), num(&row[6]));
    assert!(achieved > 0.0, "{row:?}");
    assert!(p50 > 0.0 && p99 >= p50 && p999 >= p99, "{row:?}");
    let (per_request, per_record) = (num(&row[7]), num(&row[8]));
    assert!(per_request.is_finite() && per_record.is_finite(), "{row:?}");
    if cpu_exact {
        assert!(per_request > 0.0 && per_record > 0.0, "{row:?}");
    } else {
        assert!(per_request >= 0.0 && per_record >= 0.0, "{row:?}");
    }
    assert!(num(&row[9]) > 0.0, "{row:?}");
    // One record per request (the rates are far below what a request round trip allows).
    assert!(num(&row[10]) >= 1.0, "{row:?}");
    let json_p99 = point["p99_ms"].as_f64().unwrap();
    assert_eq!(format!("{json_p99:.3}"), row[5], "{point}");
    assert_eq!(point["skipped"], false);
    assert!(point["records"].as_u64().unwrap() > 0);
}

#[test]
fn sweep_ours_and_null() {
    let _turn = crate::common::turn(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let bin = crate::common::broker_bin();
    let (table, report) = sweep(
        &[
            "--broker-bin",
            bin.to_str().unwrap(),
            "--broker-config",
            "num.shards=1",
            "--idle-seconds",
            "0.5",
            "--dir",
            dir.path().join("work").to_str().unwrap(),
        ],
        dir.path(),
    );
    let rows = rows(&table);
    let points = report["points"].as_array().unwrap();
    assert_eq!(rows.len(), RATES.len() * MODES.len() * 2, "{table}");
    assert_eq!(points.len(), rows.len());
    let mut i = 0;
    for rate in RATES {
        for mode in MODES {
            for target in ["ours", "null"] {
                let row = &rows[i];
                let point = &points[i];
                i += 1;
                assert_eq!(
                    (row[0].as_str(), row[1].as_str(), row[2].as_str()),
                    (target, mode, rate),
                    "{table}"
                );
                if target == "null" && mode == "e2e" {
                    assert!(row[3].contains("stores nothing"), "{row:?}");
                    assert_eq!(point["skipped"], true);
                    continue;
                }
                check_measured(row, point, target == "null");
            }
        }
    }
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets[0]["name"], "ours");
    assert!(targets[0]["pid"].as_u64().unwrap() > 0);
    assert_eq!(targets[0]["config"][0], "num.shards=1");
    assert!(
        targets[1]["pid"].is_null(),
        "the null broker runs in-process"
    );
    let idle = report["idle"].as_array().unwrap();
    assert_eq!(
        idle.len(),
        1,
        "idle CPU of our broker only (the null one has no process)"
    );
    let percent = idle[0]["percent_of_core"].as_f64().unwrap();
    assert!(percent.is_finite() && percent >= 0.0);
    assert!(table.contains("| ours | "), "{table}");
}

#[test]
fn sweep_other_by_address() {
    let _turn = crate::common::turn(module_path!());
    let null = NullBrokerProcess::start();
    let dir = tempfile::tempdir().unwrap();
    let other = format!("spawned={}", null.addr);
    let (table, report) = sweep(
        &[
            "--no-ours",
            "--no-null",
            "--other",
            &other,
            "--modes",
            "acks1",
            "--idle-seconds",
            "0.5",
        ],
        dir.path(),
    );
    let rows = rows(&table);
    assert_eq!(rows.len(), RATES.len(), "{table}");
    let points = report["points"].as_array().unwrap();
    for (row, point) in rows.iter().zip(points) {
        assert_eq!(row[0], "spawned");
        check_measured(row, point, false);
    }
    assert_eq!(
        report["targets"][0]["pid"].as_u64(),
        Some(u64::from(null.child.id())),
        "pid found by port"
    );
    assert_eq!(report["idle"][0]["target"], "spawned");
}
