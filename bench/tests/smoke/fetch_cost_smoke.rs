//! Smoke test of `bench fetch-cost` against the real broker (found as in `common/mod.rs`),
//! with a tiny size and one round: every path has a row, measured or skipped with a reason
//! (a broker without `fetch.path` or SSL listeners refuses those keys at start-up; kTLS is
//! unavailable on kernels without the TLS module), the JSON report carries the same, the
//! targets are evaluated, and the PNG is written. No timing assertions.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::process::Command;

#[test]
fn fetch_cost_small_run() {
    let _turn = crate::common::turn(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("fetch-cost.json");
    let png = dir.path().join("fetch-cost.png");
    let md = dir.path().join("fetch-cost.md");
    let output = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["fetch-cost", "--bytes", "24MiB", "--rounds", "1"])
        .arg("--broker-bin")
        .arg(crate::common::broker_bin())
        .arg("--dir")
        .arg(dir.path().join("work"))
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&png)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench fetch-cost failed:\n{stdout}\n{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let paths = report["paths"].as_array().unwrap();
    let names: Vec<&str> = paths.iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(names, ["zerocopy", "copy", "tls", "ktls"]);
    // The first row is always measured: zero-copy, or the broker's default path when the
    // broker does not know fetch.path.
    let first = &paths[0];
    assert_eq!(first["skipped"], false, "{stdout}\n{stderr}");
    assert!(first["broker_cpu_s_per_gib"].as_f64().unwrap() >= 0.0);
    assert!(first["mib_per_sec"].as_f64().unwrap() > 0.0);
    assert_eq!(first["rounds"].as_array().unwrap().len(), 1);
    for p in paths {
        let note = p["note"].as_str().unwrap();
        if p["skipped"] == true {
            assert!(!note.is_empty(), "a skipped path without a reason: {p}");
            assert!(p["broker_cpu_s_per_gib"].is_null());
        } else {
            assert!(p["mib_per_sec"].as_f64().unwrap() > 0.0, "{p}");
        }
        if p["path"] == "tls" && p["skipped"] == false {
            assert!(p["tls"].as_str().unwrap().contains("AES_128_GCM"), "{p}");
        }
    }
    if bench::fetch_cost::ktls_unavailable().is_some() {
        let ktls = &paths[3];
        assert_eq!(ktls["skipped"], true);
        assert!(ktls["note"].as_str().unwrap().starts_with("unavailable: "));
    }
    let limits = &report["limits"];
    for key in [
        "sendfile_cpu_s_per_gib",
        "tcp_loopback_mib_s",
        "ring_aes128gcm_cpu_s_per_gib",
    ] {
        assert!(limits[key].as_f64().unwrap() > 0.0, "{key}: {limits}");
    }
    let targets = report["targets"].as_array().unwrap();
    assert!(targets.len() >= 4);
    // Every target is evaluated on the figures (met or not) or says why it is not.
    for t in targets {
        assert!(t["met"].is_boolean() || !t["measured"].as_str().unwrap().is_empty());
    }
    assert!(targets[0]["met"].is_boolean(), "{}", targets[0]);
    // The printed tables are the --markdown file's.
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(stdout.contains(&text));
    for label in ["| plaintext copy |", "| TLS (user space) |", "| kTLS |"] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    assert!(text.contains("| bare sendfile loop, sender CPU"));
    assert!(text.contains(" met |") || text.contains(" not met |"));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // The broker's data went with the run.
    assert!(!dir.path().join("work").join("data").exists());
}
