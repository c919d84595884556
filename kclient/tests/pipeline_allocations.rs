//! The pieces of `kclient::conn` on the bench's pipelined produce path allocate what they
//! did before they moved here from the bench, and nothing per request besides: a response
//! costs `read_frame` one allocation (the frame's body) and `decode_response` exactly what the
//! body's own decode costs (the header and the typed error add none on success); a request
//! written with `write_all_vectored` costs one (its iovec array), whatever its piece count.
//!
//! A counting global allocator counts this thread's allocations while `COUNTING` is set.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::BufReader;

use bytes::{Bytes, BytesMut};
use kclient::conn::{decode_response, read_frame, write_all_vectored};
use wire::generated::api::{response_header_version, ApiKey};
use wire::generated::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use wire::generated::{ProduceResponse, ResponseHeader};
use wire::primitives::{Decodable, Encodable};

struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    let _ = COUNTING.try_with(|counting| {
        if counting.get() {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: forwards every call to the system allocator; only counts on the side.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Allocations `f` makes on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let out = f();
    COUNTING.with(|c| c.set(false));
    (out, ALLOCATIONS.with(Cell::get))
}

/// A Produce response frame (size prefix, header, body) for `correlation_id` at `version`.
fn produce_response_frame(version: i16, correlation_id: i32) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.extend_from_slice(&[0; 4]);
    ResponseHeader {
        correlation_id,
        ..Default::default()
    }
    .encode(
        &mut out,
        response_header_version(ApiKey::Produce as i16, version),
    )
    .unwrap();
    ProduceResponse {
        responses: vec![TopicProduceResponse {
            name: "bench".into(),
            partition_responses: (0..3)
                .map(|index| PartitionProduceResponse {
                    index,
                    base_offset: 1000,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
    .encode(&mut out, version)
    .unwrap();
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out.to_vec()
}

#[test]
fn responses_cost_one_frame_allocation_beyond_their_decode() {
    for version in [3i16, 9, 11] {
        let frames: Vec<u8> = (1..=4)
            .flat_map(|corr| produce_response_frame(version, corr))
            .collect();
        let mut reader = BufReader::with_capacity(64 * 1024, &frames[..]);
        // Warm: the BufReader fills its buffer on the first read.
        let frame = read_frame(&mut reader, 1 << 30).unwrap();
        decode_response::<ProduceResponse>(frame, ApiKey::Produce, version, 1).unwrap();
        for corr in 2..=4 {
            let (frame, read) = allocations(|| read_frame(&mut reader, 1 << 30).unwrap());
            assert_eq!(
                read, 1,
                "v{version}: read_frame allocates only the frame's body"
            );
            // What the body alone costs to decode, header skipped by hand.
            let mut body: Bytes = frame.clone();
            ResponseHeader::decode(
                &mut body,
                response_header_version(ApiKey::Produce as i16, version),
            )
            .unwrap();
            let (_, body_only) =
                allocations(|| ProduceResponse::decode(&mut body, version).unwrap());
            let (resp, decoded) = allocations(|| {
                decode_response::<ProduceResponse>(frame, ApiKey::Produce, version, corr).unwrap()
            });
            assert_eq!(resp.responses[0].partition_responses.len(), 3);
            assert_eq!(
                decoded, body_only,
                "v{version}: decode_response allocates what the body's decode does"
            );
        }
    }
}

#[test]
fn vectored_writes_cost_one_allocation() {
    let head = [1u8; 64];
    let batches: Vec<Vec<u8>> = (0..32).map(|i| vec![i as u8; 1024]).collect();
    let mut slices: Vec<&[u8]> = vec![&head[..]];
    slices.extend(batches.iter().map(Vec::as_slice));
    let mut sink = Vec::with_capacity(64 * 1024);
    let (result, n) = allocations(|| write_all_vectored(&mut sink, &slices));
    result.unwrap();
    assert_eq!(n, 1, "the iovec array only");
    assert_eq!(sink.len(), 64 + 32 * 1024);
}
