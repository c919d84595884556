//! Record batch v2 building for the native producer, with no per-record allocation:
//! records are appended straight into one buffer that already holds room for the 61-byte
//! batch header, and the header (and CRC-32C, once) is written when the batch is closed.

use std::time::Instant;

use wire::record_batch::{Compression, BATCH_HEADER_BYTES};
use wire::varint::{varint_len, varlong_len, write_varint, write_varlong};

use crate::engine::DeliveryCallback;

/// A batch being filled for one partition.
pub struct OpenBatch {
    /// Header room (zeroed) followed by the encoded records.
    pub buf: Vec<u8>,
    pub count: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub callbacks: Vec<DeliveryCallback>,
    pub created: Instant,
}

impl OpenBatch {
    pub fn new(capacity: usize, created: Instant) -> OpenBatch {
        let mut buf = Vec::with_capacity(capacity.max(BATCH_HEADER_BYTES + 64));
        buf.resize(BATCH_HEADER_BYTES, 0);
        OpenBatch {
            buf,
            count: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            callbacks: Vec::new(),
            created,
        }
    }

    /// Bytes the batch holds so far (header included).
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends one record (v2 encoding, no headers).
    #[inline]
    pub fn append(&mut self, key: Option<&[u8]>, value: &[u8], timestamp: i64) {
        if self.count == 0 {
            self.base_timestamp = timestamp;
            self.max_timestamp = timestamp;
        } else if timestamp > self.max_timestamp {
            self.max_timestamp = timestamp;
        }
        let ts_delta = timestamp.wrapping_sub(self.base_timestamp);
        let offset_delta = self.count;
        let body = record_body_len(key, value.len(), ts_delta, offset_delta);
        let buf = &mut self.buf;
        buf.reserve(body + 5);
        write_varint(buf, body as i32);
        buf.push(0); // attributes
        write_varlong(buf, ts_delta);
        write_varint(buf, offset_delta);
        match key {
            Some(k) => {
                write_varint(buf, k.len() as i32);
                buf.extend_from_slice(k);
            }
            None => write_varint(buf, -1),
        }
        write_varint(buf, value.len() as i32);
        buf.extend_from_slice(value);
        buf.push(0); // header count: varint 0
        self.count += 1;
    }

    /// Closes the batch: header fields, compression and the CRC. Returns the batch bytes.
    pub fn finish(
        self,
        compression: Compression,
    ) -> Result<(Vec<u8>, Vec<DeliveryCallback>, i32), String> {
        let OpenBatch {
            buf,
            count,
            base_timestamp,
            max_timestamp,
            callbacks,
            ..
        } = self;
        let buf = finish_batch(buf, count, base_timestamp, max_timestamp, compression)?;
        Ok((buf, callbacks, count))
    }
}

/// Encoded size of a record's body (everything after its length varint).
#[inline]
pub fn record_body_len(
    key: Option<&[u8]>,
    value_len: usize,
    ts_delta: i64,
    offset_delta: i32,
) -> usize {
    1 + varlong_len(ts_delta)
        + varint_len(offset_delta)
        + match key {
            Some(k) => varint_len(k.len() as i32) + k.len(),
            None => 1,
        }
        + varint_len(value_len as i32)
        + value_len
        + 1
}

/// Upper bound of the bytes a record adds to a batch (used for the batch.size check).
#[inline]
pub fn record_size_upper_bound(key: Option<&[u8]>, value_len: usize) -> usize {
    // length (<=5) + attributes + ts delta (<=10) + offset delta (<=5) + key + value + headers
    5 + 1 + 10 + 5 + 5 + key.map_or(0, <[u8]>::len) + 5 + value_len + 1
}

/// Fills the 61-byte header of `buf` (records after it, uncompressed), compressing the
/// records if asked, and computes the CRC-32C once.
pub fn finish_batch(
    mut buf: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    compression: Compression,
) -> Result<Vec<u8>, String> {
    if compression != Compression::None {
        let compressed = wire::compression::compress(compression, &buf[BATCH_HEADER_BYTES..])
            .map_err(|e| e.to_string())?;
        buf.truncate(BATCH_HEADER_BYTES);
        buf.extend_from_slice(&compressed);
    }
    let batch_length = (buf.len() - 12) as i32;
    let h = &mut buf[..BATCH_HEADER_BYTES];
    h[0..8].copy_from_slice(&0i64.to_be_bytes()); // base offset
    h[8..12].copy_from_slice(&batch_length.to_be_bytes());
    h[12..16].copy_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    h[16] = 2; // magic
    h[21..23].copy_from_slice(&i16::from(compression.id()).to_be_bytes());
    h[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    h[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
    h[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    h[43..51].copy_from_slice(&(-1i64).to_be_bytes()); // producer id
    h[51..53].copy_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    h[53..57].copy_from_slice(&(-1i32).to_be_bytes()); // base sequence
    h[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&buf[21..]);
    buf[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(buf)
}

/// Kafka's `Utils.murmur2` (the Java client's key hash), bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    let length = data.len();
    let seed: u32 = 0x9747_b28c;
    let m: u32 = 0x5bd1_e995;
    let r = 24;
    let mut h: u32 = seed ^ (length as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(m);
        k ^= k >> r;
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= u32::from(tail[2]) << 16;
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(m);
        }
        2 => {
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(m);
        }
        1 => {
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(m);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(m);
    h ^= h >> 15;
    h as i32
}

/// The partition the Java client's default partitioner picks for a key.
#[inline]
pub fn partition_for_key(key: &[u8], num_partitions: usize) -> i32 {
    ((murmur2(key) & 0x7fff_ffff) as usize % num_partitions.max(1)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::record_batch::{records, validate_batch};

    #[test]
    fn murmur2_matches_kafka_utils_test_vectors() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
        assert_eq!(partition_for_key(b"21", 1), 0);
    }

    fn build(compression: Compression) {
        let now = Instant::now();
        let mut batch = OpenBatch::new(16384, now);
        let mut sent = Vec::new();
        for i in 0..300i64 {
            let key = if i % 3 == 0 {
                None
            } else {
                Some(format!("key-{i}").into_bytes())
            };
            let value = vec![(i % 251) as u8; (i as usize * 7) % 200];
            let ts = 1_700_000_000_000 + i * 13 - if i % 10 == 0 { 5000 } else { 0 };
            batch.append(key.as_deref(), &value, ts);
            sent.push((key, value, ts));
        }
        let (bytes, callbacks, count) = batch.finish(compression).unwrap();
        assert!(callbacks.is_empty());
        assert_eq!(count, 300);
        let header = validate_batch(&bytes).expect("valid batch");
        assert_eq!(header.records_count, 300);
        assert_eq!(header.last_offset_delta, 299);
        assert_eq!(header.compression(), compression);
        assert_eq!(header.total_bytes(), bytes.len());
        assert_eq!(header.producer_id, -1);
        assert_eq!(header.base_timestamp, 1_700_000_000_000 - 5000);
        assert_eq!(
            header.max_timestamp,
            sent.iter().map(|s| s.2).max().unwrap()
        );
        let recs = records(&bytes).unwrap();
        let mut n = 0;
        for (i, rec) in recs.iter().enumerate() {
            let rec = rec.unwrap();
            let (key, value, ts) = &sent[i];
            assert_eq!(rec.offset, i as i64);
            assert_eq!(rec.key, key.as_deref());
            assert_eq!(rec.value, Some(&value[..]));
            assert_eq!(rec.timestamp, *ts);
            assert!(rec.headers.is_empty());
            n += 1;
        }
        assert_eq!(n, 300);
    }

    #[test]
    fn built_batches_validate_and_read_back() {
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            build(c);
        }
    }

    #[test]
    fn body_len_matches_the_bytes_written() {
        let mut batch = OpenBatch::new(100, Instant::now());
        batch.append(Some(b"k"), b"value", 10);
        batch.append(None, &[0u8; 300], 9);
        let written = batch.len() - BATCH_HEADER_BYTES;
        let expect =
            1 + record_body_len(Some(b"k"), 5, 0, 0) + 2 + record_body_len(None, 300, -1, 1);
        assert_eq!(written, expect);
        assert!(record_size_upper_bound(None, 300) >= 2 + record_body_len(None, 300, -1, 1));
    }
}
