//! Variable-length integers of the Kafka protocol.
//!
//! Two encodings live here: the unsigned LEB128 varint used by flexible versions (compact
//! lengths, tagged-field tags and sizes) and the zigzag varint/varlong used inside record
//! batch v2 records. Decoders read from a slice and return the value with the number of
//! bytes consumed; they never read past the slice and refuse over-long encodings.

use thiserror::Error;

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum VarintError {
    #[error("varint runs past the end of the buffer")]
    Truncated,
    #[error("varint is longer than {max_bytes} bytes")]
    TooLong { max_bytes: usize },
}

/// Reads an unsigned varint of at most 5 bytes (a `u32`).
#[inline]
pub fn read_unsigned_varint(buf: &[u8]) -> Result<(u32, usize), VarintError> {
    let (value, used) = read_unsigned(buf, 5)?;
    if value > u64::from(u32::MAX) {
        return Err(VarintError::TooLong { max_bytes: 5 });
    }
    Ok((value as u32, used))
}

/// Reads an unsigned varint of at most 10 bytes (a `u64`).
#[inline]
pub fn read_unsigned_varlong(buf: &[u8]) -> Result<(u64, usize), VarintError> {
    read_unsigned(buf, 10)
}

/// Reads a zigzag-encoded signed varint (record fields: lengths, deltas, header counts).
#[inline]
pub fn read_varint(buf: &[u8]) -> Result<(i32, usize), VarintError> {
    let (raw, used) = read_unsigned_varint(buf)?;
    Ok((((raw >> 1) as i32) ^ -((raw & 1) as i32), used))
}

/// Reads a zigzag-encoded signed varlong (record timestamp delta).
#[inline]
pub fn read_varlong(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    let (raw, used) = read_unsigned_varlong(buf)?;
    Ok((((raw >> 1) as i64) ^ -((raw & 1) as i64), used))
}

// Inlined: every record field on the produce path's record walk is one of these.
#[inline]
fn read_unsigned(buf: &[u8], max_bytes: usize) -> Result<(u64, usize), VarintError> {
    // Most record fields (deltas, small lengths, header counts) fit in one byte.
    if let Some(&byte) = buf.first() {
        if byte & 0x80 == 0 {
            return Ok((u64::from(byte), 1));
        }
    }
    let mut value: u64 = 0;
    for (index, &byte) in buf.iter().enumerate() {
        if index == max_bytes {
            return Err(VarintError::TooLong { max_bytes });
        }
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Ok((value, index + 1));
        }
    }
    if buf.len() >= max_bytes {
        Err(VarintError::TooLong { max_bytes })
    } else {
        Err(VarintError::Truncated)
    }
}

/// Appends an unsigned varint.
pub fn write_unsigned_varint(out: &mut impl bytes::BufMut, value: u32) {
    write_unsigned(out, u64::from(value));
}

/// Appends an unsigned varlong.
pub fn write_unsigned_varlong(out: &mut impl bytes::BufMut, value: u64) {
    write_unsigned(out, value);
}

/// Appends a zigzag signed varint.
pub fn write_varint(out: &mut impl bytes::BufMut, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Appends a zigzag signed varlong.
pub fn write_varlong(out: &mut impl bytes::BufMut, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut impl bytes::BufMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Bytes an unsigned varint of `value` takes.
pub const fn unsigned_varint_len(value: u32) -> usize {
    unsigned_len(value as u64)
}

/// Bytes an unsigned varlong of `value` takes.
pub const fn unsigned_varlong_len(value: u64) -> usize {
    unsigned_len(value)
}

/// Bytes a zigzag varint of `value` takes.
pub const fn varint_len(value: i32) -> usize {
    unsigned_len(((value << 1) ^ (value >> 31)) as u32 as u64)
}

/// Bytes a zigzag varlong of `value` takes.
pub const fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

const fn unsigned_len(mut value: u64) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn boundaries() {
        for (value, len) in [
            (0u32, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u32::MAX, 5),
        ] {
            let mut out = Vec::new();
            write_unsigned_varint(&mut out, value);
            assert_eq!(out.len(), len, "{value}");
            assert_eq!(unsigned_varint_len(value), len);
            assert_eq!(read_unsigned_varint(&out), Ok((value, len)));
        }
        for (value, encoded) in [(0i32, 0u8), (-1, 1), (1, 2), (-2, 3), (63, 126), (-64, 127)] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out, vec![encoded]);
        }
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(
            read_unsigned_varint(&[0x80, 0x80]),
            Err(VarintError::Truncated)
        );
        assert_eq!(read_unsigned_varint(&[]), Err(VarintError::Truncated));
        assert_eq!(
            read_unsigned_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(VarintError::TooLong { max_bytes: 5 })
        );
        // Five bytes that overflow 32 bits.
        assert!(read_unsigned_varint(&[0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
    }

    proptest! {
        #[test]
        fn zigzag_round_trip(v in any::<i64>(), w in any::<i32>()) {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            prop_assert_eq!(out.len(), varlong_len(v));
            prop_assert_eq!(read_varlong(&out), Ok((v, out.len())));
            let mut out = Vec::new();
            write_varint(&mut out, w);
            prop_assert_eq!(out.len(), varint_len(w));
            prop_assert_eq!(read_varint(&out), Ok((w, out.len())));
        }
    }
}
