//! The produce hot path allocates nothing per record: validating and appending a batch of
//! 1,000 records costs the same number of heap allocations as a batch of one record, for
//! every codec (the record walk decompresses into a reused buffer).
//!
//! A counting global allocator counts allocations made by this thread while `COUNTING` is
//! set, around exactly what the broker does per produced batch on the owning shard:
//! `wire::record_batch::validate_batch`, `validate_records` (every record walked) then
//! `PartitionLog::append`. zstd's own buffers come from C's malloc and are not counted.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use shard::{LogConfig, PartitionLog};
use wire::record_batch::{
    validate_batch, validate_records, BatchBuilder, Compression, RecordLimits,
};

struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator; only counts on the side.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNTING.try_with(|counting| {
            if counting.get() {
                ALLOCATIONS.with(|n| n.set(n.get() + 1));
            }
        });
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNTING.try_with(|counting| {
            if counting.get() {
                ALLOCATIONS.with(|n| n.set(n.get() + 1));
            }
        });
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const CODECS: [Compression; 5] = Compression::ALL;

const LIMITS: RecordLimits = RecordLimits {
    max_decompressed_bytes: 64 << 20,
    require_keys: true,
    timestamps: None,
};

fn batch(codec: Compression, records: usize) -> bytes::Bytes {
    let mut builder = BatchBuilder::new(codec).base_timestamp(1_700_000_000_000);
    for i in 0..records {
        let key = format!("key-{i}");
        builder = builder.push(
            Some(key.as_bytes()),
            Some(&[7u8; 100]),
            &[("h", Some(b"v"))],
            1_700_000_000_000 + i as i64,
        );
    }
    builder.build()
}

/// Allocations made by validate + append of `bytes`, measured on a warm log and a warm
/// decompression buffer.
fn allocations_per_append(
    log: &mut PartitionLog,
    scratch: &mut Vec<u8>,
    bytes: &bytes::Bytes,
) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let header = validate_batch(bytes).expect("valid batch");
    validate_records(&header, bytes, scratch, &LIMITS).expect("valid records");
    log.append(bytes, &header, 0).expect("append");
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(|n| n.get())
}

#[test]
fn the_counter_counts() {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let v = std::hint::black_box(vec![1u8; 64]);
    COUNTING.with(|c| c.set(false));
    drop(v);
    assert_eq!(ALLOCATIONS.with(|n| n.get()), 1);
}

#[test]
fn append_allocates_nothing_per_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap()
        .run(async move {
            let mut log = PartitionLog::open(path, LogConfig::default()).await.unwrap();
            let mut scratch = Vec::new();
            for codec in CODECS {
                let small = batch(codec, 1);
                let large = batch(codec, 1_000);
                // Warm up: first appends may size internal buffers once.
                for _ in 0..3 {
                    allocations_per_append(&mut log, &mut scratch, &small);
                    allocations_per_append(&mut log, &mut scratch, &large);
                }
                let one = allocations_per_append(&mut log, &mut scratch, &small);
                let thousand = allocations_per_append(&mut log, &mut scratch, &large);
                eprintln!("{codec:?}: allocations per append: 1 record {one}, 1000 records {thousand}");
                assert_eq!(
                    one, thousand,
                    "{codec:?}: allocations for a 1-record batch ({one}) and a 1,000-record batch ({thousand}) differ"
                );
                if codec == Compression::None {
                    assert!(one <= 4, "validate + append allocates {one} times per batch");
                }
            }
        });
}

/// An uncompressed batch of `records` from producer `pid` starting at `sequence`.
fn idempotent_batch(pid: i64, sequence: i32, records: usize) -> bytes::Bytes {
    let mut builder = BatchBuilder::new(Compression::None)
        .base_timestamp(1_700_000_000_000)
        .producer(pid, 0, sequence);
    for i in 0..records {
        builder = builder.push(
            Some(b"k"),
            Some(&[7u8; 100]),
            &[],
            1_700_000_000_000 + i as i64,
        );
    }
    builder.build()
}

/// The idempotent-producer check (sequence, epoch, duplicates) adds no allocation to validate +
/// append for a producer the partition has seen before: a fresh batch and a retried one (answered
/// from the producer state, not written) cost what a batch without a producer id costs.
#[test]
fn idempotent_check_allocates_nothing_for_a_known_producer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap()
        .run(async move {
            let mut log = PartitionLog::open(path, LogConfig::default())
                .await
                .unwrap();
            let mut scratch = Vec::new();
            let plain = batch(Compression::None, 10);
            // Warm up, and make producers 1..=100 known (the first batch of a producer
            // inserts it into the partition's map: that allocates, once per producer).
            for pid in 1..=100 {
                allocations_per_append(&mut log, &mut scratch, &idempotent_batch(pid, 0, 10));
            }
            for _ in 0..3 {
                allocations_per_append(&mut log, &mut scratch, &plain);
            }
            let without = allocations_per_append(&mut log, &mut scratch, &plain);
            for round in 0..20 {
                // Each producer's second batch: sequence 10.
                let fresh = idempotent_batch(round + 1, 10, 10);
                let with = allocations_per_append(&mut log, &mut scratch, &fresh);
                assert_eq!(
                    with, without,
                    "idempotent append allocated {with}, plain {without}"
                );
                let end = log.log_end_offset();
                let retried = allocations_per_append(&mut log, &mut scratch, &fresh);
                assert_eq!(retried, without, "retried batch allocated {retried}");
                assert_eq!(
                    log.log_end_offset(),
                    end,
                    "a retried batch was written again"
                );
            }
            assert_eq!(log.producers().len(), 100);
        });
}
