//! Fuzz target bodies for everything the broker decodes from a client before it trusts it:
//! the frame reader, request headers, every request and response body, record batches with
//! their codecs, and the server side of every SASL mechanism.
//!
//! Each target is a plain function of the input bytes, so the same code runs under
//! cargo-fuzz (`../fuzz`, nightly, libFuzzer) and in the stable-toolchain bounded run of
//! `tests/bounded.rs`, which the workspace's test command runs. A target panics, and so
//! fails the run, when
//! - a decoder panics (they must return a typed error, whatever the bytes), or
//! - a property of the decoded value fails (re-encoding is stable, validated batches iterate,
//!   authentication only succeeds as a user whose secret was used), or
//! - the call held more memory at once than its bound: [`decode_bound`] for everything
//!   sized by the input, plus the configured ceiling ([`FRAME_MAX_BYTES`],
//!   [`BATCH_MAX_DECOMPRESSED_BYTES`]) where the broker sizes a buffer by a claim it has
//!   already checked against that ceiling. Measured by [`alloc::Counting`], which the
//!   binary running the targets installs as its global allocator.

pub mod alloc;
pub mod mutate;
mod request;
mod sasl_target;

use bytes::{Buf, BytesMut};
use wire::compression::{self, Compression};
use wire::frame;
use wire::record_batch::{self, BatchHeader, RecordLimits, TimestampRule, TimestampType};

pub use request::all_apis_covered;

/// Bytes a decode may hold per input byte. Decoded structs are larger than their encoding
/// (an empty compact array is one byte on the wire and a 24-byte `Vec` plus its element,
/// up to a few hundred bytes, in memory), and a growing `Vec` briefly holds up to twice
/// its elements.
pub const ALLOC_BOUND_FACTOR: usize = 256;
/// Bytes a call may hold whatever its input: codec state (gzip's window and tables), SASL
/// fixtures and a `Bytes` copy's header.
pub const ALLOC_BOUND_SLACK: usize = 256 << 10;
/// The frame reader's `socket.request.max.bytes` here. The broker defaults to 100 MiB; the
/// bound scales with it, and a small value keeps an execution that reserves it cheap.
pub const FRAME_MAX_BYTES: usize = 1 << 20;
/// The broker's read chunk (`api::connection::READ_CHUNK_BYTES`), reserved ahead of a read.
pub const READ_CHUNK_BYTES: usize = 64 << 10;
/// Ceiling on a batch's decompressed records here (the broker's is 64 MiB or
/// `max.message.bytes`); as for [`FRAME_MAX_BYTES`], the bound scales with it.
pub const BATCH_MAX_DECOMPRESSED_BYTES: usize = 1 << 20;
/// What the LZ4 frame decoder holds for the largest block size a frame may declare (4 MiB):
/// the compressed block and the decompressed block with its 64 KiB window, each possibly
/// rounded up by `Vec`'s growth.
pub const LZ4_DECODER_BYTES: usize = 20 << 20;

/// The bound on what a call may hold at once when everything it allocates is sized by an
/// input of `input_len` bytes.
pub fn decode_bound(input_len: usize) -> usize {
    ALLOC_BOUND_FACTOR
        .saturating_mul(input_len)
        .saturating_add(ALLOC_BOUND_SLACK)
}

/// A target: panics on a failure, returns otherwise.
pub type Target = fn(&[u8]);

/// Every target by name, as `../fuzz/fuzz_targets` and the corpus directories name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("frame", frame),
    ("request_header", request_header),
    ("request_body", request_body),
    ("record_batch", record_batch),
    ("sasl", sasl),
];

fn check_bound(target: &str, input_len: usize, peak: usize, bound: usize) {
    assert!(
        peak <= bound,
        "{target}: {peak} bytes held at once for an input of {input_len} bytes, above the bound of {bound}"
    );
}

/// The frame reader as the connection loop drives it (`api::connection`): the input is the
/// byte stream of one connection, arriving in reads of 1, 3, 64 and 4096 bytes in turn;
/// every whole frame is split off and decoded (header, then body) as the broker would, and
/// a refused size prefix ends the stream.
///
/// Bound: the buffer reserved ahead of a read (the checked frame size or a read chunk,
/// doubled by `BytesMut`'s growth) plus [`decode_bound`].
pub fn frame(data: &[u8]) {
    let bound = decode_bound(data.len())
        .saturating_add(2 * (frame::FRAME_HEADER_BYTES + FRAME_MAX_BYTES + READ_CHUNK_BYTES));
    let ((), peak) = alloc::measure(|| frame_stream(data));
    check_bound("frame", data.len(), peak, bound);
}

fn frame_stream(data: &[u8]) {
    const READS: [usize; 4] = [1, 3, 64, 4096];
    let mut buffer = BytesMut::new();
    let mut rest = data;
    let mut reads = READS.iter().cycle();
    loop {
        loop {
            let peeked = frame::peek_frame_size(&buffer, FRAME_MAX_BYTES);
            match frame::frame_body_len(&buffer, FRAME_MAX_BYTES) {
                Err(error) => {
                    assert_eq!(peeked, Err(error), "peek and whole-frame disagree");
                    return;
                }
                Ok(None) => {
                    assert!(
                        buffer.len() < frame::FRAME_HEADER_BYTES
                            || matches!(peeked, Ok(Some(len)) if buffer.len() < frame::FRAME_HEADER_BYTES + len),
                        "a whole frame was not reported"
                    );
                    break;
                }
                Ok(Some(len)) => {
                    assert_eq!(peeked, Ok(Some(len)));
                    assert!(len <= FRAME_MAX_BYTES);
                    let mut request = buffer.split_to(frame::FRAME_HEADER_BYTES + len).freeze();
                    request.advance(frame::FRAME_HEADER_BYTES);
                    request::decode_request(&request);
                }
            }
        }
        let Some(&read) = reads.next() else { return };
        if rest.is_empty() {
            return;
        }
        let frame_bytes = match frame::peek_frame_size(&buffer, FRAME_MAX_BYTES) {
            Ok(Some(len)) => frame::FRAME_HEADER_BYTES + len,
            Ok(None) => 0,
            Err(_) => return,
        };
        buffer.reserve(
            frame_bytes
                .saturating_sub(buffer.len())
                .max(READ_CHUNK_BYTES),
        );
        let n = read.min(rest.len());
        buffer.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
    }
}

/// A request header as it starts a frame's body: the first four bytes (API key and
/// version) choose the header version as the broker does, the header decodes or errs, and a
/// decoded header re-encodes to what decodes to it again. Every header version is tried too.
pub fn request_header(data: &[u8]) {
    let bound = decode_bound(data.len());
    let ((), peak) = alloc::measure(|| request::header(data));
    check_bound("request_header", data.len(), peak, bound);
}

/// One message body: the first two bytes are the API key (top bit set: the response of key
/// `key & 0x7fff`), the next two the version, the rest the body, decoded as that generated
/// type at that version (and, when the version is outside the type's range, which must err,
/// at one inside it). Unknown keys map onto the known ones. A decoded body must re-encode to
/// exactly `encoded_len` bytes that decode and re-encode to the same bytes.
pub fn request_body(data: &[u8]) {
    let bound = decode_bound(data.len());
    let ((), peak) = alloc::measure(|| request::body(data));
    check_bound("request_body", data.len(), peak, bound);
}

/// Record batches as a Produce carries them: the input's batches checked as they are (CRC,
/// header, count), then again with the CRC recomputed so mutations reach the records; each
/// valid batch is walked by `validate_records` (decompressing with the broker's bounded
/// codecs) and by `records`, which must agree; patching the base offset and leader epoch
/// keeps a batch valid. The bytes after the batch header are also decompressed as each
/// codec.
///
/// Bound: [`decode_bound`] plus two decompressed batches (a growing buffer doubles) and the
/// LZ4 decoder's block buffers.
pub fn record_batch(data: &[u8]) {
    let bound = decode_bound(data.len())
        .saturating_add(2 * BATCH_MAX_DECOMPRESSED_BYTES)
        .saturating_add(LZ4_DECODER_BYTES);
    let ((), peak) = alloc::measure(|| batches(data));
    check_bound("record_batch", data.len(), peak, bound);
}

fn batches(data: &[u8]) {
    let mut scratch = Vec::new();
    for batch in record_batch::batches(data) {
        let Ok((header, bytes)) = batch else { break };
        walk_batch(&header, bytes, &mut scratch);
    }
    for batch in record_batch::stored_batches(data) {
        if batch.is_err() {
            break;
        }
    }
    if let Ok(header) = BatchHeader::parse(data) {
        let mut fixed = data[..header.total_bytes()].to_vec();
        if let Some(crc) = record_batch::compute_crc(&fixed) {
            fixed[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        match record_batch::validate_batch(&fixed) {
            Ok(header) => walk_batch(&header, &fixed, &mut scratch),
            // A count `validate_batch` refuses still reaches the record iterator.
            Err(_) => iterate_records(&fixed, None),
        }
    }
    let body = data.get(record_batch::BATCH_HEADER_BYTES..).unwrap_or(data);
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        if compression::decompress_into(codec, body, &mut scratch, BATCH_MAX_DECOMPRESSED_BYTES)
            .is_ok()
        {
            assert!(scratch.len() <= BATCH_MAX_DECOMPRESSED_BYTES);
        }
    }
}

fn walk_batch(header: &BatchHeader, batch: &[u8], scratch: &mut Vec<u8>) {
    let rules = [
        RecordLimits {
            max_decompressed_bytes: BATCH_MAX_DECOMPRESSED_BYTES,
            require_keys: false,
            timestamps: None,
        },
        RecordLimits {
            max_decompressed_bytes: BATCH_MAX_DECOMPRESSED_BYTES,
            require_keys: true,
            timestamps: Some(TimestampRule {
                topic_type: TimestampType::CreateTime,
                now: 1_700_000_000_000,
                before_max_ms: 3_600_000,
                after_max_ms: 3_600_000,
            }),
        },
    ];
    let mut walked = None;
    for limits in &rules {
        if let Ok(stats) = record_batch::validate_records(header, batch, scratch, limits) {
            assert!(stats.records == header.records_count);
            walked = Some(stats.records);
        }
    }
    // Free the scratch before `records` decompresses into its own buffer, as the broker
    // does not hold both either.
    *scratch = Vec::new();
    iterate_records(batch, walked);

    let mut patched = batch.to_vec();
    record_batch::patch_base_offset(&mut patched, header.base_offset.wrapping_add(1000));
    record_batch::patch_partition_leader_epoch(&mut patched, 7);
    let again = record_batch::validate_batch(&patched).expect("patching keeps a batch valid");
    assert_eq!(again.base_offset, header.base_offset.wrapping_add(1000));
    assert_eq!(again.partition_leader_epoch, 7);
}

/// Iterates every record and header; when `validated` says how many records
/// `validate_records` walked, the iterator must yield exactly those, without an error.
fn iterate_records(batch: &[u8], validated: Option<i32>) {
    let Ok(records) = record_batch::records_with_limit(batch, BATCH_MAX_DECOMPRESSED_BYTES) else {
        assert!(
            validated.is_none(),
            "a validated batch's records did not open"
        );
        return;
    };
    let mut count = 0i32;
    let mut failed = false;
    for record in &records {
        match record {
            Ok(record) => {
                count += 1;
                for header in record.headers.iter() {
                    let _ = header.key_str();
                }
                std::hint::black_box(record.to_owned_record());
            }
            Err(_) => failed = true,
        }
    }
    if let Some(expected) = validated {
        assert!(!failed, "a validated batch's records failed to iterate");
        assert_eq!(count, expected, "validate_records and records disagree");
    }
}

/// A server-side SASL exchange; see [`sasl_target`] for the input's layout. The bound is
/// [`decode_bound`], the crate's promise (a small constant times the token's bytes).
pub fn sasl(data: &[u8]) {
    sasl_target::fixtures();
    let bound = decode_bound(data.len());
    let ((), peak) = alloc::measure(|| sasl_target::exchange(data));
    check_bound("sasl", data.len(), peak, bound);
}
