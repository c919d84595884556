//! Reading a batch's records: [`records`] decompresses (bounded) or borrows the body, and
//! [`RecordIter`] decodes each record with a bounds-checked cursor, never panicking on
//! corrupt bytes.

use bytes::Bytes;

use crate::compression;
use crate::varint::{read_varint, read_varlong};

use super::{BatchError, BatchHeader, Compression, TimestampType, BATCH_HEADER_BYTES};

// ---------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------

/// The smallest encoded record: one byte each for length, attributes, timestamp delta,
/// offset delta, key length, value length and header count.
pub(super) const MIN_RECORD_BYTES: usize = 7;

/// One record, borrowed from the batch (or from the batch's decompressed records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's own attributes byte (unused by Kafka today, kept for fidelity).
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// `base_offset + offset_delta`.
    pub offset: i64,
    /// `base_timestamp + timestamp_delta` for CreateTime, the batch's `max_timestamp`
    /// for LogAppendTime (Kafka's rule).
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: RecordHeaders<'a>,
}

impl Record<'_> {
    /// An owned copy, for tests and for code that outlives the batch buffer.
    pub fn to_owned_record(&self) -> OwnedRecord {
        OwnedRecord {
            offset_delta: self.offset_delta,
            timestamp_delta: self.timestamp_delta,
            key: self.key.map(Bytes::copy_from_slice),
            value: self.value.map(Bytes::copy_from_slice),
            headers: self
                .headers
                .iter()
                .map(|h| {
                    (
                        String::from_utf8_lossy(h.key).into_owned(),
                        h.value.map(Bytes::copy_from_slice),
                    )
                })
                .collect(),
        }
    }
}

/// A record's headers, already checked for framing when the record was read, so
/// iterating them cannot fail and allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeaders<'a> {
    raw: &'a [u8],
    count: usize,
}

impl<'a> RecordHeaders<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The headers in order.
    pub fn iter(&self) -> HeaderIter<'a> {
        HeaderIter {
            raw: self.raw,
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for RecordHeaders<'a> {
    type Item = Header<'a>;
    type IntoIter = HeaderIter<'a>;
    fn into_iter(self) -> HeaderIter<'a> {
        self.iter()
    }
}

/// One record header. Kafka requires the key to be UTF-8 (the Java client decodes it
/// lossily); it is kept as bytes here so reading never fails on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    /// The key as a string, if it is valid UTF-8.
    pub fn key_str(&self) -> Result<&'a str, std::str::Utf8Error> {
        std::str::from_utf8(self.key)
    }
}

/// Iterator over pre-validated headers.
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    raw: &'a [u8],
    left: usize,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.left == 0 {
            return None;
        }
        // The bytes were walked by `read_header` when the record was read, so this cannot
        // fail; if it somehow did, ending the iteration is the panic-free answer.
        let mut cursor = Cursor {
            buf: self.raw,
            pos: 0,
        };
        let header = read_header(&mut cursor).ok()?;
        self.raw = &self.raw[cursor.pos..];
        self.left -= 1;
        Some(header)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// An owned record, as produced by [`Record::to_owned_record`] and consumed by
/// [`BatchBuilder::push_record`](super::BatchBuilder::push_record).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnedRecord {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// The records of one batch: borrowed from the batch when it is uncompressed, or the
/// batch's records decompressed once into an owned buffer. Iterate with [`Records::iter`]
/// (or `for record in &records`); each [`Record`] borrows from this value.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    header: BatchHeader,
    data: RecordsData<'a>,
}

#[derive(Debug, Clone)]
enum RecordsData<'a> {
    Borrowed(&'a [u8]),
    Decompressed(Vec<u8>),
}

impl<'a> Records<'a> {
    /// The batch header the records belong to.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The encoded records (decompressed if the batch was compressed).
    pub fn raw(&self) -> &[u8] {
        match &self.data {
            RecordsData::Borrowed(bytes) => bytes,
            RecordsData::Decompressed(bytes) => bytes,
        }
    }

    /// Iterates the records, checking each one's framing; the iterator yields an error and
    /// stops at the first corrupt record, and also errs if the batch holds fewer or more
    /// records than `records_count`.
    pub fn iter(&self) -> RecordIter<'_> {
        record_iter(&self.header, self.raw())
    }
}

/// Iterates the encoded (decompressed) records `raw` of the batch `header` describes.
pub(super) fn record_iter<'a>(header: &BatchHeader, raw: &'a [u8]) -> RecordIter<'a> {
    RecordIter {
        buf: raw,
        pos: 0,
        left: i64::from(header.records_count.max(0)),
        done: false,
        base_offset: header.base_offset,
        base_timestamp: header.base_timestamp,
        log_append_time: match header.timestamp_type() {
            TimestampType::LogAppendTime => Some(header.max_timestamp),
            TimestampType::CreateTime => None,
        },
    }
}

impl<'r> IntoIterator for &'r Records<'_> {
    type Item = Result<Record<'r>, BatchError>;
    type IntoIter = RecordIter<'r>;
    fn into_iter(self) -> RecordIter<'r> {
        self.iter()
    }
}

/// The records of one batch, decompressing at most
/// [`compression::DEFAULT_MAX_DECOMPRESSED_BYTES`]. The batch is parsed with
/// [`BatchHeader::parse`] only; call [`validate_batch`](super::validate_batch) first if the CRC matters.
pub fn records(batch: &[u8]) -> Result<Records<'_>, BatchError> {
    records_with_limit(batch, compression::DEFAULT_MAX_DECOMPRESSED_BYTES)
}

/// As [`records`], refusing to decompress more than `max_decompressed` bytes.
pub fn records_with_limit(
    batch: &[u8],
    max_decompressed: usize,
) -> Result<Records<'_>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let body = &batch[BATCH_HEADER_BYTES..header.total_bytes()];
    let data = match header.compression() {
        Compression::None => RecordsData::Borrowed(body),
        codec => RecordsData::Decompressed(compression::decompress(codec, body, max_decompressed)?),
    };
    Ok(Records { header, data })
}

/// Iterator over the records of a [`Records`].
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    left: i64,
    done: bool,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            self.done = true;
            return if self.pos == self.buf.len() {
                None
            } else {
                Some(Err(BatchError::CorruptRecord(
                    "bytes left after the last record",
                )))
            };
        }
        match self.read_record() {
            Ok(record) => {
                self.left -= 1;
                Some(Ok(record))
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            // One extra item may be an error about trailing bytes.
            let left = usize::try_from(self.left).unwrap_or(usize::MAX);
            (0, left.checked_add(1))
        }
    }
}

impl std::iter::FusedIterator for RecordIter<'_> {}

impl<'a> RecordIter<'a> {
    fn read_record(&mut self) -> Result<Record<'a>, BatchError> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return Err(BatchError::CorruptRecord(
                "fewer records than the batch's count",
            ));
        }
        let (length, used) =
            read_varint(rest).map_err(|_| BatchError::CorruptRecord("bad record length"))?;
        let length = usize::try_from(length)
            .map_err(|_| BatchError::CorruptRecord("negative record length"))?;
        let end = used
            .checked_add(length)
            .filter(|&end| end <= rest.len())
            .ok_or(BatchError::CorruptRecord(
                "record length runs past the batch",
            ))?;
        let mut cursor = Cursor {
            buf: &rest[used..end],
            pos: 0,
        };
        let attributes = cursor.u8("record attributes")? as i8;
        let timestamp_delta = cursor.varlong("timestamp delta")?;
        let offset_delta = cursor.varint("offset delta")?;
        let key = cursor.nullable_bytes("record key")?;
        let value = cursor.nullable_bytes("record value")?;
        let header_count = cursor.varint("header count")?;
        let count = usize::try_from(header_count)
            .map_err(|_| BatchError::CorruptRecord("negative header count"))?;
        let headers_start = cursor.pos;
        for _ in 0..count {
            // A lying count cannot spin long: every header consumes at least 2 bytes or
            // fails on the end of the record.
            read_header(&mut cursor)?;
        }
        if cursor.pos != cursor.buf.len() {
            return Err(BatchError::CorruptRecord(
                "record has bytes after its headers",
            ));
        }
        let headers = RecordHeaders {
            raw: &cursor.buf[headers_start..],
            count,
        };
        self.pos += end;
        Ok(Record {
            attributes,
            timestamp_delta,
            offset_delta,
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp: self
                .log_append_time
                .unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta)),
            key,
            value,
            headers,
        })
    }
}

/// A bounds-checked reader over one record's bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn u8(&mut self, what: &'static str) -> Result<u8, BatchError> {
        let byte = *self
            .buf
            .get(self.pos)
            .ok_or(BatchError::CorruptRecord(what))?;
        self.pos += 1;
        Ok(byte)
    }

    #[inline]
    fn varint(&mut self, what: &'static str) -> Result<i32, BatchError> {
        let (value, used) =
            read_varint(&self.buf[self.pos..]).map_err(|_| BatchError::CorruptRecord(what))?;
        self.pos += used;
        Ok(value)
    }

    #[inline]
    fn varlong(&mut self, what: &'static str) -> Result<i64, BatchError> {
        let (value, used) =
            read_varlong(&self.buf[self.pos..]).map_err(|_| BatchError::CorruptRecord(what))?;
        self.pos += used;
        Ok(value)
    }

    /// A varint length then that many bytes; -1 means null, other negatives are corrupt.
    #[inline]
    fn nullable_bytes(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, BatchError> {
        let length = self.varint(what)?;
        if length == -1 {
            return Ok(None);
        }
        self.bytes(length, what).map(Some)
    }

    #[inline]
    fn bytes(&mut self, length: i32, what: &'static str) -> Result<&'a [u8], BatchError> {
        let length = usize::try_from(length).map_err(|_| BatchError::CorruptRecord(what))?;
        let end = self
            .pos
            .checked_add(length)
            .filter(|&end| end <= self.buf.len())
            .ok_or(BatchError::CorruptRecord(what))?;
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }
}

fn read_header<'a>(cursor: &mut Cursor<'a>) -> Result<Header<'a>, BatchError> {
    let key_length = cursor.varint("header key length")?;
    if key_length < 0 {
        return Err(BatchError::CorruptRecord("negative header key length"));
    }
    let key = cursor.bytes(key_length, "header key")?;
    let value = cursor.nullable_bytes("header value")?;
    Ok(Header { key, value })
}
