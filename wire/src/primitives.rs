//! Hand-written codec primitives used by the generated message codecs (`crate::generated`).
//!
//! Every reader takes `&mut Bytes` and consumes what it read; every length or count is
//! checked against the bytes left before anything is allocated, so decoding is bounded by
//! the input and never panics. `bytes` and `records` values are zero-copy slices of the
//! input (`Bytes::split_to`).

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::varint::{self, VarintError};

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unexpected end of input: need {need} bytes, have {have}")]
    UnexpectedEof { need: usize, have: usize },
    #[error("invalid length {length} for {what}")]
    InvalidLength { what: &'static str, length: i64 },
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("invalid varint: {0}")]
    InvalidVarint(VarintError),
    #[error("api key {api_key} does not support version {version}")]
    UnsupportedVersion { api_key: i16, version: i16 },
    #[error("non-nullable field {field} was null")]
    NullNotAllowed { field: &'static str },
}

impl From<VarintError> for DecodeError {
    fn from(e: VarintError) -> Self {
        DecodeError::InvalidVarint(e)
    }
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("api key {api_key} does not support version {version}")]
    UnsupportedVersion { api_key: i16, version: i16 },
    #[error("non-nullable field {field} is null")]
    NullNotAllowed { field: &'static str },
    #[error("field {field} has a non-default value but does not exist in version {version}")]
    FieldNotInVersion { field: &'static str, version: i16 },
    #[error("{what} is too long: {length}")]
    TooLong { what: &'static str, length: usize },
}

/// Decodes a value of a given protocol version from the front of `buf`.
pub trait Decodable: Sized {
    fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError>;
}

/// Encodes a value at a given protocol version.
pub trait Encodable {
    fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError>;
    /// Bytes `encode` writes at `version` (exact when `encode` succeeds).
    fn encoded_len(&self, version: i16) -> usize;
}

/// The error codes a response carries: every `ErrorCode` field, nested ones included (what
/// Kafka's `AbstractResponse.errorCounts` counts), for the request-error metrics. Implemented
/// by every response struct; a walk allocates nothing.
pub trait ErrorCodes {
    /// Calls `f` with each error code, `NONE` (0) included.
    fn for_each_error_code<F: FnMut(i16)>(&self, f: &mut F);
}

/// Implemented by every top-level request/response/header type.
pub trait Message {
    /// The API key; -1 for the request and response headers.
    const API_KEY: i16;
    const MIN_VERSION: i16;
    const MAX_VERSION: i16;
    /// First flexible version; `i16::MAX` if never flexible.
    const FLEXIBLE_MIN: i16;
}

/// A Kafka UUID (topic ids, directory ids, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub const ZERO: Uuid = Uuid([0; 16]);
}

impl fmt::Display for Uuid {
    /// Base64url without padding, as Kafka's `Uuid.toString`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::with_capacity(22);
        for chunk in self.0.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            let chars = chunk.len() + 1;
            for i in 0..chars {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        f.write_str(&out)
    }
}

// ---------------------------------------------------------------------------------------
// Reading

#[inline]
fn need(buf: &Bytes, n: usize) -> Result<(), DecodeError> {
    if buf.len() < n {
        Err(DecodeError::UnexpectedEof {
            need: n,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

macro_rules! readers {
    ($($name:ident: $ty:ty = $get:ident, $n:expr;)*) => {$(
        #[inline]
        pub fn $name(buf: &mut Bytes) -> Result<$ty, DecodeError> {
            need(buf, $n)?;
            Ok(buf.$get())
        }
    )*};
}

readers! {
    read_i8: i8 = get_i8, 1;
    read_i16: i16 = get_i16, 2;
    read_u16: u16 = get_u16, 2;
    read_i32: i32 = get_i32, 4;
    read_u32: u32 = get_u32, 4;
    read_i64: i64 = get_i64, 8;
    read_f64: f64 = get_f64, 8;
}

#[inline]
pub fn read_bool(buf: &mut Bytes) -> Result<bool, DecodeError> {
    Ok(read_i8(buf)? != 0)
}

#[inline]
pub fn read_uuid(buf: &mut Bytes) -> Result<Uuid, DecodeError> {
    need(buf, 16)?;
    let mut out = [0u8; 16];
    buf.copy_to_slice(&mut out);
    Ok(Uuid(out))
}

#[inline]
pub fn read_uvarint(buf: &mut Bytes) -> Result<u32, DecodeError> {
    let (value, used) = varint::read_unsigned_varint(buf)?;
    buf.advance(used);
    Ok(value)
}

/// Takes `n` bytes off the front, zero-copy.
#[inline]
pub fn take(buf: &mut Bytes, n: usize) -> Result<Bytes, DecodeError> {
    need(buf, n)?;
    Ok(buf.split_to(n))
}

/// Reads a length prefix: `None` for null. Non-compact: int16 (strings) or int32 (bytes),
/// -1 null; compact: unsigned varint of length+1, 0 null. Checked against the bytes left.
fn read_len(
    buf: &mut Bytes,
    compact: bool,
    wide: bool,
    what: &'static str,
) -> Result<Option<usize>, DecodeError> {
    let length: i64 = if compact {
        i64::from(read_uvarint(buf)?) - 1
    } else if wide {
        i64::from(read_i32(buf)?)
    } else {
        i64::from(read_i16(buf)?)
    };
    if length == -1 {
        return Ok(None);
    }
    if length < 0 || (!wide && length > 0x7fff) {
        return Err(DecodeError::InvalidLength { what, length });
    }
    let length = length as usize;
    need(buf, length)?;
    Ok(Some(length))
}

pub fn read_nullable_string(buf: &mut Bytes, compact: bool) -> Result<Option<String>, DecodeError> {
    match read_len(buf, compact, false, "string")? {
        None => Ok(None),
        Some(n) => {
            let raw = buf.split_to(n);
            match std::str::from_utf8(&raw) {
                Ok(s) => Ok(Some(s.to_owned())),
                Err(_) => Err(DecodeError::InvalidUtf8),
            }
        }
    }
}

pub fn read_string(
    buf: &mut Bytes,
    compact: bool,
    field: &'static str,
) -> Result<String, DecodeError> {
    read_nullable_string(buf, compact)?.ok_or(DecodeError::NullNotAllowed { field })
}

pub fn read_nullable_bytes(buf: &mut Bytes, compact: bool) -> Result<Option<Bytes>, DecodeError> {
    Ok(read_len(buf, compact, true, "bytes")?.map(|n| buf.split_to(n)))
}

pub fn read_bytes(
    buf: &mut Bytes,
    compact: bool,
    field: &'static str,
) -> Result<Bytes, DecodeError> {
    read_nullable_bytes(buf, compact)?.ok_or(DecodeError::NullNotAllowed { field })
}

/// Reads an array count (`None` for null). `min_element_len` is the fewest bytes an
/// element can take (at least 1 is assumed): a count that cannot fit in what is left is
/// refused before anything is allocated.
pub fn read_array_len(
    buf: &mut Bytes,
    compact: bool,
    min_element_len: usize,
) -> Result<Option<usize>, DecodeError> {
    let count: i64 = if compact {
        i64::from(read_uvarint(buf)?) - 1
    } else {
        i64::from(read_i32(buf)?)
    };
    if count == -1 {
        return Ok(None);
    }
    if count < 0 {
        return Err(DecodeError::InvalidLength {
            what: "array",
            length: count,
        });
    }
    let needed = (count as u64).saturating_mul(min_element_len.max(1) as u64);
    if needed > buf.len() as u64 {
        return Err(DecodeError::InvalidLength {
            what: "array",
            length: count,
        });
    }
    Ok(Some(count as usize))
}

/// Capacity to reserve for `n` decoded elements (bounded; the vector grows past it).
#[inline]
pub fn initial_capacity(n: usize) -> usize {
    n.min(1024)
}

/// Reads the tag count of a tagged-field section, bounded by the bytes left (a tagged
/// field takes at least 2 bytes).
pub fn read_tag_count(buf: &mut Bytes) -> Result<usize, DecodeError> {
    let n = read_uvarint(buf)? as usize;
    if n.saturating_mul(2) > buf.len() {
        return Err(DecodeError::InvalidLength {
            what: "tagged fields",
            length: n as i64,
        });
    }
    Ok(n)
}

/// Reads one tagged field's tag and its (zero-copy) data.
pub fn read_tagged_field(buf: &mut Bytes) -> Result<(u32, Bytes), DecodeError> {
    let tag = read_uvarint(buf)?;
    let size = read_uvarint(buf)? as usize;
    Ok((tag, take(buf, size)?))
}

// ---------------------------------------------------------------------------------------
// Writing

#[inline]
pub fn write_i8(buf: &mut BytesMut, v: i8) {
    buf.put_i8(v)
}
#[inline]
pub fn write_i16(buf: &mut BytesMut, v: i16) {
    buf.put_i16(v)
}
#[inline]
pub fn write_u16(buf: &mut BytesMut, v: u16) {
    buf.put_u16(v)
}
#[inline]
pub fn write_i32(buf: &mut BytesMut, v: i32) {
    buf.put_i32(v)
}
#[inline]
pub fn write_u32(buf: &mut BytesMut, v: u32) {
    buf.put_u32(v)
}
#[inline]
pub fn write_i64(buf: &mut BytesMut, v: i64) {
    buf.put_i64(v)
}
#[inline]
pub fn write_f64(buf: &mut BytesMut, v: f64) {
    buf.put_f64(v)
}
#[inline]
pub fn write_bool(buf: &mut BytesMut, v: bool) {
    buf.put_u8(u8::from(v))
}
#[inline]
pub fn write_uuid(buf: &mut BytesMut, v: &Uuid) {
    buf.put_slice(&v.0)
}
#[inline]
pub fn write_uvarint(buf: &mut BytesMut, v: u32) {
    varint::write_unsigned_varint(buf, v)
}
#[inline]
pub fn uvarint_len(v: u32) -> usize {
    varint::unsigned_varint_len(v)
}

fn write_len(buf: &mut BytesMut, len: Option<usize>, compact: bool, wide: bool) {
    match (len, compact) {
        (None, true) => write_uvarint(buf, 0),
        (Some(n), true) => write_uvarint(buf, n as u32 + 1),
        (None, false) if wide => write_i32(buf, -1),
        (None, false) => write_i16(buf, -1),
        (Some(n), false) if wide => write_i32(buf, n as i32),
        (Some(n), false) => write_i16(buf, n as i16),
    }
}

#[inline]
fn len_len(len: Option<usize>, compact: bool, wide: bool) -> usize {
    match (len, compact) {
        (None, true) => 1,
        (Some(n), true) => uvarint_len(n as u32 + 1),
        (_, false) if wide => 4,
        (_, false) => 2,
    }
}

pub fn write_nullable_string(
    buf: &mut BytesMut,
    v: Option<&str>,
    compact: bool,
) -> Result<(), EncodeError> {
    if let Some(s) = v {
        if s.len() > 0x7fff {
            return Err(EncodeError::TooLong {
                what: "string",
                length: s.len(),
            });
        }
    }
    write_len(buf, v.map(str::len), compact, false);
    if let Some(s) = v {
        buf.put_slice(s.as_bytes());
    }
    Ok(())
}

pub fn write_string(buf: &mut BytesMut, v: &str, compact: bool) -> Result<(), EncodeError> {
    write_nullable_string(buf, Some(v), compact)
}

pub fn nullable_string_len(v: Option<&str>, compact: bool) -> usize {
    len_len(v.map(str::len), compact, false) + v.map_or(0, str::len)
}

pub fn string_len(v: &str, compact: bool) -> usize {
    nullable_string_len(Some(v), compact)
}

pub fn write_nullable_bytes(
    buf: &mut BytesMut,
    v: Option<&[u8]>,
    compact: bool,
) -> Result<(), EncodeError> {
    if let Some(b) = v {
        if b.len() > i32::MAX as usize - 1 {
            return Err(EncodeError::TooLong {
                what: "bytes",
                length: b.len(),
            });
        }
    }
    write_len(buf, v.map(<[u8]>::len), compact, true);
    if let Some(b) = v {
        buf.put_slice(b);
    }
    Ok(())
}

pub fn write_bytes(buf: &mut BytesMut, v: &[u8], compact: bool) -> Result<(), EncodeError> {
    write_nullable_bytes(buf, Some(v), compact)
}

/// The length before `len` bytes of a non-null BYTES field (INT32, or in compact encoding an
/// unsigned varint of `len + 1`), for a writer that lays the bytes themselves elsewhere.
pub fn write_bytes_len(buf: &mut BytesMut, len: usize, compact: bool) -> Result<(), EncodeError> {
    if len > i32::MAX as usize - 1 {
        return Err(EncodeError::TooLong {
            what: "bytes",
            length: len,
        });
    }
    write_len(buf, Some(len), compact, true);
    Ok(())
}

/// Bytes `write_bytes_len` writes for `len`.
pub fn bytes_len_len(len: usize, compact: bool) -> usize {
    len_len(Some(len), compact, true)
}

/// Where a generated `encode_with` sends each `records` field, in encoding order. A response
/// whose records stay in files (Fetch) writes their length, cuts the buffer there and lays the
/// file ranges beside it, in the one encoding pass, instead of copying them in.
pub trait RecordsWriter {
    fn write(
        &mut self,
        buf: &mut BytesMut,
        records: Option<&Bytes>,
        compact: bool,
    ) -> Result<(), EncodeError>;
}

/// Records written in place, as `encode` does.
pub struct InlineRecords;

impl RecordsWriter for InlineRecords {
    fn write(
        &mut self,
        buf: &mut BytesMut,
        records: Option<&Bytes>,
        compact: bool,
    ) -> Result<(), EncodeError> {
        write_nullable_bytes(buf, records.map(|b| &b[..]), compact)
    }
}

pub fn nullable_bytes_len(v: Option<&[u8]>, compact: bool) -> usize {
    len_len(v.map(<[u8]>::len), compact, true) + v.map_or(0, <[u8]>::len)
}

pub fn bytes_len(v: &[u8], compact: bool) -> usize {
    nullable_bytes_len(Some(v), compact)
}

/// Writes an array count (`None` for null).
pub fn write_array_len(
    buf: &mut BytesMut,
    n: Option<usize>,
    compact: bool,
) -> Result<(), EncodeError> {
    if let Some(n) = n {
        if n > i32::MAX as usize - 1 {
            return Err(EncodeError::TooLong {
                what: "array",
                length: n,
            });
        }
    }
    write_len(buf, n, compact, true);
    Ok(())
}

pub fn array_len_len(n: Option<usize>, compact: bool) -> usize {
    len_len(n, compact, true)
}

/// Writes the unknown tagged fields whose tag is below `below`, advancing `next`
/// (unknown fields are kept sorted by tag, merged with the known ones).
pub fn write_unknown_tagged_below(
    buf: &mut BytesMut,
    unknown: &[(u32, Bytes)],
    next: &mut usize,
    below: u32,
) {
    while let Some((tag, data)) = unknown.get(*next) {
        if *tag >= below {
            break;
        }
        write_uvarint(buf, *tag);
        write_uvarint(buf, data.len() as u32);
        buf.put_slice(data);
        *next += 1;
    }
}

/// Writes the unknown tagged fields from `next` on (after the known ones).
pub fn write_unknown_tagged_rest(buf: &mut BytesMut, unknown: &[(u32, Bytes)], next: usize) {
    for (tag, data) in unknown.get(next..).unwrap_or(&[]) {
        write_uvarint(buf, *tag);
        write_uvarint(buf, data.len() as u32);
        buf.put_slice(data);
    }
}

/// Bytes the unknown tagged fields take (tags, sizes and data).
pub fn unknown_tagged_len(unknown: &[(u32, Bytes)]) -> usize {
    unknown
        .iter()
        .map(|(tag, data)| uvarint_len(*tag) + uvarint_len(data.len() as u32) + data.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::*;

    fn b(bytes: &[u8]) -> Bytes {
        Bytes::copy_from_slice(bytes)
    }

    #[test]
    fn strings() {
        let mut out = BytesMut::new();
        write_string(&mut out, "abc", false).unwrap();
        write_string(&mut out, "abc", true).unwrap();
        write_nullable_string(&mut out, None, false).unwrap();
        write_nullable_string(&mut out, None, true).unwrap();
        write_string(&mut out, "", true).unwrap();
        assert_eq!(&out[..], b"\x00\x03abc\x04abc\xff\xff\x00\x01");
        assert_eq!(string_len("abc", false), 5);
        assert_eq!(string_len("abc", true), 4);
        assert_eq!(nullable_string_len(None, true), 1);
        assert_eq!(nullable_string_len(None, false), 2);
        let mut buf = out.freeze();
        assert_eq!(read_string(&mut buf, false, "f").unwrap(), "abc");
        assert_eq!(read_string(&mut buf, true, "f").unwrap(), "abc");
        assert_eq!(read_nullable_string(&mut buf, false).unwrap(), None);
        assert_eq!(
            read_string(&mut buf, true, "f"),
            Err(DecodeError::NullNotAllowed { field: "f" })
        );
        assert_eq!(read_string(&mut buf, true, "f").unwrap(), "");
        assert!(buf.is_empty());
    }

    #[test]
    fn string_bounds() {
        // Length past the end.
        assert!(matches!(
            read_string(&mut b(b"\x00\x05abc"), false, "f"),
            Err(DecodeError::UnexpectedEof { need: 5, have: 3 })
        ));
        assert!(matches!(
            read_string(&mut b(b"\x06abc"), true, "f"),
            Err(DecodeError::UnexpectedEof { .. })
        ));
        // Negative lengths other than -1.
        assert!(matches!(
            read_nullable_string(&mut b(b"\xff\xfe"), false),
            Err(DecodeError::InvalidLength { length: -2, .. })
        ));
        assert!(matches!(
            read_nullable_bytes(&mut b(b"\xff\xff\xff\xfe"), false),
            Err(DecodeError::InvalidLength { length: -2, .. })
        ));
        assert_eq!(
            read_string(&mut b(b"\x00\x02\xff\xfe"), false, "f"),
            Err(DecodeError::InvalidUtf8)
        );
        // Truncated varint length.
        assert!(matches!(
            read_string(&mut b(b"\x80"), true, "f"),
            Err(DecodeError::InvalidVarint(_))
        ));
        assert!(matches!(
            read_i32(&mut b(b"\x00")),
            Err(DecodeError::UnexpectedEof { need: 4, have: 1 })
        ));
    }

    #[test]
    fn bytes_zero_copy() {
        let input = b(b"\x00\x00\x00\x03xyz\x04abc\xff\xff\xff\xff\x00");
        let base = input.as_ptr() as usize;
        let mut buf = input.clone();
        let x = read_bytes(&mut buf, false, "f").unwrap();
        assert_eq!(&x[..], b"xyz");
        assert_eq!(x.as_ptr() as usize, base + 4);
        assert_eq!(&read_bytes(&mut buf, true, "f").unwrap()[..], b"abc");
        assert_eq!(read_nullable_bytes(&mut buf, false).unwrap(), None);
        assert_eq!(read_nullable_bytes(&mut buf, true).unwrap(), None);
        assert!(buf.is_empty());
        let mut out = BytesMut::new();
        write_bytes(&mut out, b"xyz", false).unwrap();
        write_bytes(&mut out, b"abc", true).unwrap();
        write_nullable_bytes(&mut out, None, false).unwrap();
        write_nullable_bytes(&mut out, None, true).unwrap();
        assert_eq!(out.freeze(), input);
    }

    #[test]
    fn arrays() {
        assert_eq!(
            read_array_len(&mut b(b"\xff\xff\xff\xff"), false, 1),
            Ok(None)
        );
        assert_eq!(read_array_len(&mut b(b"\x00"), true, 1), Ok(None));
        assert_eq!(read_array_len(&mut b(b"\x03abc"), true, 1), Ok(Some(2)));
        assert!(read_array_len(&mut b(b"\x03abc"), true, 2).is_err());
        assert!(read_array_len(&mut b(b"\xff\xff\xff\xfe"), false, 1).is_err());
        assert!(read_array_len(&mut b(b"\x7f\xff\xff\xff"), false, usize::MAX).is_err());
    }

    #[test]
    fn huge_array_count_is_refused_without_allocating() {
        let start = std::time::Instant::now();
        let mut buf = b(&[0x7f, 0xff, 0xff, 0x00]);
        let result = MetadataRequest::decode(&mut buf, 1);
        assert!(
            matches!(
                result,
                Err(DecodeError::InvalidLength { what: "array", .. })
            ),
            "{result:?}"
        );
        // Same through a flexible version (compact count) and an array of int32s.
        let mut buf = b(&[0xff, 0xff, 0xff, 0xff, 0x07]);
        assert!(MetadataRequest::decode(&mut buf, 12).is_err());
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn uuid_display() {
        assert_eq!(Uuid::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
        // Kafka: new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L).toString()
        let u = Uuid([
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
            0x32, 0x10,
        ]);
        assert_eq!(u.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
    }

    #[test]
    fn unknown_tagged_fields_round_trip() {
        // ApiVersionsRequest v3: client name, client version, then tags 5 and 9 unknown.
        let mut out = BytesMut::new();
        write_string(&mut out, "a", true).unwrap();
        write_string(&mut out, "1", true).unwrap();
        out.put_slice(&[2, 5, 1, 0xaa, 9, 0]);
        let bytes = out.freeze();
        let msg = ApiVersionsRequest::decode(&mut bytes.clone(), 3).unwrap();
        assert_eq!(
            msg.unknown_tagged_fields,
            vec![(5, b(&[0xaa])), (9, Bytes::new())]
        );
        let mut again = BytesMut::new();
        msg.encode(&mut again, 3).unwrap();
        assert_eq!(again.freeze(), bytes);
        assert_eq!(msg.encoded_len(3), bytes.len());
    }

    #[test]
    fn encode_errors() {
        let mut msg = MetadataRequest {
            topics: None,
            ..Default::default()
        };
        // Null topics are not allowed in v0.
        assert_eq!(
            msg.encode(&mut BytesMut::new(), 0),
            Err(EncodeError::NullNotAllowed { field: "Topics" })
        );
        // AllowAutoTopicCreation=false does not exist in v3 and is not ignorable.
        msg.topics = Some(vec![]);
        msg.allow_auto_topic_creation = false;
        assert_eq!(
            msg.encode(&mut BytesMut::new(), 3),
            Err(EncodeError::FieldNotInVersion {
                field: "AllowAutoTopicCreation",
                version: 3
            })
        );
        assert!(matches!(
            msg.encode(&mut BytesMut::new(), 99),
            Err(EncodeError::UnsupportedVersion {
                api_key: 3,
                version: 99
            })
        ));
    }

    /// A tiny deterministic generator (xorshift), no dependency needed.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_input_never_panics() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut input = Vec::new();
        for round in 0..2000 {
            input.clear();
            let len = (rng.next() % 96) as usize;
            for _ in 0..len {
                // Bias towards small bytes so lengths and counts are sometimes plausible.
                let r = rng.next();
                input.push(if r.is_multiple_of(3) {
                    (r >> 8) as u8
                } else {
                    ((r >> 8) % 4) as u8
                });
            }
            if round % 7 == 0 {
                input.splice(0..0, [0x7f, 0xff, 0xff, 0x00]);
            }
            crate::generated::fuzz_decode_all(&input);
        }
    }
}
