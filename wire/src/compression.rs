//! The compression codecs of Kafka record batches: gzip, snappy, lz4 and zstd.
//!
//! Decompression is always bounded: every decoder is read through a limit of
//! `max + 1` bytes and refused once it would go past `max`, so a small malicious batch
//! (a "zip bomb") cannot exhaust memory. Compression exists for tests, tools and future
//! recompression; it writes what the Java client writes.
//!
//! Codec details that matter for interoperability:
//! - gzip: an RFC 1952 stream; concatenated members are accepted, like Java's
//!   `GZIPInputStream`.
//! - snappy: the Java client writes Xerial's framing (`0x82 "SNAPPY" 0x00`, version and
//!   compatible i32s, then blocks of a big-endian i32 length and a raw snappy block);
//!   librdkafka and kafka-python may also send a bare raw snappy block. Both decode.
//! - lz4: the LZ4 *frame* format (magic `04 22 4D 18`), not bare blocks.
//! - zstd: a zstd frame. The decoder keeps zstd's default window limit (2^27 bytes),
//!   which is also what the Java client's zstd-jni accepts.

use std::io::{Read, Write};

use thiserror::Error;

pub use crate::record_batch::Compression;

/// The default ceiling on a batch's decompressed records (256 MiB).
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 256 << 20;

/// The Xerial snappy stream header: magic, then version 1 and minimum compatible
/// version 1 as big-endian i32s.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;
/// Block size of the Java client's `SnappyOutputStream` (32 KiB).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// Why (de)compression failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompressionError {
    #[error("decompressed data exceeds the limit of {max} bytes")]
    TooLarge { max: usize },
    #[error("corrupt {codec:?} data: {reason}")]
    Corrupt { codec: Compression, reason: String },
}

/// Decompresses `input` with `codec`, refusing to produce more than `max` bytes.
/// `Compression::None` returns a copy (still bounded by `max`).
pub fn decompress(
    codec: Compression,
    input: &[u8],
    max: usize,
) -> Result<Vec<u8>, CompressionError> {
    // Start from a guess proportional to the input (most batches compress 2-10x), never
    // from `max`, so a lying or tiny input does not reserve the whole budget.
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(max).min(1 << 20));
    decompress_into(codec, input, &mut out, max)?;
    Ok(out)
}

/// As [`decompress`], into `out` (cleared first), so a caller that keeps `out` between
/// calls reuses its capacity: once it is large enough, decoding allocates nothing for the
/// output (the codecs' own per-call state aside). `out.len() <= max` on success; on error
/// `out` holds an unspecified prefix.
pub fn decompress_into(
    codec: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
    max: usize,
) -> Result<(), CompressionError> {
    out.clear();
    match codec {
        Compression::None => {
            if input.len() > max {
                return Err(CompressionError::TooLarge { max });
            }
            out.extend_from_slice(input);
            Ok(())
        }
        Compression::Gzip => {
            read_bounded(codec, flate2::read::MultiGzDecoder::new(input), out, max)
        }
        Compression::Snappy => decompress_snappy(input, out, max),
        Compression::Lz4 => {
            read_bounded(codec, lz4_flex::frame::FrameDecoder::new(input), out, max)
        }
        Compression::Zstd => {
            let decoder =
                zstd::stream::read::Decoder::with_buffer(input).map_err(|e| corrupt(codec, e))?;
            read_bounded(codec, decoder, out, max)
        }
    }
}

/// Compresses `input` the way the Java producer does (Xerial framing for snappy, LZ4
/// frames with 64 KiB independent blocks, gzip and zstd at their default levels).
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(input).map_err(|e| corrupt(codec, e))?;
            encoder.finish().map_err(|e| corrupt(codec, e))
        }
        Compression::Snappy => compress_snappy_xerial(input),
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder.write_all(input).map_err(|e| corrupt(codec, e))?;
            encoder.finish().map_err(|e| corrupt(codec, e))
        }
        Compression::Zstd => zstd::stream::encode_all(input, 3).map_err(|e| corrupt(codec, e)),
    }
}

/// Snappy with Xerial framing, as the Java client's `SnappyOutputStream` writes it.
pub fn compress_snappy_xerial(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    let mut out =
        Vec::with_capacity(XERIAL_HEADER_BYTES + snap::raw::max_compress_len(input.len()));
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in input.chunks(XERIAL_BLOCK_BYTES) {
        let block = encoder
            .compress_vec(chunk)
            .map_err(|e| corrupt(Compression::Snappy, e))?;
        out.extend_from_slice(&(block.len() as i32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

/// A bare raw snappy block, as some non-Java clients send.
pub fn compress_snappy_raw(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    snap::raw::Encoder::new()
        .compress_vec(input)
        .map_err(|e| corrupt(Compression::Snappy, e))
}

/// Decodes Xerial-framed or raw snappy. Raw snappy blocks declare their decompressed
/// length up front, so the limit is checked before anything is allocated.
fn decompress_snappy(input: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), CompressionError> {
    if !input.starts_with(&XERIAL_MAGIC) {
        return snappy_block_into(input, out, max);
    }
    if input.len() < XERIAL_HEADER_BYTES {
        return Err(corrupt(Compression::Snappy, "truncated xerial header"));
    }
    let mut rest = &input[XERIAL_HEADER_BYTES..];
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(corrupt(
                Compression::Snappy,
                "truncated xerial block length",
            ));
        }
        let length = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let length = usize::try_from(length)
            .map_err(|_| corrupt(Compression::Snappy, "negative xerial block length"))?;
        rest = &rest[4..];
        if length > rest.len() {
            return Err(corrupt(
                Compression::Snappy,
                "xerial block runs past the input",
            ));
        }
        snappy_block_into(&rest[..length], out, max)?;
        rest = &rest[length..];
    }
    Ok(())
}

/// Appends one raw snappy block to `out`, keeping `out.len() <= max`.
fn snappy_block_into(block: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), CompressionError> {
    let length = snap::raw::decompress_len(block).map_err(|e| corrupt(Compression::Snappy, e))?;
    if length > max.saturating_sub(out.len()) {
        return Err(CompressionError::TooLarge { max });
    }
    let start = out.len();
    out.resize(start + length, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| corrupt(Compression::Snappy, e))?;
    out.truncate(start + written);
    Ok(())
}

/// Reads a decoder to its end into `out` through a `max + 1` limit, so going over the
/// limit is detected without ever holding more than `max + 1` bytes.
fn read_bounded(
    codec: Compression,
    reader: impl Read,
    out: &mut Vec<u8>,
    max: usize,
) -> Result<(), CompressionError> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(limit)
        .read_to_end(out)
        .map_err(|e| corrupt(codec, e))?;
    if out.len() > max {
        return Err(CompressionError::TooLarge { max });
    }
    Ok(())
}

fn corrupt(codec: Compression, reason: impl std::fmt::Display) -> CompressionError {
    CompressionError::Corrupt {
        codec,
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i % 251) as u8 ^ (i / 1000) as u8)
            .collect()
    }

    #[test]
    fn round_trips_every_codec() {
        for codec in CODECS {
            for len in [
                0,
                1,
                100,
                XERIAL_BLOCK_BYTES,
                XERIAL_BLOCK_BYTES * 3 + 17,
                200_000,
            ] {
                let data = sample(len);
                let packed = compress(codec, &data).unwrap();
                assert_eq!(
                    decompress(codec, &packed, len).unwrap(),
                    data,
                    "{codec:?} {len}"
                );
            }
        }
    }

    #[test]
    fn raw_snappy_decodes_too() {
        let data = sample(100_000);
        let packed = compress_snappy_raw(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &packed, data.len()).unwrap(),
            data
        );
    }

    #[test]
    fn refuses_to_exceed_the_limit() {
        // 64 MiB of zeros compresses to a few KiB in every codec: a zip bomb in miniature.
        let zeros = vec![0u8; 64 << 20];
        for codec in CODECS {
            let packed = compress(codec, &zeros).unwrap();
            assert_eq!(
                decompress(codec, &packed, 1 << 20),
                Err(CompressionError::TooLarge { max: 1 << 20 }),
                "{codec:?}"
            );
            // Exactly at the limit is fine.
            assert_eq!(
                decompress(codec, &packed, zeros.len()).unwrap().len(),
                zeros.len()
            );
        }
    }

    #[test]
    fn concatenated_gzip_members_decode() {
        let mut packed = compress(Compression::Gzip, b"hello ").unwrap();
        packed.extend(compress(Compression::Gzip, b"world").unwrap());
        assert_eq!(
            decompress(Compression::Gzip, &packed, 100).unwrap(),
            b"hello world"
        );
    }

    #[test]
    fn corrupt_input_is_an_error() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut packed = compress(codec, &sample(10_000)).unwrap();
            packed.truncate(packed.len() / 2);
            assert!(decompress(codec, &packed, 1 << 20).is_err(), "{codec:?}");
        }
        // A xerial stream whose block length lies.
        let mut packed = compress_snappy_xerial(b"abc").unwrap();
        packed[XERIAL_HEADER_BYTES..XERIAL_HEADER_BYTES + 4]
            .copy_from_slice(&1000i32.to_be_bytes());
        assert!(decompress(Compression::Snappy, &packed, 1 << 20).is_err());
    }

    proptest! {
        #[test]
        fn random_input_never_panics(codec in 0u8..5, data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let codec = Compression::from_id(codec).unwrap();
            let _ = decompress(codec, &data, 1 << 16);
        }

        #[test]
        fn random_xerial_blocks_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut input = XERIAL_MAGIC.to_vec();
            input.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
            input.extend_from_slice(&data);
            let _ = decompress(Compression::Snappy, &input, 1 << 16);
        }
    }
}
