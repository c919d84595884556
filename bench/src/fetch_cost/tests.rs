//! Unit tests of `bench fetch-cost`: the fetch-path counters, sizes, targets, the kTLS probe.

use super::args::parse_size;
use super::report::skipped;
use super::*;

#[test]
fn fetch_path_counters_are_summed_over_shards() {
    let log = "x INFO broker::server: shard 0 fetch path: hot_ranges=3 cold_ranges=0 cold_bytes=0 sendfile_bytes=1048576 copied_bytes=0 remote_range_bytes=5\n\
               x INFO broker::server: shard 1 stats: requests=266 fetches=0\n\
               x INFO broker::server: shard 1 fetch path: hot_ranges=1 cold_ranges=0 cold_bytes=0 sendfile_bytes=1048576 copied_bytes=7 remote_range_bytes=0\n";
    let sums = fetch_path_counters(log).unwrap();
    let get = |k: &str| sums.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    assert_eq!(get("sendfile_bytes"), Some(2 << 20));
    assert_eq!(get("copied_bytes"), Some(7));
    assert_eq!(get("hot_ranges"), None);
    assert_eq!(fetch_path_counters("no such lines"), None);
}

#[test]
fn sizes() {
    assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
    assert_eq!(parse_size("256MiB").unwrap(), 256 << 20);
    assert_eq!(parse_size("512m").unwrap(), 512 << 20);
    assert_eq!(parse_size("1000").unwrap(), 1000);
    assert_eq!(parse_size("1.5k").unwrap(), 1536);
    assert!(parse_size("3 parsecs").is_err());
}

fn row(path: PathKind, cpu: Option<f64>, mib: Option<f64>) -> PathResult {
    let mut r = skipped(path, "test".into());
    r.skipped = cpu.is_none();
    r.broker_cpu_s_per_gib = cpu;
    r.mib_per_sec = mib;
    r
}

#[test]
fn targets_read_the_figures() {
    let l = RunLimits {
        sendfile_cpu_s_per_gib: 0.5,
        tcp_loopback_mib_s: 1000.0,
        ring_aes128gcm_cpu_s_per_gib: 0.2,
        ..Default::default()
    };
    let rows = vec![
        row(PathKind::Zerocopy, Some(0.55), Some(700.0)),
        row(PathKind::Copy, Some(0.8), Some(500.0)),
        row(PathKind::Tls, Some(0.9), Some(400.0)),
        row(PathKind::Ktls, None, None),
    ];
    let t = targets(&rows, &l, Some("no kernel TLS"));
    let met: Vec<Option<bool>> = t.iter().map(|t| t.met).collect();
    // zero-copy 0.55 <= 0.575; copy: reference; TLS 0.9 > 0.55 + 0.25; kTLS n/a;
    // 700 >= 600.
    assert_eq!(met, vec![Some(true), None, Some(false), None, Some(true)]);
    assert!(t[3].measured.contains("no kernel TLS"));
    let rows = vec![row(PathKind::Zerocopy, None, None)];
    assert!(targets(&rows, &l, None).iter().all(|t| t.met.is_none()));
}

#[test]
fn ktls_probe_answers() {
    // Either answer is fine here; it must not panic or hang.
    let _ = ktls_unavailable();
}
