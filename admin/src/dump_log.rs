//! `broker dump-log FILE [--print-data] [--json]`: what Kafka's `kafka-dump-log.sh` prints for
//! a `.log` segment, read with the `wire` crate's batch and record decoding.
//!
//! A batch whose CRC does not match is still printed (with `crc_valid: false`), as Kafka does;
//! a tail that cannot be framed as a batch (truncated, zero-filled or with a nonsense length)
//! ends the dump with a line saying where and why, since nothing after it can be located.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde_json::json;
use wire::record_batch::{self, BatchHeader, Compression, Record, TimestampType};

/// What to print, from the command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Print every record as well as every batch.
    pub print_data: bool,
    /// One JSON object per line instead of Kafka's text format.
    pub json: bool,
}

/// What a dump found, so the command can exit non-zero on a damaged segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub batches: u64,
    pub records: u64,
    pub bad_crc_batches: u64,
    /// Byte position of an unreadable tail (or of a batch whose records could not be read).
    pub corrupt_at: Option<usize>,
}

/// Dumps the segment at `path` to `out`.
pub fn run(path: &Path, options: Options, out: &mut dyn Write) -> anyhow::Result<Summary> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = file.metadata()?.len();
    // An empty file cannot be mapped; it is a valid, empty segment.
    if len == 0 {
        if !options.json {
            writeln!(out, "Dumping {}", path.display())?;
        }
        return Ok(Summary::default());
    }
    // SAFETY: the map is read-only; a segment truncated underneath us by a running broker
    // could fault, which is why this tool is meant for segments the broker is not writing.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .with_context(|| format!("mapping {}", path.display()))?;
    if !options.json {
        writeln!(out, "Dumping {}", path.display())?;
    }
    dump(&map, options, out)
}

/// Dumps the batches in `buf` (the contents of one segment).
pub fn dump(buf: &[u8], options: Options, out: &mut dyn Write) -> anyhow::Result<Summary> {
    let mut summary = Summary::default();
    let mut pos = 0;
    if !options.json {
        if let Ok(first) = BatchHeader::parse(buf) {
            writeln!(out, "Log starting offset: {}", first.base_offset)?;
        }
    }
    while pos < buf.len() {
        let rest = &buf[pos..];
        if rest.iter().all(|&b| b == 0) {
            // Space the broker preallocated for the active segment (or that a crash left
            // behind it): the end of the log, not a corrupt batch.
            break;
        }
        let header = match BatchHeader::parse(rest) {
            Ok(header) => header,
            Err(error) => {
                report_corrupt(out, options, pos, rest.len(), &error.to_string())?;
                summary.corrupt_at = Some(pos);
                break;
            }
        };
        let batch = &rest[..header.total_bytes()];
        let crc_valid = record_batch::compute_crc(batch) == Some(header.crc);
        summary.batches += 1;
        if !crc_valid {
            summary.bad_crc_batches += 1;
        }
        print_batch(out, options, &header, pos, crc_valid)?;
        if options.print_data {
            match print_records(out, options, batch, &mut summary) {
                Ok(()) => {}
                Err(error) => {
                    report_corrupt(out, options, pos, batch.len(), &error)?;
                    summary.corrupt_at.get_or_insert(pos);
                }
            }
        }
        pos += batch.len();
    }
    Ok(summary)
}

fn compression_name(codec: Compression) -> &'static str {
    match codec {
        Compression::None => "none",
        Compression::Gzip => "gzip",
        Compression::Snappy => "snappy",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    }
}

fn timestamp_type_name(kind: TimestampType) -> &'static str {
    match kind {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// Kafka's `DefaultRecordBatch.lastSequence`: the base sequence plus the offset span,
/// wrapping at `i32::MAX`, or -1 without a sequence.
fn last_sequence(header: &BatchHeader) -> i32 {
    if header.base_sequence < 0 {
        return -1;
    }
    let last = i64::from(header.base_sequence) + i64::from(header.last_offset_delta);
    if last > i64::from(i32::MAX) {
        (last - i64::from(i32::MAX) - 1) as i32
    } else {
        last as i32
    }
}

fn print_batch(
    out: &mut dyn Write,
    options: Options,
    header: &BatchHeader,
    position: usize,
    crc_valid: bool,
) -> std::io::Result<()> {
    let compression = compression_name(header.compression());
    let timestamp_type = timestamp_type_name(header.timestamp_type());
    if options.json {
        let line = json!({
            "type": "batch",
            "base_offset": header.base_offset,
            "last_offset": header.last_offset(),
            "count": header.records_count,
            "position": position,
            "size": header.total_bytes(),
            "magic": header.magic,
            "crc": header.crc,
            "crc_valid": crc_valid,
            "compression": compression,
            "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch,
            "base_sequence": header.base_sequence,
            "last_sequence": last_sequence(header),
            "partition_leader_epoch": header.partition_leader_epoch,
            "is_transactional": header.is_transactional(),
            "is_control": header.is_control(),
            "delete_horizon_ms": header.delete_horizon_ms(),
            "timestamp_type": timestamp_type,
            "max_timestamp": header.max_timestamp,
        });
        return writeln!(out, "{line}");
    }
    let horizon = match header.delete_horizon_ms() {
        Some(ms) => format!("OptionalLong[{ms}]"),
        None => "OptionalLong.empty".to_owned(),
    };
    writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
         producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
         isControl: {} deleteHorizonMs: {} position: {} {}: {} size: {} magic: {} \
         compresscodec: {} crc: {} isvalid: {}",
        header.base_offset,
        header.last_offset(),
        header.records_count,
        header.base_sequence,
        last_sequence(header),
        header.producer_id,
        header.producer_epoch,
        header.partition_leader_epoch,
        header.is_transactional(),
        header.is_control(),
        horizon,
        position,
        timestamp_type,
        header.max_timestamp,
        header.total_bytes(),
        header.magic,
        compression,
        header.crc,
        crc_valid,
    )
}

/// Prints the records of one batch; an `Err` describes the first record that could not be
/// read (after the ones before it were printed).
fn print_records(
    out: &mut dyn Write,
    options: Options,
    batch: &[u8],
    summary: &mut Summary,
) -> Result<(), String> {
    let records = record_batch::records(batch).map_err(|e| e.to_string())?;
    let header = *records.header();
    for record in records.iter() {
        let record = record.map_err(|e| e.to_string())?;
        summary.records += 1;
        print_record(out, options, &header, &record).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn lossy(bytes: Option<&[u8]>) -> Option<String> {
    bytes.map(|b| String::from_utf8_lossy(b).into_owned())
}

fn print_record(
    out: &mut dyn Write,
    options: Options,
    header: &BatchHeader,
    record: &Record<'_>,
) -> std::io::Result<()> {
    let timestamp_type = timestamp_type_name(header.timestamp_type());
    let sequence = if header.base_sequence < 0 {
        -1
    } else {
        header.base_sequence.wrapping_add(record.offset_delta)
    };
    if options.json {
        let headers: Vec<_> = record
            .headers
            .iter()
            .map(|h| {
                json!({
                    "key": String::from_utf8_lossy(h.key),
                    "value": lossy(h.value),
                })
            })
            .collect();
        let line = json!({
            "type": "record",
            "offset": record.offset,
            "timestamp_type": timestamp_type,
            "timestamp": record.timestamp,
            "sequence": sequence,
            "key": lossy(record.key),
            "value": lossy(record.value),
            "headers": headers,
        });
        return writeln!(out, "{line}");
    }
    let size = |b: Option<&[u8]>| b.map_or(-1, |b| b.len() as i64);
    let header_keys: Vec<_> = record
        .headers
        .iter()
        .map(|h| String::from_utf8_lossy(h.key).into_owned())
        .collect();
    let headers: Vec<_> = record
        .headers
        .iter()
        .map(|h| {
            format!(
                "{}:{}",
                String::from_utf8_lossy(h.key),
                lossy(h.value).unwrap_or_else(|| "null".to_owned())
            )
        })
        .collect();
    writeln!(
        out,
        "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}] \
         headers: [{}] key: {} payload: {}",
        record.offset,
        timestamp_type,
        record.timestamp,
        size(record.key),
        size(record.value),
        sequence,
        header_keys.join(", "),
        headers.join(", "),
        lossy(record.key).unwrap_or_else(|| "null".to_owned()),
        lossy(record.value).unwrap_or_else(|| "null".to_owned()),
    )
}

fn report_corrupt(
    out: &mut dyn Write,
    options: Options,
    position: usize,
    bytes_left: usize,
    why: &str,
) -> std::io::Result<()> {
    if options.json {
        let line = json!({
            "type": "corrupt",
            "position": position,
            "bytes": bytes_left,
            "error": why,
        });
        return writeln!(out, "{line}");
    }
    writeln!(
        out,
        "Found {bytes_left} invalid bytes at position {position}: {why}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    /// One uncompressed v2 batch holding `records` (key, value) pairs, built by hand so the
    /// test does not share the encoder it is checking against.
    fn batch(base_offset: i64, records: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut body = BytesMut::new();
        for (i, (key, value)) in records.iter().enumerate() {
            let mut rec = Vec::new();
            rec.push(0u8); // attributes
            put_varint(&mut rec, 0); // timestamp delta
            put_varint(&mut rec, i as i64); // offset delta
            put_varint(&mut rec, key.len() as i64);
            rec.extend_from_slice(key);
            put_varint(&mut rec, value.len() as i64);
            rec.extend_from_slice(value);
            put_varint(&mut rec, 1); // one header
            put_varint(&mut rec, 1);
            rec.push(b'h');
            put_varint(&mut rec, 1);
            rec.push(b'v');
            let mut len = Vec::new();
            put_varint(&mut len, rec.len() as i64);
            body.put_slice(&len);
            body.put_slice(&rec);
        }
        let mut out = BytesMut::new();
        out.put_i64(base_offset);
        out.put_i32((49 + body.len()) as i32);
        out.put_i32(0); // partition leader epoch
        out.put_i8(2);
        out.put_u32(0); // crc, patched below
        out.put_i16(0);
        out.put_i32(records.len() as i32 - 1);
        out.put_i64(1_000);
        out.put_i64(1_000);
        out.put_i64(-1);
        out.put_i16(-1);
        out.put_i32(-1);
        out.put_i32(records.len() as i32);
        out.put_slice(&body);
        let crc = crc32c::crc32c(&out[21..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out.to_vec()
    }

    fn put_varint(out: &mut Vec<u8>, value: i64) {
        let mut v = ((value << 1) ^ (value >> 63)) as u64;
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn dump_text(buf: &[u8], options: Options) -> (String, Summary) {
        let mut out = Vec::new();
        let summary = dump(buf, options, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), summary)
    }

    #[test]
    fn prints_batches_and_records() {
        let mut seg = batch(0, &[(b"k0", b"v0"), (b"k1", b"v1")]);
        let second_at = seg.len();
        seg.extend(batch(2, &[(b"k2", b"v2")]));
        let options = Options {
            print_data: true,
            json: false,
        };
        let (text, summary) = dump_text(&seg, options);
        assert_eq!(summary.batches, 2);
        assert_eq!(summary.records, 3);
        assert_eq!(summary.corrupt_at, None);
        assert!(
            text.contains("baseOffset: 0 lastOffset: 1 count: 2"),
            "{text}"
        );
        assert!(
            text.contains("baseOffset: 2 lastOffset: 2 count: 1"),
            "{text}"
        );
        assert!(text.contains(&format!("position: {second_at} ")), "{text}");
        assert!(text.contains("isvalid: true"));
        assert!(text.contains("| offset: 1 CreateTime: 1000 keySize: 2 valueSize: 2"));
        assert!(
            text.contains("headers: [h:v] key: k2 payload: v2"),
            "{text}"
        );
    }

    #[test]
    fn json_lines_parse_and_carry_records() {
        let seg = batch(5, &[(b"a", b"b")]);
        let options = Options {
            print_data: true,
            json: true,
        };
        let (text, _) = dump_text(&seg, options);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "batch");
        assert_eq!(lines[0]["crc_valid"], true);
        assert_eq!(lines[1]["offset"], 5);
        assert_eq!(lines[1]["key"], "a");
        assert_eq!(lines[1]["value"], "b");
        assert_eq!(lines[1]["headers"][0]["key"], "h");
    }

    #[test]
    fn preallocated_zero_tail_is_the_end() {
        let mut seg = batch(0, &[(b"k", b"v")]);
        seg.extend(batch(1, &[(b"k", b"v")]));
        seg.resize(seg.len() + (64 << 10), 0);
        let (text, summary) = dump_text(&seg, Options::default());
        assert_eq!(summary.batches, 2);
        assert_eq!(summary.corrupt_at, None, "{text}");
        // Zeros followed by bytes are not a tail: still reported.
        let last = seg.len() - 1;
        seg[last] = 1;
        let (_, summary) = dump_text(&seg, Options::default());
        assert!(summary.corrupt_at.is_some());
    }

    #[test]
    fn bad_crc_is_reported_and_dump_continues() {
        let mut seg = batch(0, &[(b"k", b"v")]);
        let last = seg.len() - 1;
        seg[last] ^= 0xff;
        seg.extend(batch(1, &[(b"k", b"v")]));
        let (text, summary) = dump_text(&seg, Options::default());
        assert_eq!(summary.batches, 2);
        assert_eq!(summary.bad_crc_batches, 1);
        assert!(text.contains("isvalid: false"));
    }

    #[test]
    fn truncated_tail_is_reported_not_a_panic() {
        let mut seg = batch(0, &[(b"k", b"v")]);
        let good = seg.len();
        let next = batch(1, &[(b"k", b"v")]);
        seg.extend_from_slice(&next[..next.len() - 3]);
        let (text, summary) = dump_text(
            &seg,
            Options {
                print_data: true,
                json: false,
            },
        );
        assert_eq!(summary.batches, 1);
        assert_eq!(summary.corrupt_at, Some(good));
        assert!(
            text.contains(&format!("invalid bytes at position {good}")),
            "{text}"
        );
        // Every prefix of a segment dumps without panicking.
        let full = [seg.clone(), next].concat();
        for cut in 0..full.len() {
            dump_text(
                &full[..cut],
                Options {
                    print_data: true,
                    json: true,
                },
            );
        }
    }
}
