//! The Kafka frame: a big-endian `i32` size followed by that many bytes of request or
//! response.
//!
//! The size is checked from the first four bytes alone, before the reader reserves or
//! allocates anything for the body, so a client cannot make the broker allocate more than
//! `socket.request.max.bytes` by sending a large size prefix.

use thiserror::Error;

/// Bytes of the size prefix.
pub const FRAME_HEADER_BYTES: usize = 4;
/// Kafka's default `socket.request.max.bytes` (100 MiB).
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: usize = 104_857_600;

/// Why a frame's size prefix was refused. Either way the connection cannot be resynced
/// and should be closed.
#[derive(Debug, Clone, Copy, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge { size: i64, max: usize },
    #[error("negative frame size {0}")]
    Negative(i32),
}

/// The size prefix once four bytes are there: `Ok(None)` before that, `Ok(Some(len))`
/// for a body length in `0..=max` (so the reader can reserve capacity), an error for a
/// negative size or one above `max`.
pub fn peek_frame_size(buf: &[u8], max: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..FRAME_HEADER_BYTES) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if size < 0 {
        return Err(FrameError::Negative(size));
    }
    // A non-negative i32 always fits a usize on the targets we build for (>= 32 bits).
    let len = size as usize;
    if len > max {
        return Err(FrameError::TooLarge {
            size: i64::from(size),
            max,
        });
    }
    Ok(Some(len))
}

/// The body length when the whole frame (`4 + len` bytes) is at the start of `buf`;
/// `Ok(None)` while it is incomplete. Errors as [`peek_frame_size`]. The body is
/// `buf[4..4 + len]`.
pub fn frame_body_len(buf: &[u8], max: usize) -> Result<Option<usize>, FrameError> {
    Ok(peek_frame_size(buf, max)?.filter(|&len| buf.len() - FRAME_HEADER_BYTES >= len))
}

/// Appends the size prefix for a body of `body_len` bytes. Bodies longer than `i32::MAX`
/// cannot be framed; that is a caller bug, so it is asserted in debug builds and the
/// length saturates in release builds (the peer then rejects the frame).
pub fn write_frame_header(out: &mut impl bytes::BufMut, body_len: usize) {
    debug_assert!(
        i32::try_from(body_len).is_ok(),
        "frame body of {body_len} bytes cannot be framed"
    );
    out.put_i32(i32::try_from(body_len).unwrap_or(i32::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn incomplete_prefix_waits() {
        for len in 0..4 {
            assert_eq!(peek_frame_size(&[0u8; 3][..len], 100), Ok(None));
            assert_eq!(frame_body_len(&[0u8; 3][..len], 100), Ok(None));
        }
    }

    #[test]
    fn whole_frame_is_reported_once_complete() {
        let mut buf = Vec::new();
        write_frame_header(&mut buf, 5);
        assert_eq!(buf, [0, 0, 0, 5]);
        assert_eq!(peek_frame_size(&buf, 100), Ok(Some(5)));
        assert_eq!(frame_body_len(&buf, 100), Ok(None));
        buf.extend_from_slice(b"hell");
        assert_eq!(frame_body_len(&buf, 100), Ok(None));
        buf.extend_from_slice(b"o");
        assert_eq!(frame_body_len(&buf, 100), Ok(Some(5)));
        // Bytes of the next frame after it do not matter.
        buf.extend_from_slice(&[0, 0]);
        assert_eq!(frame_body_len(&buf, 100), Ok(Some(5)));
        // An empty body is a complete frame of four bytes.
        assert_eq!(frame_body_len(&[0, 0, 0, 0], 100), Ok(Some(0)));
    }

    #[test]
    fn refuses_bad_sizes_from_the_prefix_alone() {
        assert_eq!(
            peek_frame_size(&[0xff, 0xff, 0xff, 0xff], 100),
            Err(FrameError::Negative(-1))
        );
        assert_eq!(
            frame_body_len(&[0x80, 0, 0, 0], 100),
            Err(FrameError::Negative(i32::MIN))
        );
        assert_eq!(
            peek_frame_size(&[0, 0, 0, 101], 100),
            Err(FrameError::TooLarge {
                size: 101,
                max: 100
            })
        );
        assert_eq!(peek_frame_size(&[0, 0, 0, 100], 100), Ok(Some(100)));
        assert_eq!(
            frame_body_len(&[0x7f, 0xff, 0xff, 0xff], SOCKET_REQUEST_MAX_BYTES_DEFAULT),
            Err(FrameError::TooLarge {
                size: i64::from(i32::MAX),
                max: SOCKET_REQUEST_MAX_BYTES_DEFAULT
            })
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_agrees_with_peek(buf in proptest::collection::vec(any::<u8>(), 0..16), max in 0usize..32) {
            let peeked = peek_frame_size(&buf, max);
            match frame_body_len(&buf, max) {
                Ok(Some(len)) => {
                    prop_assert_eq!(peeked, Ok(Some(len)));
                    prop_assert!(buf.len() >= 4 + len && len <= max);
                }
                Ok(None) => prop_assert!(buf.len() < 4 || matches!(peeked, Ok(Some(len)) if buf.len() < 4 + len)),
                Err(error) => prop_assert_eq!(peeked, Err(error)),
            }
        }
    }
}
