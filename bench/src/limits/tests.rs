//! Unit tests of `bench limits`: `openssl speed` parsing and each micro-measurement on a tiny
//! budget.

use super::*;

#[test]
fn openssl_speed_output_parses() {
    let text = "The 'numbers' are in 1000s of bytes per second processed.\ntype          16384 bytes\nAES-128-GCM    3573536.20k\n";
    let mib = parse_openssl_speed(text).unwrap();
    assert!((mib - 3_573_536.20 * 1000.0 / MIB).abs() < 1e-6);
    assert_eq!(parse_openssl_speed("no figures here"), None);
}

#[test]
fn micro_measurements_run() {
    let (mib, send, recv) = tcp_loopback(8 << 20, 0.2).unwrap();
    assert!(mib > 0.0 && send >= 0.0 && recv >= 0.0);
    let dir = std::env::temp_dir();
    let (recv, write) = produce_floor(&dir, 8 << 20, 0.2).unwrap();
    assert!(recv > 0.0 && write > 0.0, "{recv} {write}");
    let (p50, p99, p999, rate) = fdatasync_latency(&dir, 20, 0.2).unwrap();
    assert!(p50 > 0.0 && p99 >= p50 && p999 >= p99 && rate > 0.0);
    assert!(disk_bandwidth(&dir, 2 << 20).unwrap() > 0.0);
    let (cpu, mib) = aes_gcm_cost(4 << 20, 0.2).unwrap();
    assert!(cpu > 0.0 && mib > 0.0);
    let (cpu, mib) = ring_aes_gcm_cost(4 << 20, 0.2).unwrap();
    assert!(cpu > 0.0 && mib > 0.0);
    let (mib, cpu) = sendfile_cost(&dir, 2 << 20, 8 << 20, 0.2).unwrap();
    assert!(mib > 0.0 && cpu >= 0.0);
}
