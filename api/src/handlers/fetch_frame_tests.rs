//! The zero-copy response frame (header bytes with file ranges spliced in) is byte for byte
//! the frame the copying path encodes, at every served version.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use bytes::Bytes;
use wire::generated::fetch_request::{FetchPartition, FetchTopic};
use wire::generated::FetchRequest;
use wire::primitives::Uuid;

use super::{build_response, detach_files, encode_with_files, FetchResult};
use crate::handlers::{encode_response, RequestContext};
use crate::transport::{Chunk, FileRange, Records};

fn request() -> FetchRequest {
    let topic = |name: &str, id: u8, partitions: &[i32]| FetchTopic {
        topic: name.into(),
        topic_id: Uuid([id; 16]),
        partitions: partitions
            .iter()
            .map(|&partition| FetchPartition {
                partition,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    FetchRequest {
        topics: vec![topic("a", 1, &[0, 1, 2]), topic("bb", 2, &[5, 7])],
        ..Default::default()
    }
}

fn result(records: Records) -> FetchResult {
    FetchResult {
        error_code: 0,
        high_watermark: 42,
        log_start_offset: 3,
        last_stable_offset: 42,
        aborted: None,
        records,
        diverging: None,
    }
}

#[test]
fn spliced_frame_equals_copied_frame_at_every_version() {
    let mut file = tempfile::tempfile().unwrap();
    let content: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    file.write_all(&content).unwrap();
    let fd = Arc::new(OwnedFd::from(file));
    let range = |pos: u64, len: u64| Chunk::File(FileRange::new(fd.clone(), pos, len));
    // Per partition: none, one range, two ranges (two segments), an error, a large range
    // (its length needs a longer varint than an empty stand-in).
    let file_records = [
        Records::default(),
        Records::from_chunks(vec![range(10, 300)]),
        Records::from_chunks(vec![range(1000, 50), range(5000, 77)]),
        Records::default(),
        Records::from_chunks(vec![range(7, 150_000)]),
    ];
    let slice = |chunk: &Chunk| -> Vec<u8> {
        match chunk {
            Chunk::File(r) => content[r.pos() as usize..(r.pos() + r.len()) as usize].to_vec(),
            Chunk::Bytes(b) => b.to_vec(),
        }
    };
    let copied_records: Vec<Records> = file_records
        .iter()
        .map(|records| {
            let bytes: Vec<u8> = records.chunks().iter().flat_map(slice).collect();
            Bytes::from(bytes).into()
        })
        .collect();
    for version in 4..=16i16 {
        let ctx = RequestContext {
            api_key: 1,
            api_version: version,
            correlation_id: 77,
            client_id: String::new(),
            listener: "PLAINTEXT".into(),
            principal: "User:ANONYMOUS".into(),
            host: "127.0.0.1".into(),
            trusted: false,
            tally: crate::handoff::Tally::off(),
            error_counts: None,
            throttle_ms: 0,
            muted_until: Default::default(),
            request_quota: None,
        };
        let copied: Vec<FetchResult> = copied_records.iter().cloned().map(result).collect();
        let want = encode_response(
            &ctx,
            version,
            &build_response(&request(), &ctx, copied.into_iter()),
        )
        .unwrap()
        .unwrap()
        .to_vec()
        .unwrap();
        let results: Vec<FetchResult> = file_records.iter().cloned().map(result).collect();
        let (results, detached) = detach_files(results);
        let response = build_response(&request(), &ctx, results.into_iter());
        let frame = encode_with_files(&ctx, &response, detached)
            .unwrap()
            .unwrap();
        assert_eq!(frame.len(), want.len(), "version {version}");
        assert!(
            frame.to_vec().unwrap() == want,
            "version {version}: spliced frame differs"
        );
        let file_bytes: usize = frame
            .chunks()
            .iter()
            .filter(|c| matches!(c, Chunk::File(_)))
            .map(Chunk::len)
            .sum();
        assert_eq!(
            file_bytes,
            300 + 50 + 77 + 150_000,
            "records stay in the file"
        );
    }
}
