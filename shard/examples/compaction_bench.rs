//! Compaction throughput: fills one compacted partition log, then times one cleaner pass.
//!
//! cargo run --release -p shard --example compaction_bench -- [MiB] [keys] [value bytes] [dir]
//! (defaults: 512 MiB, 100000 keys, 200-byte values, a temporary directory under /var/tmp).
//! Prints the log size before and after and the pass's MB/s (log bytes in / elapsed).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use shard::log::cleaner::Cleaner;
use shard::{LogConfig, PartitionLog};
use wire::record_batch::{validate_batch, BatchBuilder, Compression};

const RECORDS_PER_BATCH: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (mib, keys, value_len) = (arg(1, 512), arg(2, 100_000), arg(3, 200));
    let base = args.get(4).cloned().unwrap_or_else(|| "/var/tmp".into());
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    glommio::LocalExecutorBuilder::default()
        .make()
        .expect("executor")
        .run(async move {
            let cfg = LogConfig {
                segment_bytes: 128 << 20,
                cleanup_compact: true,
                cleanup_delete: false,
                min_cleanable_dirty_ratio: 0.0,
                flush_policy: shard::FlushPolicy::Replication,
                ..LogConfig::default()
            };
            let mut log = PartitionLog::open(dir.path().join("bench-0"), cfg)
                .await
                .expect("open");
            let value = vec![0x5au8; value_len];
            let target = (mib as u64) << 20;
            let now = 1_700_000_000_000i64;
            let mut n = 0u64;
            while log.size_bytes() < target {
                let mut b = BatchBuilder::new(Compression::None);
                for _ in 0..RECORDS_PER_BATCH {
                    let key = format!("key-{}", n.wrapping_mul(2_654_435_761) % keys as u64);
                    b = b.push(Some(key.as_bytes()), Some(&value), &[], now);
                    n += 1;
                }
                let bytes = b.build();
                let h = validate_batch(&bytes).unwrap();
                log.append(&bytes, &h, 0).expect("append");
            }
            // One more batch in a fresh active segment so everything written is cleanable.
            let big = vec![0u8; 128 << 20];
            let bytes = BatchBuilder::new(Compression::None)
                .push(Some(b"roll"), Some(&big[..1 << 20]), &[], now)
                .build();
            let h = validate_batch(&bytes).unwrap();
            let _ = log.append(&bytes, &h, 0);
            log.sync().await.expect("sync");
            let before = log.size_bytes();
            let log = Rc::new(RefCell::new(log));
            let mut cleaner = Cleaner::new(128 << 20);
            let t = Instant::now();
            let stats = cleaner
                .clean_if_due(&log, now)
                .await
                .expect("clean")
                .expect("due");
            let secs = t.elapsed().as_secs_f64();
            let after = log.borrow().size_bytes();
            let mb = stats.bytes_read as f64 / 1e6;
            println!(
                "compaction: {records} records ({keys} keys, {value_len} B values), log {:.1} MB -> {:.1} MB, \
                 {} -> {} segments, pass {:.2} s: {:.0} MB/s (log bytes cleaned / elapsed; map phase read {:.1} MB)",
                before as f64 / 1e6,
                after as f64 / 1e6,
                stats.segments_before,
                stats.segments_after,
                secs,
                mb / secs,
                stats.map_bytes_read as f64 / 1e6,
                records = n,
            );
        });
}
