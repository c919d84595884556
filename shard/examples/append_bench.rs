//! Append throughput of one `PartitionLog` (one shard, one partition, page cache only: no
//! fdatasync) against the raw buffered write rate of the same bytes measured in the same run:
//!
//! - `raw 1MiB`: 1 MiB `pwrite`s to a fresh file (the machine's buffered write rate);
//! - `raw batch`: the log's own write pattern without the log: one `pwritev` of a 16-byte
//!   prefix plus the rest of the batch, at increasing positions;
//! - `log`: `PartitionLog::append` of the same batch (offset assignment, prefix patching,
//!   index maintenance, segment rolls at `segment.bytes`).
//!
//! Each case runs `--rounds` times alternately on fresh files; the best round is reported
//! (page-cache write-back makes the rest noisy).
//!
//! `recover`: appends `[MiB]` without any sync, drops the log without closing it (kill -9: the
//! page cache keeps everything, the recovery point is at the start), and times the next open,
//! which re-validates every batch (CRC-32C) and rebuilds the indexes.
//!
//! `cargo run --release -p shard --example append_bench -- [dir] [MiB per round] [rounds]`
//! `cargo run --release -p shard --example append_bench -- recover [dir] [MiB]`
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use shard::{LogConfig, PartitionLog};
use wire::record_batch::{validate_batch, BatchBuilder, Compression};

const MIB: f64 = 1024.0 * 1024.0;

fn batch(records: usize, value_len: usize) -> bytes::Bytes {
    let mut b = BatchBuilder::new(Compression::None).base_timestamp(1_700_000_000_000);
    for i in 0..records {
        b = b.push(
            Some(format!("key-{i}").as_bytes()),
            Some(&vec![7u8; value_len]),
            &[],
            1_700_000_000_000,
        );
    }
    b.build()
}

fn raw_large(dir: &Path, total: u64) -> f64 {
    let path = dir.join("raw-large");
    let f = std::fs::File::create(&path).unwrap();
    let buf = vec![1u8; 1 << 20];
    let t = Instant::now();
    let mut pos = 0u64;
    while pos < total {
        // SAFETY: `buf` outlives the call and holds the length passed; the fd is open.
        let n = unsafe {
            libc::pwrite(
                f.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                pos as libc::off_t,
            )
        };
        assert_eq!(n as usize, buf.len());
        pos += buf.len() as u64;
    }
    let s = t.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(&path).unwrap();
    total as f64 / MIB / s
}

fn raw_batches(dir: &Path, total: u64, bytes: &[u8]) -> f64 {
    let path = dir.join("raw-batches");
    let f = std::fs::File::create(&path).unwrap();
    let mut prefix = [0u8; 16];
    prefix.copy_from_slice(&bytes[..16]);
    let t = Instant::now();
    let mut pos = 0u64;
    while pos < total {
        let iov = [
            libc::iovec {
                iov_base: prefix.as_ptr() as *mut libc::c_void,
                iov_len: 16,
            },
            libc::iovec {
                iov_base: bytes[16..].as_ptr() as *mut libc::c_void,
                iov_len: bytes.len() - 16,
            },
        ];
        // SAFETY: both iovecs point into `bytes`, alive for the call; the fd is open.
        let n = unsafe { libc::pwritev(f.as_raw_fd(), iov.as_ptr(), 2, pos as libc::off_t) };
        assert_eq!(n as usize, bytes.len());
        pos += bytes.len() as u64;
        prefix[0..8].copy_from_slice(&(pos as i64).to_be_bytes());
    }
    let s = t.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(&path).unwrap();
    total as f64 / MIB / s
}

fn log_appends(dir: &Path, total: u64, bytes: &bytes::Bytes) -> f64 {
    let path: PathBuf = dir.join("t-0");
    let bytes = bytes.clone();
    let header = validate_batch(&bytes).unwrap();
    let rate = glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap()
        .run({
            let path = path.clone();
            async move {
                let config = LogConfig {
                    segment_bytes: 256 << 20,
                    ..LogConfig::default()
                };
                let mut log = PartitionLog::open(path, config).await.unwrap();
                let t = Instant::now();
                let mut written = 0u64;
                while written < total {
                    log.append(&bytes, &header, 0).unwrap();
                    written += bytes.len() as u64;
                }
                let s = t.elapsed().as_secs_f64();
                drop(log);
                total as f64 / MIB / s
            }
        });
    std::fs::remove_dir_all(&path).unwrap();
    rate
}

fn recover(dir: &Path, total: u64) {
    let path: PathBuf = dir.join("r-0");
    let b = batch(16, 1000);
    let header = validate_batch(&b).unwrap();
    let (open_s, report, end) = glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap()
        .run({
            let path = path.clone();
            async move {
                let config = LogConfig::default();
                let mut log = PartitionLog::open(path.clone(), config.clone())
                    .await
                    .unwrap();
                let mut written = 0u64;
                while written < total {
                    log.append(&b, &header, 0).unwrap();
                    written += b.len() as u64;
                }
                let end = log.log_end_offset();
                drop(log); // no close: an unclean stop
                let t = Instant::now();
                let log = PartitionLog::open(path, config).await.unwrap();
                let s = t.elapsed().as_secs_f64();
                assert_eq!(log.log_end_offset(), end);
                (s, log.recovery_report(), end)
            }
        });
    std::fs::remove_dir_all(&path).unwrap();
    println!(
        "recovery after an unclean stop: {} MiB, {} segments, {end} records re-validated in {open_s:.2} s ({:.0} MiB/s)",
        report.bytes_scanned >> 20,
        report.segments_recovered,
        report.bytes_scanned as f64 / MIB / open_s
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("recover") {
        let dir = PathBuf::from(args.get(2).cloned().unwrap_or_else(|| ".".into()));
        let mib: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2048);
        std::fs::create_dir_all(&dir).unwrap();
        recover(&dir, mib << 20);
        return;
    }
    let dir = PathBuf::from(args.get(1).cloned().unwrap_or_else(|| ".".into()));
    let mib: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(512);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let total = mib << 20;
    std::fs::create_dir_all(&dir).unwrap();
    for (records, value_len) in [(10, 100), (16, 1000)] {
        let b = batch(records, value_len);
        let (mut large, mut raw, mut log) = (0f64, 0f64, 0f64);
        for _ in 0..rounds {
            large = large.max(raw_large(&dir, total));
            raw = raw.max(raw_batches(&dir, total, &b));
            log = log.max(log_appends(&dir, total, &b));
        }
        println!(
            "batch {} B ({records} x {value_len} B): raw 1MiB {large:.0} MiB/s, raw batch pwritev {raw:.0} MiB/s, log append {log:.0} MiB/s = {:.0}% of raw batch, {:.0}% of raw 1MiB ({:.0} batches/s)",
            b.len(),
            100.0 * log / raw,
            100.0 * log / large,
            log * MIB / b.len() as f64
        );
    }
}
