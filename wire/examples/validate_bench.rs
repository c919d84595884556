//! What walking every record costs on produce: `validate_batch` (header + CRC, what produce
//! did before `validate_records`) against `validate_batch` + `validate_records`, for 100 B
//! and 1 KiB records, per codec, in batches of about 128 KiB of records (the bench's
//! `batch.size=131072`). The two are timed alternately in rounds, medians reported. Time is
//! this thread's CPU time, so other load on the machine does not count (cache and frequency
//! effects still do).
//!
//! ```text
//! cargo run --release -p wire --example validate_bench [rounds]
//! ```
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::hint::black_box;
use std::time::Duration;

use wire::record_batch::{
    validate_batch, validate_records, BatchBuilder, Compression, RecordLimits,
};

const BATCH_RECORD_BYTES: usize = 128 << 10;
const MEASURE_FOR: Duration = Duration::from_millis(150);
const LIMITS: RecordLimits = RecordLimits {
    max_decompressed_bytes: 64 << 20,
    require_keys: false,
    timestamps: None,
};

fn batch(codec: Compression, record_size: usize) -> (bytes::Bytes, usize) {
    let count = (BATCH_RECORD_BYTES / record_size).max(1);
    let mut builder = BatchBuilder::new(codec);
    for i in 0..count {
        // Letters with some structure, like producer-perf's payloads: compressible 2-4x.
        let value: Vec<u8> = (0..record_size)
            .map(|j| b'a' + ((i * 7 + j * j / 5) % 26) as u8)
            .collect();
        builder = builder.push(None, Some(&value), &[], 1_700_000_000_000 + i as i64);
    }
    (builder.build(), count)
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU seconds per batch of `f`, run for about `MEASURE_FOR` of CPU time.
fn time_per_batch(mut f: impl FnMut()) -> f64 {
    let start = thread_cpu();
    let mut n = 0u64;
    while thread_cpu() - start < MEASURE_FOR {
        for _ in 0..16 {
            f();
        }
        n += 16;
    }
    (thread_cpu() - start).as_secs_f64() / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    println!(
        "{:<7} {:>6} {:>8} | {:>12} {:>12} | {:>12} {:>12} | {:>6}",
        "codec",
        "record",
        "records",
        "before ns/r",
        "after ns/r",
        "before GiB/s",
        "after GiB/s",
        "after/before"
    );
    let mut scratch = Vec::new();
    for record_size in [100usize, 1024] {
        for codec in [
            Compression::None,
            Compression::Lz4,
            Compression::Snappy,
            Compression::Zstd,
            Compression::Gzip,
        ] {
            let (bytes, count) = batch(codec, record_size);
            let record_bytes = (count * record_size) as f64;
            let (mut before, mut after) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                before.push(time_per_batch(|| {
                    black_box(validate_batch(black_box(&bytes)).unwrap());
                }));
                after.push(time_per_batch(|| {
                    let header = validate_batch(black_box(&bytes)).unwrap();
                    black_box(validate_records(&header, &bytes, &mut scratch, &LIMITS).unwrap());
                }));
            }
            let (b, a) = (median(before), median(after));
            let gib = |s: f64| record_bytes / s / f64::from(1u32 << 30);
            println!(
                "{:<7} {:>6} {:>8} | {:>12.1} {:>12.1} | {:>12.2} {:>12.2} | {:>6.2}",
                format!("{codec:?}"),
                record_size,
                count,
                b * 1e9 / count as f64,
                a * 1e9 / count as f64,
                gib(b),
                gib(a),
                a / b
            );
        }
    }
}
