//! `bench compare` between two null brokers (separate processes, found by port for the
//! CPU figures) with a tiny workload: the table has every metric row, each A/B ratio is the
//! ratio of the medians shown, throughput ratios of two identical brokers are near 1, and
//! the figure is a PNG.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::process::Command;

use crate::common::NullBrokerProcess as NullBroker;

const LABELS: &[&str] = &[
    "throughput (records/s)",
    "throughput (MiB/s)",
    "latency p50 (ms)",
    "latency p99 (ms)",
    "latency p99.9 (ms)",
    "broker CPU (s/GiB)",
    "broker CPU (µs/record)",
    "client CPU (s/GiB)",
];

/// label -> (a, b, ratio) cells of the compare table.
fn parse_table(text: &str) -> Vec<(String, String, String, String)> {
    text.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| metric") && !l.starts_with("|---"))
        .map(|l| {
            let c: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|s| s.trim().to_string())
                .collect();
            assert_eq!(c.len(), 4, "{l}");
            (c[0].clone(), c[1].clone(), c[2].clone(), c[3].clone())
        })
        .collect()
}

fn run_compare(client: &str) {
    let a = NullBroker::start();
    let b = NullBroker::start();
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("smoke.toml");
    std::fs::write(
        &workload,
        format!(
            "name = \"smoke\"\nmode = \"produce\"\nrecord_size = 100\nnum_records = 20000\nclient = \"{client}\"\n\n[producer]\nacks = \"1\"\n\"linger.ms\" = \"1\"\n"
        ),
    )
    .unwrap();
    let png = dir.path().join("smoke.png");
    let json = dir.path().join("smoke.json");
    let output = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "compare", "--a", &a.addr, "--b", &b.addr, "--a-name", "nullA", "--b-name", "nullB",
            "--rounds", "2",
        ])
        .arg("--workload")
        .arg(&workload)
        .arg("--plot")
        .arg(&png)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "compare failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("| metric (produce) | nullA (median) | nullB (median) | nullA/nullB |"),
        "{stdout}"
    );
    let rows = parse_table(&stdout);
    for label in LABELS {
        let (_, a, b, ratio) = rows
            .iter()
            .find(|r| r.0 == *label)
            .unwrap_or_else(|| panic!("no row {label}:\n{stdout}"));
        let (Ok(a), Ok(b)) = (a.parse::<f64>(), b.parse::<f64>()) else {
            panic!("{label}: medians {a:?} {b:?} are not numbers\n{stdout}\n{stderr}");
        };
        if b == 0.0 {
            assert_eq!(ratio, "n/a");
            continue;
        }
        let ratio: f64 = ratio
            .parse()
            .unwrap_or_else(|_| panic!("{label}: ratio {ratio:?}"));
        let expected = a / b;
        assert!(
            (ratio - expected).abs() <= 0.006 + 0.01 * expected,
            "{label}: {ratio} vs {a}/{b}"
        );
        if label.starts_with("throughput") {
            // Two identical brokers on a shared machine: near 1.
            assert!((0.25..4.0).contains(&ratio), "{label}: {ratio}");
        }
    }
    let png_bytes = std::fs::read(&png).unwrap();
    assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png_bytes[12..16], b"IHDR");
    assert_eq!(
        u32::from_be_bytes(png_bytes[16..20].try_into().unwrap()),
        1400
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let result = &report["results"][0];
    assert_eq!(
        result["summary"]["rows"].as_array().unwrap().len(),
        LABELS.len()
    );
    assert_eq!(result["a_runs"].as_array().unwrap().len(), 2);
    assert_eq!(result["b_runs"][0]["records"].as_u64().unwrap(), 20000);
}

#[test]
fn compare_two_null_brokers_librdkafka() {
    let _turn = crate::common::turn(module_path!());
    run_compare("librdkafka");
}

#[test]
fn compare_two_null_brokers_native() {
    let _turn = crate::common::turn(module_path!());
    run_compare("native");
}
