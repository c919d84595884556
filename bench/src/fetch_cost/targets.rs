//! The targets for `bench fetch-cost`, checked on one run's figures.

use super::{PathKind, PathResult, RunLimits, Target};
use crate::compare::fmt_num;

pub(super) fn check(name: &str, bound: String, measured: String, met: Option<bool>) -> Target {
    Target {
        name: name.to_string(),
        bound,
        measured,
        met,
    }
}

/// The targets on this run's figures.
pub fn targets(results: &[PathResult], l: &RunLimits, ktls_reason: Option<&str>) -> Vec<Target> {
    let get = |p: PathKind| results.iter().find(|r| r.path == p && !r.skipped);
    let why_not = |p: PathKind| {
        results
            .iter()
            .find(|r| r.path == p)
            .map_or("not run".to_string(), |r| {
                format!("not measured: {}", r.note)
            })
    };
    let f = |v: f64| fmt_num(Some(v));
    let mut out = Vec::new();
    let zc = get(PathKind::Zerocopy);
    let zc_label = zc.map_or(String::new(), |r| {
        if r.label == PathKind::Zerocopy.label() {
            String::new()
        } else {
            format!(" ({})", r.label)
        }
    });
    let zc_cpu = zc.and_then(|r| r.broker_cpu_s_per_gib);
    let bound = 1.15 * l.sendfile_cpu_s_per_gib;
    out.push(match zc_cpu {
        Some(c) => check(
            "plaintext zero-copy broker CPU/GiB <= 1.15x a bare sendfile loop's",
            format!(
                "<= {} s/GiB (1.15 x {})",
                f(bound),
                f(l.sendfile_cpu_s_per_gib)
            ),
            format!(
                "{} s/GiB{zc_label} = {}x the loop",
                f(c),
                f(c / l.sendfile_cpu_s_per_gib)
            ),
            Some(c <= bound),
        ),
        None => check(
            "plaintext zero-copy broker CPU/GiB <= 1.15x a bare sendfile loop's",
            format!("<= {} s/GiB", f(bound)),
            why_not(PathKind::Zerocopy),
            None,
        ),
    });
    if let Some(copy) = get(PathKind::Copy).and_then(|r| r.broker_cpu_s_per_gib) {
        out.push(check(
            "(for reference) plaintext copy broker CPU/GiB vs the sendfile loop",
            "none".into(),
            format!(
                "{} s/GiB = {}x the loop",
                f(copy),
                f(copy / l.sendfile_cpu_s_per_gib)
            ),
            None,
        ));
    }
    let tls_cpu = get(PathKind::Tls).and_then(|r| r.broker_cpu_s_per_gib);
    let tls_name = "user-space TLS broker CPU/GiB <= plaintext zero-copy + 1.25x AES-128-GCM's";
    out.push(match (tls_cpu, zc_cpu) {
        (Some(t), Some(z)) => {
            let bound = z + 1.25 * l.ring_aes128gcm_cpu_s_per_gib;
            check(
                tls_name,
                format!(
                    "<= {} s/GiB ({} + 1.25 x {} ring AES-128-GCM)",
                    f(bound),
                    f(z),
                    f(l.ring_aes128gcm_cpu_s_per_gib)
                ),
                format!(
                    "{} s/GiB: TLS adds {} s/GiB = {}x the cipher's own{}",
                    f(t),
                    f(t - z),
                    f((t - z) / l.ring_aes128gcm_cpu_s_per_gib),
                    match get(PathKind::Copy).and_then(|r| r.broker_cpu_s_per_gib) {
                        Some(c) => format!(
                            " (over plaintext copy: {} s/GiB = {}x)",
                            f(t - c),
                            f((t - c) / l.ring_aes128gcm_cpu_s_per_gib)
                        ),
                        None => String::new(),
                    }
                ),
                Some(t <= bound),
            )
        }
        (None, _) => check(tls_name, "n/a".into(), why_not(PathKind::Tls), None),
        (_, None) => check(tls_name, "n/a".into(), why_not(PathKind::Zerocopy), None),
    });
    let ktls_name = "kTLS broker CPU/GiB <= 0.85x user-space TLS";
    let ktls_cpu = get(PathKind::Ktls).and_then(|r| r.broker_cpu_s_per_gib);
    out.push(match (ktls_cpu, tls_cpu) {
        (Some(k), Some(t)) => check(
            ktls_name,
            format!("<= {} s/GiB (0.85 x {})", f(0.85 * t), f(t)),
            format!("{} s/GiB = {}x user-space TLS", f(k), f(k / t)),
            Some(k <= 0.85 * t),
        ),
        (None, _) => check(
            ktls_name,
            "n/a".into(),
            match ktls_reason {
                Some(why) => format!("not measured: unavailable: {why}"),
                None => why_not(PathKind::Ktls),
            },
            None,
        ),
        (_, None) => check(ktls_name, "n/a".into(), why_not(PathKind::Tls), None),
    });
    let tput_name = "plaintext zero-copy fetch throughput >= 60 % of loopback TCP";
    let bound = 0.6 * l.tcp_loopback_mib_s;
    out.push(match zc.and_then(|r| r.mib_per_sec) {
        Some(m) => check(
            tput_name,
            format!(">= {} MiB/s (0.6 x {})", f(bound), f(l.tcp_loopback_mib_s)),
            format!(
                "{} MiB/s{zc_label} = {} % of loopback",
                f(m),
                f(100.0 * m / l.tcp_loopback_mib_s)
            ),
            Some(m >= bound),
        ),
        None => check(
            tput_name,
            format!(">= {} MiB/s", f(bound)),
            why_not(PathKind::Zerocopy),
            None,
        ),
    });
    out
}
