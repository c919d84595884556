//! The latency histogram's percentiles agree with a brute-force sort of the same samples,
//! within hdrhistogram's precision (3 significant digits: a reported percentile is at or
//! above the exact sample, by less than 1/1000 of it).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use bench::perf::histogram::LatencyHistogram;
use rand::{Rng, SeedableRng};

/// The exact percentile by sorting: the smallest sample with at least `ceil(q * n)` samples
/// at or below it (the definition hdrhistogram implements).
fn brute_force(sorted: &[u64], percentile: f64) -> u64 {
    let n = sorted.len();
    let rank = ((percentile / 100.0) * n as f64).ceil().max(1.0) as usize;
    sorted[rank.min(n) - 1]
}

/// Log-normal latencies in microseconds (median ~2 ms, long tail into seconds), seeded.
fn sample(seed: u64, n: usize) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            // Box-Muller normal, then exp.
            let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
            let u2: f64 = rng.gen();
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            let us = (2000f64.ln() + 1.5 * z).exp();
            us.round().max(0.0) as u64
        })
        .collect()
}

const PERCENTILES: [f64; 12] = [
    0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0,
];

fn check(samples: &[u64]) {
    let mut hist = LatencyHistogram::new();
    for &us in samples {
        hist.record_us(us);
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();

    assert_eq!(hist.count(), samples.len() as u64);
    assert_eq!(hist.max_us(), *sorted.last().unwrap());
    assert_eq!(hist.min_us(), sorted[0]);
    let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / samples.len() as f64;
    assert!(
        (hist.mean_us() - mean).abs() <= mean * 1e-12,
        "mean {} vs {}",
        hist.mean_us(),
        mean
    );

    for p in PERCENTILES {
        let exact = brute_force(&sorted, p);
        let got = hist.percentile_us(p);
        let slack = exact / 1000; // < 1/1000 relative: 3 significant digits
        assert!(
            got >= exact && got <= exact + slack,
            "p{p}: histogram {got} µs, brute force {exact} µs (allowed up to {})",
            exact + slack
        );
        // The whole-millisecond figure Kafka's lines print.
        let ms = hist.percentile_ms_int(p);
        assert!(
            ms == exact / 1000 || ms == (exact + slack) / 1000,
            "p{p}: {ms} ms vs {exact} µs"
        );
    }

    let s = hist.summary();
    assert!(
        s.p50 <= s.p95
            && s.p95 <= s.p99
            && s.p99 <= s.p99_9
            && s.p99_9 <= s.p99_99
            && s.p99_99 <= s.max
    );
    assert_eq!(s.max, *sorted.last().unwrap() as f64 / 1000.0);
}

#[test]
fn percentiles_match_brute_force_100k() {
    let samples = sample(42, 100_000);
    assert!(
        samples.iter().any(|&v| v > 100_000),
        "the sample has a tail beyond 100 ms"
    );
    check(&samples);
}

#[test]
fn percentiles_match_brute_force_other_seeds_and_sizes() {
    for (seed, n) in [(1, 1), (2, 7), (3, 1000), (4, 12_345)] {
        check(&sample(seed, n));
    }
}

#[test]
fn small_values_are_exact() {
    // Below 2048 µs the histogram is exact at 3 significant digits.
    let samples: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 2048).collect();
    let mut hist = LatencyHistogram::new();
    for &v in &samples {
        hist.record_us(v);
    }
    let mut sorted = samples.clone();
    sorted.sort_unstable();
    for p in PERCENTILES {
        assert_eq!(hist.percentile_us(p), brute_force(&sorted, p), "p{p}");
    }
}

#[test]
fn merged_histograms_equal_one_histogram() {
    let a = sample(10, 30_000);
    let b = sample(11, 20_000);
    let mut ha = LatencyHistogram::new();
    let mut hb = LatencyHistogram::new();
    let mut all = LatencyHistogram::new();
    for &v in &a {
        ha.record_us(v);
        all.record_us(v);
    }
    for &v in &b {
        hb.record_us(v);
        all.record_us(v);
    }
    ha.add(&hb);
    assert_eq!(ha.summary(), all.summary());
    let mut both = a;
    both.extend(b);
    check(&both);
}

#[test]
fn empty_histogram_reports_zeros() {
    let hist = LatencyHistogram::new();
    let s = hist.summary();
    assert_eq!(
        (s.count, s.avg, s.max, s.p50, s.p99_99),
        (0, 0.0, 0.0, 0.0, 0.0)
    );
}
