//! `bench limits --quick`: every measurement runs with a tiny budget and the Markdown table
//! it prints parses, with a number in every row (and the JSON has the same figures).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::process::Command;

const KEYS: &[&str] = &[
    "tcp_loopback_mib_s",
    "tcp_send_cpu_s_per_gib",
    "tcp_recv_cpu_s_per_gib",
    "produce_floor_recv_cpu_s_per_gib",
    "produce_floor_pwrite_cpu_s_per_gib",
    "produce_floor_cpu_s_per_gib",
    "fdatasync_4k_p50_ms",
    "fdatasync_4k_p99_ms",
    "fdatasync_4k_p99_9_ms",
    "fdatasync_4k_per_s",
    "disk_write_mib_s",
    "aes128gcm_cpu_s_per_gib",
    "aes128gcm_mib_s",
    "sendfile_mib_s",
    "sendfile_cpu_s_per_gib",
    "null_produce_100b_records_s",
    "null_produce_100b_mib_s",
    "null_produce_100b_p50_ms",
    "null_produce_100b_p99_ms",
    "null_produce_100b_broker_cpu_us_per_record",
    "null_fixed_rate_p99_ms",
    "null_fixed_rate_records_per_request",
    "null_consume_1kb_mib_s",
];

/// `| key | measure | value | unit |` rows of the table: key -> value text.
fn parse_table(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|line| {
            line.starts_with("| ") && !line.starts_with("| key ") && !line.starts_with("|---")
        })
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 4, "row of 4 cells: {line}");
            (cells[0].to_string(), cells[2].to_string())
        })
        .collect()
}

#[test]
fn quick_limits_table_parses() {
    let _turn = crate::common::turn(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("limits.json");
    let output = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["limits", "--quick", "--fixed-rate", "20000", "--dir"])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench limits failed:\n{stdout}\n{stderr}"
    );
    let rows = parse_table(&stdout);
    for key in KEYS {
        let (_, value) = rows
            .iter()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("no row {key} in\n{stdout}"));
        // The consumer run may give up against the never-ending null broker (n/a).
        if *key == "null_consume_1kb_mib_s" && value == "n/a" {
            continue;
        }
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("{key}: {value:?} is not a number"));
        assert!(v.is_finite() && v >= 0.0, "{key} = {v}");
    }
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(value["tcp_loopback_mib_s"].as_f64().unwrap() > 0.0);
    assert!(value["fdatasync_4k_p99_ms"].as_f64().unwrap() > 0.0);
    let floor = |k: &str| value[k].as_f64().unwrap();
    assert!(floor("produce_floor_recv_cpu_s_per_gib") > 0.0);
    assert!(floor("produce_floor_pwrite_cpu_s_per_gib") > 0.0);
    let sum =
        floor("produce_floor_recv_cpu_s_per_gib") + floor("produce_floor_pwrite_cpu_s_per_gib");
    assert!((floor("produce_floor_cpu_s_per_gib") - sum).abs() < 1e-9);
    assert!(value["null"]["produce_100b_records_s"].as_f64().unwrap() > 0.0);
    // Nothing is left in the measurement directory.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("limits.json")]);
}
